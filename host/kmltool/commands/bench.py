"""./kml bench: kml-bench's latency table in three modes and kml-iobench's
file I/O table in two, on tmpfs and ext4, in one boot (see
kmltool/bench.py), led by the instructions of each latency row (the path
length lead, unless --no-pathlen).  ./kml bench --apps is ./kml apps."""
from .. import bench, guestrun, pathlen, paths, report
from ..guestrun import Mode, Spec, Status
from ..paths import KmlError
from ..util import say
from . import apps
from .common import add_vm_options, build_all, vm_options
from .pathlen import Pathlen
from .runner import Measurement, run

# vCPUs of the latency and file I/O boot: with two, a vCPU the host
# deschedules while it holds a guest spinlock makes the other spin
# (docs/performance.md, "Why the emulator times ...")
BENCH_SMP = 1

# What the demo and ./kml bench say between the path length and the timings
TCG_NOTE = (
    "The timings below are EMULATED unless they say otherwise: under QEMU TCG a CR3 "
    "or CR4 write (it flushes QEMU's software TLB) costs microseconds, while most other "
    "instructions, the serializing and mitigation ones included, cost almost nothing, "
    "so the ratios between modes show the direction of a change, not its size on "
    "hardware.  "
    "The instruction counts above do not depend on the emulator: they are what a "
    "CPU executes (docs/pathlen.md relates them to hardware costs).  Where a timing "
    "below says kernel mode is slower although it counts fewer instructions, the "
    "emulator is the cause: a kernel-mode process's pages share QEMU's software TLB "
    "with the kernel's (a direct-mapped table that is not resized inside a loop), "
    "its direct return ends two more of QEMU's translation blocks, and host "
    "contention differs from mode to mode; docs/performance.md, 'Why the emulator "
    "times some kernel-mode rows slower'.")

# What the demo and ./kml bench count before their timings: getppid and
# stat, whose single first counts were once least alike between modes (a
# cold first process): few enough to count 5 hits of each in every mode
# in minutes (~700 steps/s here); ./kml pathlen counts every row
LEAD_OPS = ("getppid", "stat")
# Hits counted per row and mode (after one dropped), each mode in a boot
# of its own; the table shows the shortest
LEAD_SAMPLES = 5
# The demo: one program as installed and from /trusted (CPL 3, then CPL 0)
DEMO = (Spec("kml-probe", Mode.USER, "/usr/lib/kml/kml-probe", ("info",), required=True),
        Spec("kml-probe@kernel", Mode.KERNEL, "/usr/lib/kml/kml-probe", ("info",),
             required=True))
DEMO_PRELUDE = 'grep KernelMode /proc/self/status | sed "s/^/== this shell: /"'


def add_options(p):
    """The options bench and demo share."""
    add_vm_options(p, 1200, smp=None,
                   smp_help=f"{BENCH_SMP} for the latency tables, {apps.APPS_SMP} with --apps")
    p.add_argument("--quick", action="store_true",
                   help="few short runs (smoke test), latency and file I/O")
    p.add_argument("--only", metavar="ROWS",
                   help="comma-separated latency rows (kml-bench --list); it does "
                        "not restrict the file I/O part: --no-io skips that")
    p.add_argument("--no-io", action="store_true",
                   help="skip the file I/O part (kml-iobench on tmpfs and on an ext4 "
                        f"disk image of {bench.IO_DISK_MIB} MiB)")
    p.add_argument("--no-pathlen", action="store_true",
                   help="skip the counted table that leads the output (the "
                        "instructions of each latency row: one more boot, 1 vCPU, "
                        "minutes of single stepping)")


def register(sub):
    text = ("run the benchmarks in a VM: syscall latency as an ordinary process, in "
            "kernel mode with syscall and with the call path; file I/O throughput "
            "(tmpfs, ext4) as an ordinary process and in kernel mode")
    p = sub.add_parser("bench", help=text, description=text + ".")
    add_options(p)
    # ./kml apps under its older name
    p.add_argument("--apps", action="store_true",
                   help="instead: Debian's redis-server, nginx, iperf3 and find as "
                        "ordinary processes, in kernel mode from /trusted (clients "
                        "ordinary) and, in the appliance configurations (kml=all), "
                        "with server and client at CPL 0; one boot per "
                        "configuration (--quick: 1 round, short runs)")
    apps.add_options(p, alias=True)
    p.set_defaults(func=main)


