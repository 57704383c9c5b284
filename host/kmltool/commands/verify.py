"""./kml verify: the admission scanner (verify/kmlverify) on ELF programs."""
import argparse

from kmlverify.cli import main as verify_main


def register(sub):
    p = sub.add_parser("verify", help="scan ELF programs for privileged instructions")
    p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def main(a):
    return verify_main(a.args[1:] if a.args[:1] == ["--"] else a.args)
