#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""kml: build, boot and test Kernel Mode Linux.  See README.md and ./kml --help."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from kmltool.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