class Lead(Pathlen):
    """The demo's and ./kml bench's lead: the instructions of getppid and
    stat, LEAD_SAMPLES hits each, every mode in a fresh boot,
    pti=off, 1 vCPU."""

    def __init__(self, a):
        super().__init__(a, list(LEAD_OPS), LEAD_SAMPLES, smp=1, pti=("off",),
                         boot_per_mode=True)

    def who(self, config):
        return "the path length lead (--no-pathlen leaves it out)"

    def build(self):
        pass                    # the timings' build is this one's too

    def measure(self):
        say(f"first the deterministic part: the instructions of {', '.join(LEAD_OPS)}, "
            f"counted through QEMU's gdb stub (pti=off; {LEAD_SAMPLES} hits each after one "
            "dropped, the shortest shown; each mode in a fresh boot, so none inherits "
            "what another left cold); every latency row: ./kml pathlen")
        return super().measure()

    def exit_status(self, data):
        rc = super().exit_status(data)
        if not rc:
            print("\n" + TCG_NOTE + "\n", flush=True)
        return rc


class Bench(Measurement):
    """kml-bench in three modes and kml-iobench in two, in one boot."""
    what = "bench"

    def __init__(self, a, demo=False):
        super().__init__(a)
        self.demo = demo
        self.options = ["--quick"] if a.quick else []
        if a.only:
            self.options += ["--only", a.only]
        self.io_options = None if a.no_io else (["--quick"] if a.quick else [])

    def build(self):
        build_all()
        if self.a.only:
            bench.check_only(self.a.only, paths.GUEST_OUT / "kml-bench")

    def specs(self):
        specs = bench.specs(self.options, self.io_options)
        if self.demo:
            say("the main job: one program run in user mode and from /trusted in "
                "kernel mode, then the syscall latency and file I/O tables, in a fresh VM "
                "(after the path length, unless --no-pathlen)")
            specs = list(DEMO) + specs
        say("kml-bench in three modes: " + ", ".join(m.name for m in bench.MODES)
            + ("" if self.io_options is None else
               "; then kml-iobench as " + " and ".join(m.name for m in bench.IO_MODES)
               + " on " + " and ".join(fs.name for fs in bench.IO_FS)))
        return specs

    def boot(self, specs):
        prelude = (DEMO_PRELUDE,) if self.demo else ()
        return guestrun.boot(specs, prelude,
                             **dict(vm_options(self.a), smp=self.a.smp or BENCH_SMP))

    def combine(self, out):
        return bench.combine(out.runs,
                             io_fs=None if self.io_options is None else bench.IO_FS)

    def render(self, data):
        return report.bench_markdown(data)

    def exit_status(self, data):
        for m in data["modes"]:
            if m["status"] != Status.OK:
                say(f"bench: mode {m['name']} {m['status']}: {m['reason']}")
        for p in (data["io"] or {}).get("modes", []):
            if p["status"] != Status.OK:
                say(f"bench: file I/O run {p['name']} {p['status']}: {p['reason']}")
        return bench.exit_status(data)


def chain(a, demo=False):
    """The measurements of ./kml bench and ./kml demo: the lead, then the
    timings."""
    return (() if a.no_pathlen else (Lead(a),)) + (Bench(a, demo),)


def main(a):
    if a.apps:
        wrong = [o for o, v in (("--only", a.only), ("--no-io", a.no_io),
                                ("--no-pathlen", a.no_pathlen)) if v]
        if wrong:
            raise KmlError(f"{', '.join(wrong)}: options of the latency benchmark; "
                           "--apps runs only the applications")
        return apps.main(a)
    wrong = [o for o in ("rounds", "config", "deb") if getattr(a, o, None)]
    if wrong:
        raise KmlError(", ".join("--" + o for o in wrong) + ": options of --apps")
    return run(*chain(a))
