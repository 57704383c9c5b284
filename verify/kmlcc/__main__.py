import sys

from .cc import main

sys.exit(main())
