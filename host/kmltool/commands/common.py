"""What several commands share: option types, the VM options, building."""
import argparse
import re
import time

from .. import initramfs, kbuild, setup
from ..util import say


def _positive(s, kind):
    try:
        v = kind(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {s!r}")
    return v


def positive_int(s):
    return _positive(s, int)


def positive_float(s):
    return _positive(s, float)


def smp_count(s):
    v = positive_int(s)
    if v > 8:
        raise argparse.ArgumentTypeError(f"at most 8 vCPUs (CONFIG_NR_CPUS): {s}")
    return v


def mem_size(s):
    m = re.fullmatch(r"(\d+)([MG])", s.upper())
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"memory size like 512M or 2G, not {s!r}")
    mib = int(m.group(1)) * (1024 if m.group(2) == "G" else 1)
    if not 128 <= mib <= 16384:
        raise argparse.ArgumentTypeError(f"memory must be between 128M and 16G: {s}")
    return f"{m.group(1)}{m.group(2)}"


def add_vm_options(p, timeout, smp=2, mem="1G", smp_help=None):
    p.add_argument("--smp", type=smp_count, default=smp,
                   help=f"vCPUs (default {smp_help or smp})")
    p.add_argument("--mem", type=mem_size, default=mem, help=f"guest memory (default {mem})")
    p.add_argument("--append", default="", metavar="ARGS", help="extra kernel command line")
    p.add_argument("--timeout", type=positive_int, default=timeout, metavar="S",
                   help=f"seconds before the VM is killed (default {timeout})")
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto",
                   help="auto: KVM only if a probe boot works, else TCG")


def add_kernel_option(p, what="build"):
    p.add_argument("--kernel", choices=sorted(kbuild.KERNELS), default=None,
                   help=f"which kernel to {what}: " + "; ".join(
                       f"{k.name}: {k.text}" for k in kbuild.KERNELS.values())
                   + " (default: default)")


def accel_arg(a):
    return None if a.accel == "auto" else a.accel


def vm_options(a):
    return {"smp": a.smp, "mem": a.mem, "append": a.append, "timeout": a.timeout,
            "accel": accel_arg(a)}


def build_all(kernels=("default",)):
    setup.setup(quiet=True)
    t = time.monotonic()
    for name in kernels:
        kbuild.build_kernel(kbuild.kernel(name))
    initramfs.build_initramfs()
    say(f"build done in {time.monotonic() - t:.0f} s ("
        + ", ".join(f"{n}: {kbuild.kernel(n).release()}" for n in kernels) + ")")
