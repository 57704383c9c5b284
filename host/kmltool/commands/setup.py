"""./kml setup: install the missing Debian packages."""
from .. import setup


def register(sub):
    p = sub.add_parser("setup", help="install missing Debian packages")
    p.set_defaults(func=main)


def main(a):
    setup.setup()
    return 0
