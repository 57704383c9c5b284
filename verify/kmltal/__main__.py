"""``python3 -m kmltal``: see :mod:`kmltal.cli`."""
import sys

from .cli import main

sys.exit(main())
