"""./kml pathlen: the instruction path length of system calls, counted by
single-stepping the measuring process through QEMU's gdb stub (see
kmltool/pathlen.py); one boot per pti value (configs.PATHLEN)."""
import os
import time

from .. import configs, guestrun, initramfs, kbuild, pathlen, paths, report
from ..util import say
from .common import add_kernel_option, add_vm_options, build_all, positive_int, vm_options
from .runner import Measurement, run


def register(sub):
    text = ("instructions per system call (getppid, read, write, futex wake, pipe round "
            "trip), per pipe round trip with a process of the other mode (context switches "
            "across modes), per first-touch page fault and per row of kml-bench's latency "
            "table (stat, fstat, open+close, select, signals, protection fault, AF_UNIX "
            "round trip; fork+exit and fork+exec with --long), in the three modes of bench, "
            "with pti=off and pti=on, counted by single-stepping through QEMU's gdb stub, "
            "with the costly instructions met; --cpu MODEL adds cycle estimates")
    p = sub.add_parser("pathlen", help=text, description=text + ".")
    add_vm_options(p, 1800, smp=1)    # one vCPU: nothing else runs while it is stepped
    p.add_argument("--quick", action="store_true", help="getppid only, 3 samples")
    p.add_argument("--only", metavar="OPS", help="comma-separated operations: "
                   + ",".join(pathlen.OPS))
    p.add_argument("--samples", type=positive_int, metavar="N",
                   help=f"hits counted per operation (default {pathlen.DEFAULT_SAMPLES})")
    p.add_argument("--skip", type=int, choices=range(0, 10), metavar="N",
                   default=pathlen.DEFAULT_SKIP,
                   help=f"hits of each operation dropped before counting (default "
                        f"{pathlen.DEFAULT_SKIP}; the long rows drop none)")
    p.add_argument("--long", action="store_true",
                   help=f"also count the long rows ({', '.join(pathlen.LONG_OPS)}), which "
                        "the default set leaves out (minutes per hit)")
    p.add_argument("--long-samples", type=positive_int, metavar="N",
                   default=pathlen.DEFAULT_LONG_SAMPLES,
                   help=f"hits counted of {' and '.join(pathlen.LONG_OPS)} (hundreds of "
                        f"thousands of steps each; default {pathlen.DEFAULT_LONG_SAMPLES})")
    p.add_argument("--cpu", metavar="MODEL", default=pathlen.DEFAULT_CPU,
                   help="QEMU's -cpu model (qemu-system-x86_64 -cpu help), e.g. "
                        "Skylake-Server-v4 or EPYC-Milan: the guest kernel picks that "
                        "CPU's mitigations; the table adds cycle estimates for its family "
                        f"(default {pathlen.DEFAULT_CPU})")
    p.add_argument("--mode", metavar="MODES",
                   help="comma-separated modes to count in (default: all): "
                        + ",".join(m.name for m in pathlen.MODES))
    p.add_argument("--pti", choices=("both", "off", "on"), default="both",
                   help="the boot(s): pti=off, pti=on or both (default both)")
    add_kernel_option(p, "count on")
    p.set_defaults(func=main)


class Pathlen(Measurement):
    """kml-pathlen's specs booted with the gdb hook (see pathlen.py) on
    the kernel and the CPU model named: boots, combine, render, save."""
    what, prefix, label = "pathlen", "pathlen-", "path length results"

    def __init__(self, a, only, samples, smp, pti=pathlen.PTI, kernel=None,
                 cpu=pathlen.DEFAULT_CPU, skip=pathlen.DEFAULT_SKIP,
                 long_samples=pathlen.DEFAULT_LONG_SAMPLES, modes=None, boot_per_mode=False):
        super().__init__(a)
        self.only, self.samples, self.smp, self.pti = only, samples, smp, pti
        self.kernel_name, self.cpu, self.skip = kernel, cpu, skip
        self.long_samples, self.modes = long_samples, modes
        self.boot_per_mode = boot_per_mode

    def configs(self):
        return [configs.PATHLEN[f"pti-{p}"] for p in self.pti]

    def build(self):
        if os.environ.get("KML_NO_KERNEL_BUILD") == "1":
            initramfs.build_initramfs()
        else:
            build_all([self.kernel_name or "default"])

    def specs(self):
        self.k = kbuild.kernel(self.kernel_name)
        self.symbols, self.source = pathlen.kernel_symbols(self.k.vmlinux, say=say)
        self.tracer = pathlen.Tracer(
            self.samples, skip=self.skip, say=say,
            progress=say if os.environ.get("KML_PATHLEN_PROGRESS") == "1" else None,
            long_samples=self.long_samples)
        self._specs = pathlen.specs(self.only, self.pti, self.modes, self.boot_per_mode)
        return self._specs

    def boot(self, specs):
        self.t = time.monotonic()
        vm = dict(vm_options(self.a), smp=self.smp)
        if any(o in pathlen.LONG_OPS for o in (self.only or ())):
            vm["append"] = f"{vm.get('append') or ''} {pathlen.LONG_APPEND}".strip()
        if self.cpu != pathlen.DEFAULT_CPU:
            vm["cpu"] = self.cpu
        return guestrun.boot(specs, gdb=self.tracer, kernel=self.k, **vm)

    def combine(self, out):
        data = pathlen.combine(self._specs, out.runs, self.tracer, self.symbols,
                               vdso=pathlen.vdso_dbg(self.k))
        # relative to the checkout: saved results go into docs/perf-data/
        source = self.source
        data["kernel_symbols"] = (os.path.relpath(source, paths.ROOT)
                                  if source and source.startswith(str(paths.ROOT) + os.sep)
                                  else source)
        data["kernel"] = {"name": self.k.name, "release": self.k.release()}
        data["cpu_model"] = pathlen.cpu_model_record(
            self.cpu, [b.result.qemu_error for b in out.boots if b.result is not None])
        data["seconds"] = round(time.monotonic() - self.t)
        data["estimates"] = pathlen.estimates(data)
        return data

    def render(self, data):
        return report.pathlen_markdown(data)

    def exit_status(self, data):
        return pathlen.exit_status(data)


def main(a):
    """KML_NO_KERNEL_BUILD=1: the kernel as it is."""
    only = a.only.split(",") if a.only else (["getppid"] if a.quick else None)
    if a.long:
        only = list(dict.fromkeys((only or list(pathlen.DEFAULT_OPS)) + list(pathlen.LONG_OPS)))
    if only:
        pathlen.check_only(only)
    pathlen.check_cpu(a.cpu)
    modes = a.mode.split(",") if a.mode else None
    if modes:
        pathlen.check_modes(modes)
    pti = {"off": ("off",), "on": ("on",)}.get(a.pti, pathlen.PTI)
    return run(Pathlen(a, only, a.samples or (3 if a.quick else pathlen.DEFAULT_SAMPLES),
                       a.smp, pti, a.kernel, a.cpu, a.skip, a.long_samples, modes))
