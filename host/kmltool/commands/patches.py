"""./kml patches apply|export|check: the kernel patch series."""
from pathlib import Path

from .. import patches, setup


def register(sub):
    p = sub.add_parser("patches", help="the kernel patch series")
    psub = p.add_subparsers(dest="pcmd", metavar="ACTION", required=True)
    psub.add_parser("apply", help="(re)create build/linux: source + series as commits"
                    ).set_defaults(func=apply)
    pe = psub.add_parser("export", help="write the tree's commits back to kernel/patches")
    pe.add_argument("--from", dest="tree", metavar="TREE",
                    help="tree to export (default build/linux)")
    pe.set_defaults(func=export)
    psub.add_parser("check", help="run scripts/checkpatch.pl on every patch of the series"
                    ).set_defaults(func=check)


def apply(a):
    setup.setup(quiet=True)
    patches.create_tree()
    return 0


def export(a):
    patches.export_series(tree=Path(a.tree).resolve() if a.tree else None)
    return 0


def check(a):
    setup.setup(quiet=True)
    return patches.checkpatch(patches.ensure_tree())
