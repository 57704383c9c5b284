"""python3 -m kmltool: what ./kml runs (with host/ and verify/ on PYTHONPATH)."""
import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
