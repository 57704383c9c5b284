"""./kml patches apply|export|check: the kernel patch series."""
from pathlib import Path

from .. import bisect, kbuild, patches, setup
from ..paths import KmlError


def register(sub):
    p = sub.add_parser("patches", help="the kernel patch series")
    psub = p.add_subparsers(dest="pcmd", metavar="ACTION", required=True)
    psub.add_parser("apply", help="(re)create build/linux: source + series as commits"
                    ).set_defaults(func=apply)
    pe = psub.add_parser("export", help="write the tree's commits back to kernel/patches")
    pe.add_argument("--from", dest="tree", metavar="TREE",
                    help="tree to export (default build/linux)")
    pe.set_defaults(func=export)
    pc = psub.add_parser("check", help="run scripts/checkpatch.pl on every patch of the series",
                         description="checkpatch.pl on every patch; with --bisect, also "
                         "build every prefix of the series (a worktree build/linux-bisect "
                         "and build/obj-bisect-KERNEL; the first prefix is a full build, "
                         "the others incremental) and stop at the first that fails")
    pc.add_argument("--bisect", action="store_true",
                    help="also build each prefix of the series")
    pc.add_argument("--kernel", choices=list(kbuild.KERNELS),
                    help="the kernel configuration the prefixes are built as "
                    "(default: default)")
    pc.add_argument("--first", type=int, metavar="N",
                    help="first prefix to build (default 1: the first patch alone)")
    pc.add_argument("--last", type=int, metavar="N",
                    help="last prefix to build (default: the whole series)")
    pc.set_defaults(func=check)


def apply(a):
    setup.setup(quiet=True)
    patches.create_tree()
    return 0


def export(a):
    patches.export_series(tree=Path(a.tree).resolve() if a.tree else None)
    return 0


def check(a):
    if not a.bisect and (a.kernel or a.first or a.last):
        raise KmlError("--kernel, --first and --last choose what --bisect builds; "
                       "add --bisect")
    setup.setup(quiet=True)
    status = patches.checkpatch(patches.ensure_tree())
    if a.bisect:
        status |= bisect.check(a.kernel, first=a.first or 1, last=a.last)
    return status
