"""Command line of ./kml: the top-level parser, made of the command
modules (commands/), and the call of the chosen command."""
import argparse

from . import commands
from .paths import KmlError
from .util import say


def build_parser():
    ap = argparse.ArgumentParser(prog="kml", description=(
        "Kernel Mode Linux: build the patched kernel and guest, boot QEMU, "
        "run commands, tests and benchmarks."))
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", required=True)
    for module in commands.MODULES:
        module.register(sub)
    return ap


def main(argv):
    a = build_parser().parse_args(argv)
    try:
        return a.func(a)
    except KmlError as e:
        say(f"error: {e}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
