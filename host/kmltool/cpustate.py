"""The protection state of every vCPU, sampled from outside the guest
through QEMU's gdb stub.

A kernel-mode process runs at CPL 0 but must not take SMEP and SMAP
(CR4 bits 20 and 21) away from the kernel: whatever runs on a vCPU — a
kernel-mode program, an ordinary program, the kernel itself, the idle
task after a kernel-mode program — CR4 keeps both bits.  Inside the
guest only a kernel-mode program can read CR4, and only while it runs
itself (tools/testing/selftests/x86/kml_addrspace.c does); what the kernel, ordinary programs
and the idle task run with it cannot see.  So the host looks: it stops
the VM through the gdb stub, reads cs, rip and cr4
of each vCPU, lets the VM go on, and does so again and again while a
workload runs.

Three parts, the first two pure:

  parsing     CpuState from a vCPU's registers (cpl = cs & 3); classify()
              names what the vCPU was running: a kernel-mode program (CPL
              0, rip in the lower half), a user program (CPL 3) or the
              kernel (CPL 0, rip in the upper half);
  checking    counts() per phase and class, protection_failure() (the
              samples with SMEP or SMAP clear), missing_classes();
  sampling    read_cpus() (a connected Stub, VM halted: every vCPU's
              registers), sample_once() (connect, read, detach) and
              Sampler, a gdb hook of qemu.boot(): it waits for the guest's
              "cpustate: busy" line, takes its samples at deterministic
              pseudo-random intervals, then waits for "cpustate: idle" and
              samples again.

tests/guest/test_smep_smap_sampled.py boots the workload and checks the samples.
"""
import random
import time
from dataclasses import dataclass

from .gdbstub import Stub
from .paths import KmlError

SMEP = 1 << 20
SMAP = 1 << 21
CR4_PAE = 1 << 5                       # always set in long mode: a sanity check
USER_TOP = 0x0000800000000000          # first address above the lower half
REGISTERS = ("cs", "rip", "cr4")
KERNEL_MODE, USER, KERNEL = "kernel-mode program", "user program", "kernel"
CLASSES = (KERNEL_MODE, USER, KERNEL)
BUSY, IDLE = "busy", "idle"
PHASES = (BUSY, IDLE)
# The lines the guest command prints (on its output) when a phase starts,
# and when it is about to end
LINES = {BUSY: r"^cpustate: busy$", IDLE: r"^cpustate: idle$"}
DONE = r"^cpustate: done$"
DEFAULT_SAMPLES = {BUSY: 60, IDLE: 20}
INTERVAL = (0.05, 0.15)                # seconds between samples (uniform)
SEED = 20          # the intervals' seed: every run samples at the same times
PHASE_TIMEOUT = 300                    # seconds to wait for a phase's line


# ---- parsing -------------------------------------------------------------

def classify(cpl, rip):
    """What a vCPU was running: KERNEL_MODE (CPL 0 in the lower half, a
    program from /trusted), USER (CPL 3) or KERNEL (CPL 0 in the upper
    half).  Any other CPL is an error: x86-64 Linux uses only 0 and 3."""
    if cpl == 3:
        return USER
    if cpl == 0:
        return KERNEL_MODE if rip < USER_TOP else KERNEL
    raise KmlError(f"CPL {cpl} at rip {rip:#x}: neither 0 nor 3")


def thread_cpu(thread):
    """The vCPU index of a gdb thread id: QEMU numbers threads from 1 in
    vCPU order ("1", "2", ..., hex; "p1.2" with the multiprocess
    extension)."""
    tid = thread.rsplit(".", 1)[-1]
    try:
        return int(tid, 16) - 1
    except ValueError:
        raise KmlError(f"gdb thread id {thread!r}: not a number") from None


def check_layout(layout):
    """Raise KmlError unless the stub's register layout ([(name, bytes)])
    has cs, rip and cr4."""
    names = {n for n, _ in layout or ()}
    missing = [r for r in REGISTERS if r not in names]
    if missing:
        raise KmlError(f"the gdb stub's x86-64 target description lacks "
                       f"{', '.join(missing)} (it has {len(names)} registers: "
                       f"{' '.join(sorted(names)[:12])}...): cannot read CR4 of the vCPUs "
                       f"(QEMU's i386-64bit.xml has cr0, cr2, cr3, cr4 and efer)")


@dataclass(frozen=True)
class CpuState:
    """One vCPU in one sample."""
    phase: str
    sample: int         # the sample's number within its phase
    cpu: int
    cpl: int
    rip: int
    cr4: int

    @property
    def kind(self):
        return classify(self.cpl, self.rip)

    @property
    def smep(self):
        return bool(self.cr4 & SMEP)

    @property
    def smap(self):
        return bool(self.cr4 & SMAP)

    def __str__(self):
        return (f"{self.phase} sample {self.sample} cpu {self.cpu}: cpl {self.cpl} "
                f"rip {self.rip:#018x} cr4 {self.cr4:#x} (SMEP {int(self.smep)}, "
                f"SMAP {int(self.smap)})")


