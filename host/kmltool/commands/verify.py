"""./kml verify: the admission scanner (verify/kmlverify) on ELF programs.

The subcommand's options are the scanner's own parser (kmlverify.cli),
so that ./kml verify --help lists them and every option README and
docs/verification.md show is parsed by the code that runs it."""
import os
import sys

from kmlverify import cli as verify_cli


def register(sub):
    parent = verify_cli.build_parser(add_help=False)
    sub.add_parser("verify", parents=[parent], help="scan ELF programs for privileged instructions",
                   description=parent.description)
    sub.choices["verify"].set_defaults(func=main)


def main(a):
    try:
        return verify_cli.run(a)
    except BrokenPipeError:            # the reader went away, e.g. `kml verify ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return verify_cli.EXIT_ERROR
