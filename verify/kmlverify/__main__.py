"""``python3 -m kmlverify FILE...``: the same as ``./kml verify``."""
import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