def cpu_state(phase, sample, cpu, regs):
    """A CpuState from {register: value} (gdbstub.unpack_regs)."""
    missing = [r for r in REGISTERS if r not in regs]
    if missing:
        raise KmlError(f"cpu {cpu}: the stub returned no {', '.join(missing)} "
                       f"(got {len(regs)} registers)")
    if not regs["cr4"] & CR4_PAE:
        raise KmlError(f"cpu {cpu}: cr4 reads {regs['cr4']:#x}, without PAE, which "
                       f"long mode requires: the register layout is misread")
    return CpuState(phase, sample, cpu, regs["cs"] & 3, regs["rip"], regs["cr4"])


# ---- checking ------------------------------------------------------------

def _order(key):
    phase, kind = key
    return (PHASES.index(phase) if phase in PHASES else len(PHASES), phase,
            CLASSES.index(kind))


def counts(states):
    """{(phase, class): {"samples", "smep_clear", "smap_clear"}}, in the
    order of PHASES and CLASSES."""
    out = {}
    for s in states:
        c = out.setdefault((s.phase, s.kind), {"samples": 0, "smep_clear": 0,
                                               "smap_clear": 0})
        c["samples"] += 1
        c["smep_clear"] += not s.smep
        c["smap_clear"] += not s.smap
    return {k: out[k] for k in sorted(out, key=_order)}


def summary(states):
    """One line per phase and class: samples and how many lacked SMEP/SMAP."""
    return "\n".join(f"  {phase:4} {kind:20} {c['samples']:4} sample(s), SMEP clear in "
                     f"{c['smep_clear']}, SMAP clear in {c['smap_clear']}"
                     for (phase, kind), c in counts(states).items())


def protection_failure(states, examples=3):
    """None if every sample has SMEP and SMAP set, else a message: how many
    samples of which phase and class had them clear, with examples."""
    bad = [s for s in states if not (s.smep and s.smap)]
    if not bad:
        return None
    lines = [f"{len(bad)} of {len(states)} vCPU sample(s) have SMEP or SMAP clear in CR4:"]
    for (phase, kind), c in counts(states).items():
        if c["smep_clear"] or c["smap_clear"]:
            some = [s for s in bad if (s.phase, s.kind) == (phase, kind)]
            lines.append(f"  {phase}: {kind}: {len(some)} of {c['samples']} sample(s) "
                         f"(SMEP clear in {c['smep_clear']}, SMAP clear in "
                         f"{c['smap_clear']}), e.g.")
            lines += [f"    {s}" for s in some[:examples]]
    return "\n".join(lines)


def missing_classes(states, phase=BUSY):
    """The classes no sample of phase saw (the check would be vacuous)."""
    seen = {s.kind for s in states if s.phase == phase}
    return [k for k in CLASSES if k not in seen]


# ---- sampling ------------------------------------------------------------

def read_cpus(stub, phase="", sample=0):
    """[CpuState] of every vCPU; stub connected and started (VM halted)."""
    check_layout(stub.layout)
    out = []
    for thread in stub.threads():
        stub.select(thread)
        out.append(cpu_state(phase, sample, thread_cpu(thread), stub.regs()))
    if not out:
        raise KmlError("the gdb stub lists no thread (vCPU)")
    return out


def sample_once(address, phase="", sample=0):
    """Connect (the VM stops), read every vCPU, detach (the VM goes on)."""
    stub = Stub.connect(address)
    try:
        stub.start(settle=1)
        return read_cpus(stub, phase, sample)
    finally:
        stub.detach()
        stub.close()


def intervals(n, seed=SEED, bounds=INTERVAL):
    """The n pauses between samples: pseudo-random, the same every run."""
    rng = random.Random(seed)
    return [rng.uniform(*bounds) for _ in range(n)]


class Sampler:
    """The gdb hook (qemu.boot(gdb=Sampler(...))): for each phase, waits
    for its line on the command's output, then takes up to samples[phase]
    samples of every vCPU, stopping early once the guest prints the next
    line (the phase is over).  states: every CpuState; phases: the phases
    whose line came; took: seconds per phase."""

    def __init__(self, samples=None, seed=SEED, interval=INTERVAL, say=None,
                 timeout=PHASE_TIMEOUT):
        self.samples = dict(DEFAULT_SAMPLES, **(samples or {}))
        self.seed, self.interval, self.timeout = seed, interval, timeout
        self.say = say or (lambda msg: None)
        self.states, self.phases, self.took = [], [], {}

    def __call__(self, watch):
        pos = 0
        ends = {BUSY: LINES[IDLE], IDLE: DONE}
        for n, phase in enumerate(PHASES):
            m = watch.wait_line(LINES[phase], pos, timeout=self.timeout)
            if m is None:
                self.say(f"cpustate: no {phase} line; sampling stops")
                return
            pos = m.end()
            self.phases.append(phase)
            start = time.monotonic()
            pauses = intervals(self.samples[phase], self.seed + n, self.interval)
            for i, pause in enumerate(pauses):
                if watch.wait_line(ends[phase], pos, timeout=0):
                    break
                self.states += sample_once(watch.stub, phase, i)
                time.sleep(pause)
            self.took[phase] = time.monotonic() - start
            self.say(f"cpustate: {phase}: {self.taken(phase)} sample(s) in "
                     f"{self.took[phase]:.1f} s")

    def taken(self, phase):
        """How many samples of phase were taken."""
        return len({s.sample for s in self.states if s.phase == phase})
