"""./kml cc: compile C into a program the rules of verified programs accept
(verify/kmlcc), checked by the reference checker.

The C library is nolibc from the kernel tree ./kml builds (build/linux),
which is prepared here if it is missing."""
from kmlcc import cc as kmlcc

from .. import patches
from ..paths import KmlError


def register(sub):
    p = sub.add_parser("cc", help="compile C to a program the verified-program rules accept",
                       description=kmlcc.__doc__.split("\n\n")[0])
    p.add_argument("sources", nargs="+", metavar="FILE.c")
    p.add_argument("-o", dest="out", default="a.out", help="output file (default a.out)")
    p.add_argument("-O", dest="opt", default="2", help="gcc's optimization level (default 2)")
    p.add_argument("-I", dest="incs", action="append", default=[], metavar="DIR")
    p.add_argument("-D", dest="defs", action="append", default=[], metavar="NAME[=VALUE]")
    p.add_argument("--keep", metavar="DIR", help="keep the intermediate files in DIR")
    p.set_defaults(func=main)


def main(a):
    patches.ensure_tree()
    extra = [f"-I{d}" for d in a.incs] + [f"-D{d}" for d in a.defs]
    try:
        r = kmlcc.compile_program(a.sources, a.out, a.opt, extra, a.keep)
    except kmlcc.CcError as e:
        raise KmlError(str(e)) from e
    print(r.line())
    return 0 if r.ok else 1
