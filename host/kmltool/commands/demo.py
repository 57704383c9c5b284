"""./kml demo: the main job -- set up, build, count, boot, show the tables."""
from . import bench
from .runner import run


def register(sub):
    text = ("the main job: set up, build, boot, show the path length of getppid, then "
            "the latency and file I/O tables")
    p = sub.add_parser("demo", help=text, description=text + ".")
    bench.add_options(p)
    p.set_defaults(func=main)


def main(a):
    return run(*bench.chain(a, demo=True))
