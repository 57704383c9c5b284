"""./kml package: a kernel of the series as an installable Debian package."""
from .. import kbuild, package


def register(sub):
    text = ("build a kernel of the series as an installable Debian package (the "
            "kernel's bindeb-pkg, the series recorded in it) into build/packages/")
    p = sub.add_parser("package", help=text, description=text + ".")
    p.add_argument("--kernel", choices=sorted(kbuild.KERNELS), default=package.DEFAULT_KERNEL,
                   help=f"which kernel (default: {package.DEFAULT_KERNEL}, Debian's "
                        "own configuration)")
    p.set_defaults(func=main)


def main(a):
    package.build_package(a.kernel)
    return 0
