"""./kml build: the kernel, the guest programs and the initramfs."""
from .common import add_kernel_option, build_all


def register(sub):
    p = sub.add_parser("build", help="build kernel and initramfs (incremental)")
    add_kernel_option(p)
    p.set_defaults(func=main)


def main(a):
    build_all([a.kernel or "default"])
    return 0
