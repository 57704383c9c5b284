"""./kml pathlen: the instruction path length of system calls, counted by
single-stepping the guest through QEMU's gdb stub.

The guest side is guest/bench/kml-pathlen: each operation (getppid, read
of one byte, write of one byte, futex wake without waiters, pipe round
trip) enters the kernel at an instruction of its own, the program warms
up, prints a ready line with those addresses and loops over the
operations until the host sets its done flag.  It runs in the three modes
of ./kml bench (an ordinary process; a copy in /trusted at CPL 0 with the
`syscall` instruction; the same with libkml's call path,
`__vdso_kml_syscall`), all on the kernel's default path (the bypass where
it has one), plus the `syscall` instruction on the generic path
(kernel.kml_syscall_path=generic, which kml-pathlen sets for that run), and
the same work done by kernel functions called through handles
(`__vdso_kml_kcall`, the kernel library's cheap call), in a
boot with pti=off and one with pti=on (guestrun specs; one boot per
kernel command line).

The host side is a gdb hook of qemu.boot(): for each ready line it
connects to the stub (which stops the VM), makes sure QEMU single-steps
with interrupts and timers masked (qqemu.sstep = 7), sets a breakpoint at
each operation's entering instruction and lets the VM run.  At each hit
it steps the vCPU that hit (alone) until RIP reaches the address after
the system call, recording the registers and each new instruction's bytes
as the guest has them; the first hits of each operation are dropped
(the --skip), the next --samples are kept.  Then it clears the
breakpoints, sets the done flag in the process's memory and detaches;
the program writes its JSON and ends.  insn.py turns the traces into
figures; report.pathlen_markdown() prints the table.
"""
import re
import subprocess
import time
from dataclasses import dataclass, replace

from . import bench, configs, paths
from .gdbstub import Stub, StubError
from .guestrun import Spec, Status, check
from .insn import MAX_INSN, Step, Symbols, disassemble, first_difference, \
    summarize
from .paths import KmlError

SCHEMA = "kml-pathlen-modes/2"
GUEST_SCHEMA = "kml-pathlen/2"
PROGRAM = "/usr/bin/kml-pathlen"
# The rows of kml-bench's latency table (docs/pathlen.md says what each
# path holds); the first seven came first and keep their order.
BENCH_OPS = ("stat", "fstat", "open_close", "select_file_10", "select_file_100",
             "select_tcp_10", "select_tcp_100", "sig_install", "sig_deliver",
             "prot_fault", "unix_rtt", "fork_exit", "fork_exec")
OPS = ("getppid", "read", "write", "futex_wake", "pipe_rtt", "xpipe_rtt", "fault") + BENCH_OPS
# The modes an operation is counted in (the others: every mode).  xpipe_rtt
# has no kfunc path, and its syscall path is the same with or without the
# bypass; the faults enter no system call, so the other kernel-mode runs
# would count kernel-syscall's path again; the rows of kml-bench have no
# kfunc path, and the generic syscall path only for the first five.
SYSCALL_AND_CALL = ("user", "kernel-syscall", "kernel-call")
OP_MODES = {"xpipe_rtt": SYSCALL_AND_CALL, "fault": ("user", "kernel-syscall"),
            "prot_fault": ("user", "kernel-syscall"),
            **{o: SYSCALL_AND_CALL for o in BENCH_OPS if o != "prot_fault"}}
# The boots, one per pti value (configs.PATHLEN)
PTI = tuple(c.pti for c in configs.PATHLEN.values())
DEFAULT_SAMPLES, DEFAULT_SKIP = 5, 1
MAX_STEPS = 200000          # a path longer than this is an error (a stall)
# The long rows: their own limit, fewer samples (--long-samples), and no
# hit dropped first (the warm-up ran them 100 times already); single
# stepping runs at about 1,000-2,000 instructions a second here.
LONG_OPS = {"fork_exit": 1500000, "fork_exec": 4000000}
DEFAULT_LONG_SAMPLES = 1
# Stepping a long row holds the vCPU in one kernel path for minutes while
# the guest's clock runs on: the RCU stall detector then reports a stall
# on the console (and the boot fails).  Boots that count a long row
# suppress that report.
LONG_APPEND = "rcupdate.rcu_cpu_stall_suppress=1"
# What ./kml pathlen counts without --only: all but the long rows (--long
# adds them: about 250,000 and 600,000 instructions per hit to single-step)
DEFAULT_OPS = tuple(o for o in OPS if o not in LONG_OPS)
# The operations counted in a second process per mode (MODE+long-pti-P):
# the long rows, and fault, whose page per round (and MADV_DONTNEED of
# 1,024 pages now and then) would put refills and drains of the per-CPU
# page lists into the paths of the other rows.
SEPARATE = (*LONG_OPS, "fault")
MAX_NULL_STEPS = 100        # steps in a row that execute nothing: an error
STOP_TIMEOUT = 120          # seconds until a breakpoint must be hit
MAX_DROPPED = 3             # samples longer than MAX_STEPS dropped, per operation
READY = r"kml-pathlen: ready (.*)$"
VDSO_DBG = paths.OBJ / "arch" / "x86" / "entry" / "vdso" / "vdso64.so.dbg"
VMLINUX = paths.OBJ / "vmlinux"
GUEST_BINARY = paths.GUEST_OUT / "kml-pathlen"


@dataclass(frozen=True)
class Op:
    name: str
    at: int         # the entering instruction (breakpoint)
    end: int        # where the kernel returns to


@dataclass(frozen=True)
class Ready:
    """What kml-pathlen's ready line says."""
    label: str
    pid: int
    cpl: int
    path: str
    vdso: int
    done: int
    ktext: int
    ops: tuple


def parse_ready(text):
    """A Ready from the text after "kml-pathlen: ready "."""
    kv, ops = {}, []
    for word in text.split():
        key, _, val = word.partition("=")
        if key == "op":
            name, at, end = val.split(",")
            ops.append(Op(name, int(at, 16), int(end, 16)))
        else:
            kv[key] = val
    try:
        return Ready(kv["label"], int(kv["pid"]), int(kv["cpl"]), kv["path"],
                     int(kv["vdso"], 16), int(kv["done"], 16), int(kv["ktext"], 16),
                     tuple(ops))
    except (KeyError, ValueError) as e:
        raise KmlError(f"bad ready line from kml-pathlen ({e}): {text}") from None


def run_name(mode, pti):
    return f"{mode.name}-pti-{pti}"


# The kernel-mode syscall path without the bypass, for comparison
GENERIC = replace(bench.MODES[1], name="kernel-syscall-generic",
                  title="kernel mode (/trusted copy), syscall instruction, generic entry "
                        "and exit work (kml_syscall_path=generic)",
                  args=bench.MODES[1].args + ("--syscall-path", "generic"))
# The same work as kernel functions behind handles (__vdso_kml_kcall)
KFUNC = replace(bench.MODES[2], name="kernel-kfunc",
                title="kernel mode (/trusted copy), the kernel function behind a handle "
                      "(__vdso_kml_kcall: __do_sys_getppid, ksys_read, ksys_write, "
                      "futex_wake)",
                args=("--expect-mode", "kernel", "--path", "kfunc"))
MODES = (*bench.MODES, GENERIC, KFUNC)


def mode_ops(mode, only=None):
    """The operations (of only, default DEFAULT_OPS) counted in mode."""
    return [o for o in (only or DEFAULT_OPS) if mode in OP_MODES.get(o, (mode,))]


LONG_RUN = "+long"      # the run of a mode's long rows: MODE+long-pti-P


def mode_of(name):
    """The mode of a run name (MODE-pti-P or MODE+long-pti-P)."""
    return name.rsplit("-pti-", 1)[0].split("+", 1)[0]


def specs(only=None, pti=PTI, modes=None, boot_per_mode=False):
    """One run per mode and pti value (one boot per pti), and one more for
    its long rows (fork_exit, fork_exec): their process has none of the
    fds the select rows open, which fork would copy and exit close; a mode
    none of whose operations is counted there is left out.
    boot_per_mode: each mode in a boot of its own (a fresh kernel, so no
    mode counts what an earlier run left cold or used up)."""
    out = []
    for p in pti:
        for m in MODES:
            if modes and m.name not in modes:
                continue
            ops = mode_ops(m.name, only)
            for part, suffix in (([o for o in ops if o not in SEPARATE], ""),
                                 ([o for o in ops if o in SEPARATE], LONG_RUN)):
                if not part:
                    continue
                name = f"{m.name}{suffix}-pti-{p}"
                out.append(replace(m, name=name, program=PROGRAM,
                                   append=configs.PATHLEN[f"pti-{p}"].append,
                                   boot=m.name if boot_per_mode else "")
                           .with_options("--only", ",".join(part), "--label", name))
    return out


def check_modes(modes):
    names = [m.name for m in MODES]
    bad = [m for m in modes if m not in names]
    if bad or not modes:
        raise KmlError(f"--mode: unknown mode(s) {', '.join(bad) or '(none)'}; "
                       f"valid: {' '.join(names)}")


# ---- the virtual CPU (--cpu) ----------------------------------------

DEFAULT_CPU = "max"
TCG_WARNING = re.compile(r"TCG doesn't support requested feature: (.*)$")


def cpu_models(text=None):
    """The CPU model names of `qemu-system-x86_64 -cpu help` (its text, or
    run it): the first word after "x86" of each line."""
    if text is None:
        from .qemu import QEMU
        try:
            p = subprocess.run([QEMU, "-cpu", "help"], capture_output=True, text=True,
                               timeout=60)
        except OSError as e:
            raise KmlError(f"cannot run {QEMU} -cpu help: {e}") from None
        text = p.stdout
    return [w[1] for w in (line.split() for line in text.splitlines())
            if len(w) >= 2 and w[0] == "x86"]


def check_cpu(model, models=None):
    """model if QEMU offers it, else a KmlError that lists what it offers."""
    models = cpu_models() if models is None else models
    if model in models:
        return model
    close = [m for m in models if m.lower().startswith(model.lower().split("-")[0])]
    raise KmlError(f"--cpu {model}: qemu-system-x86_64 offers no such CPU model"
                   + (f"; similar: {' '.join(close)}" if close else "")
                   + " (qemu-system-x86_64 -cpu help lists them all)")


def tcg_warnings(text):
    """The features QEMU said TCG cannot give the model (from its stderr),
    each once, in order."""
    out = []
    for line in (text or "").splitlines():
        m = TCG_WARNING.search(line.strip())
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def check_only(only):
    bad = [o for o in only if o not in OPS]
    if bad or not only:
        raise KmlError(f"--only: unknown operation(s) {', '.join(bad) or '(none)'}; "
                       f"valid: {' '.join(OPS)}")


# ---- counting (the gdb hook) ----------------------------------------

def read_code(stub, rip):
    """The bytes of the instruction at rip (up to 15; not across into a
    page that cannot be read)."""
    first = min(MAX_INSN, 0x1000 - (rip & 0xFFF))
    data = stub.read(rip, first)
    if first < MAX_INSN:
        try:
            data += stub.read(rip + first, MAX_INSN - first)
        except StubError:
            pass
    return data


def step_once(stub, thread, regs):
    """Execute one instruction: (the registers after it, the steps that
    did nothing).  QEMU now and then ends a single step before the
    instruction executes (the vCPU left its loop for another reason):
    the registers come back unchanged, which no instruction that executes
    does (every one moves RIP, but a jump to itself; a REP iteration
    changes RCX).  Such steps are repeated, and counted apart."""
    for null in range(MAX_NULL_STEPS):
        stop = stub.step(thread)
        if stop.exited:
            raise StubError(f"the VM ended while stepping ({stop.text})")
        new = stub.regs()
        if new != regs:
            return new, null
    raise StubError(f"no progress in {MAX_NULL_STEPS} steps at {regs['rip']:#x}")


# A REP string instruction with more than REP_RUN iterations left (a page
# cleared or copied: 4,096) is not single-stepped iteration by iteration:
# it runs to its end at full speed (a breakpoint after it) and its
# iterations are the difference of RCX.  RFLAGS.IF is cleared for that run
# and set again after it: QEMU's sstep flags mask interrupts and timers
# only while stepping, and the timers that expired while the VM stood still
# would otherwise interrupt the REP at once (a first version counted the
# kworkers the timer interrupt woke).
REP_RUN = 64
IF = 0x200
_REP_OPCODES = frozenset([*range(0x6C, 0x70), *range(0xA4, 0xA8), *range(0xAA, 0xB0)])
_PREFIXES = frozenset([0xF2, 0xF3, 0x66, 0x67, 0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65,
                       *range(0x40, 0x50)])


def rep_length(code):
    """The length of a REP-prefixed string instruction (INS, OUTS, MOVS,
    CMPS, STOS, LODS, SCAS) starting code, else None."""
    i, rep = 0, False
    while i < len(code) and code[i] in _PREFIXES:
        rep = rep or code[i] in (0xF2, 0xF3)
        i += 1
    return i + 1 if rep and i < len(code) and code[i] in _REP_OPCODES else None


def run_rep(stub, thread, regs, length):
    """Let the REP instruction at regs' RIP run to its end: (the registers
    after it, its iterations)."""
    after = regs["rip"] + length
    masked = bool(regs.get("eflags", 0) & IF)
    if masked:
        stub.set_reg("eflags", regs["eflags"] & ~IF)
    stub.set_break(after)
    try:
        stub.cont()
        stop = stub.wait_stop(STOP_TIMEOUT)
    finally:
        stub.clear_break(after)
    if stop.exited or stop.thread is None:
        raise StubError(f"the VM stopped for another reason during a REP: {stop.text}")
    if stop.thread != thread:
        stub.select(thread)
    new = stub.regs()
    if masked:
        new["eflags"] |= IF
        stub.set_reg("eflags", new["eflags"])
    if new["rip"] != after or new["rsp"] != regs["rsp"]:
        raise StubError(f"a REP at {regs['rip']:#x} did not end at {after:#x} "
                        f"(stopped at {new['rip']:#x})")
    return new, (regs["rcx"] - new["rcx"]) & 0xFFFFFFFFFFFFFFFF


def max_steps(name):
    return LONG_OPS.get(name, MAX_STEPS)


class PathTooLong(StubError):
    """A path longer than MAX_STEPS: something else ran in between (the
    round trip across modes on one vCPU), or it stalled."""


def trace(stub, thread, regs, end, code, limit=None):
    """Single-step thread's vCPU from regs (stopped at the entering
    instruction) until RIP is end: (the Steps, the null steps); code gets
    the bytes of each new RIP, read while that instruction's page tables
    are current (with PTI the entry trampoline runs on the user CR3).  An
    instruction on a page not yet present (a program just exec'd: its
    fetch faults) is read again when RIP comes back to it."""
    steps, nulls = [], 0
    limit = limit or MAX_STEPS
    while regs["rip"] != end:
        if len(steps) >= limit:
            raise PathTooLong(f"no return to {end:#x} within {limit} instructions "
                              f"(now at {regs['rip']:#x})")
        rip = regs["rip"]
        if rip not in code:
            try:
                code[rip] = read_code(stub, rip)
            except StubError:
                pass
        steps.append(Step(rip, regs["rsp"], regs["rcx"]))
        n = rep_length(code.get(rip, b"")) if regs["rcx"] > REP_RUN else None
        if n:
            # the steps single-stepping would have recorded: one per iteration
            new, iters = run_rep(stub, thread, regs, n)
            steps.extend(Step(rip, regs["rsp"], regs["rcx"] - k) for k in range(1, iters))
            regs = new
            continue
        regs, null = step_once(stub, thread, regs)
        nulls += null
    return steps, nulls


def hit(stub, by_at):
    """Let the VM run to the next breakpoint: (Op, thread, registers)."""
    stub.cont()
    stop = stub.wait_stop(STOP_TIMEOUT)
    if stop.exited or stop.thread is None:
        raise StubError(f"the VM stopped for another reason: {stop.text}")
    stub.select(stop.thread)
    regs = stub.regs()
    op = by_at.get(regs["rip"])
    if op is None:
        raise StubError(f"stopped at {regs['rip']:#x}, not at a breakpoint")
    return op, stop.thread, regs


def count(stub, ready, want, say=None, dropped=None):
    """The traces of the hits of each operation: ({name: [[Step]]}, code);
    want: how many hits, an int for every operation or {name: int}; say
    (if given) hears of each hit counted.  An operation's breakpoint is
    cleared once it has its hits.  A hit whose path is longer than its
    limit (max_steps) is dropped (counted in dropped[name]; the VM goes
    on from where the step stopped, the next hit is a new sample), up to
    MAX_DROPPED per operation."""
    by_at = {op.at: op for op in ready.ops}
    wants = {op.name: want if isinstance(want, int) else want[op.name] for op in ready.ops}
    traces = {op.name: [] for op in ready.ops}
    dropped = {} if dropped is None else dropped
    code = {}
    armed = set()
    for at, op in by_at.items():
        if wants[op.name] > 0:
            stub.set_break(at)
            armed.add(at)
    while armed:
        op, thread, regs = hit(stub, by_at)
        t0 = time.monotonic()
        try:
            traces[op.name].append(trace(stub, thread, regs, op.end, code,
                                         max_steps(op.name)))
        except PathTooLong as e:
            dropped[op.name] = dropped.get(op.name, 0) + 1
            if dropped[op.name] > MAX_DROPPED:
                raise
            if say:
                say(f"  {ready.label}: {op.name}: a hit dropped: {e}")
            continue
        if say:
            say(f"  {ready.label}: {op.name} hit {len(traces[op.name])}/{wants[op.name]}: "
                f"{len(traces[op.name][-1][0])} steps, {time.monotonic() - t0:.1f} s")
        if len(traces[op.name]) >= wants[op.name]:
            stub.clear_break(op.at)
            armed.discard(op.at)
    stub.write(ready.done, (1).to_bytes(4, "little"))
    return traces, code


# Operations whose first hit after the stub stops the VM may be a repeat:
# the stop can come while the kernel handles the very fault of the store
# at the breakpoint, which it then executes again, now without a fault
# (counted: 1 instruction).  They always drop one hit first.
REPEATS = ("fault", "prot_fault")


def plan(names, samples, skip, long_samples=DEFAULT_LONG_SAMPLES):
    """{name: (hits dropped first, hits counted)}: the long rows drop none
    and count long_samples; REPEATS drop at least one."""
    return {n: (0, long_samples) if n in LONG_OPS else
            (max(skip, 1) if n in REPEATS else skip, samples) for n in names}


def measure(address, ready, samples, skip, say=None, long_samples=DEFAULT_LONG_SAMPLES):
    """Connect, count, detach: {"sstep": flags, "traces", "code",
    "dropped", "plan", "seconds"}."""
    stub = Stub.connect(address)
    how = plan([op.name for op in ready.ops], samples, skip, long_samples)
    t = time.monotonic()
    try:
        stub.start()
        flags = stub.sstep_flags()
        dropped = {}
        traces, code = count(stub, ready, {n: a + b for n, (a, b) in how.items()}, say,
                             dropped)
    finally:
        stub.detach()
        stub.close()
    return {"sstep": flags, "traces": {k: v[how[k][0]:] for k, v in traces.items()},
            "code": code, "dropped": dropped, "plan": how,
            "seconds": round(time.monotonic() - t, 1)}


class Tracer:
    """The gdb hook: measures every kml-pathlen run of a boot; results
    (by run label) stay here for combine()."""

    def __init__(self, samples=DEFAULT_SAMPLES, skip=DEFAULT_SKIP, say=None, progress=None,
                 long_samples=DEFAULT_LONG_SAMPLES):
        self.samples, self.skip, self.long_samples = samples, skip, long_samples
        self.say = say or (lambda msg: None)
        self.progress = progress        # hears of every hit counted (KML_PATHLEN_PROGRESS=1)
        self.results = {}

    def __call__(self, watch):
        pos = 0
        while True:
            m = watch.wait_line(READY, pos)
            if m is None:
                return
            pos = m.end()
            ready = parse_ready(m.group(1))
            how = plan([o.name for o in ready.ops], self.samples, self.skip,
                       self.long_samples)
            self.say(f"counting {ready.label}: {len(ready.ops)} operation(s), hits "
                     "dropped + counted: " + ", ".join(sorted({f"{a} + {b}" for a, b in
                                                               how.values()})))
            got = measure(watch.stub, ready, self.samples, self.skip, self.progress,
                          self.long_samples)
            self.results[ready.label] = {"ready": ready, **got}
            self.say(f"counted {ready.label}: "
                     f"{sum(len(t) for t in got['traces'].values())} hit(s) in "
                     f"{got['seconds']:.0f} s")


# ---- figures ----------------------------------------------------------

def kernel_symbols(vmlinux=VMLINUX, say=None):
    """(Symbols, the file they came from): vmlinux, else System.map next
    to it, else none (counts and costly instructions do not need them;
    functions, offsets and the inside/outside split do)."""
    sysmap = vmlinux.parent / "System.map"
    if vmlinux.exists():
        return Symbols.of_file(vmlinux), str(vmlinux)
    if sysmap.exists():
        return Symbols.from_nm(sysmap.read_text()), str(sysmap)
    (say or (lambda m: None))(f"no {vmlinux} nor {sysmap}: kernel addresses stay unnamed, "
                              "and inside/outside cannot be split")
    return Symbols(), None


def symbols_for(ready, kernel, program=GUEST_BINARY, vdso=VDSO_DBG):
    """Kernel symbols moved to where the guest's kernel is (KASLR), the
    program's and the vDSO's (at its base); missing files give none."""
    ktext = kernel.address("_text")
    syms = kernel
    if ready.ktext and ktext is not None and ready.ktext != ktext:
        syms = Symbols(zip([a + ready.ktext - ktext for a in kernel.addrs], kernel.names))
    for path, off in ((program, 0), (vdso, ready.vdso)):
        if path and path.exists():
            syms = syms.merged(Symbols.of_file(path, off))
    return syms


def op_figures(traces, insns, syms):
    """One operation's figures from its [(steps, null steps)]: the summary
    of the shortest trace, every trace's count, the null steps, and where
    the longest differs from the shortest."""
    nulls = [n for _, n in traces]
    traces = [t for t, _ in traces]
    sums = [summarize(t, insns, syms) for t in traces]
    counts = [s["instructions"] for s in sums]
    lo, hi = counts.index(min(counts)), counts.index(max(counts))
    out = dict(sums[lo])
    out.update({"samples": counts, "min": counts[lo], "max": counts[hi], "null_steps": nulls,
                "differs": first_difference(traces[lo], traces[hi], syms) if counts[lo] !=
                counts[hi] else None})
    return out


def run_figures(result, syms):
    """{op: figures} of one measured run."""
    insns = disassemble(result["code"])
    dropped = result.get("dropped") or {}
    return {name: {**op_figures(t, insns, syms), "dropped": dropped.get(name, 0)}
            for name, t in result["traces"].items()}


def run_status(spec, run, measured):
    """(Status, reason) of one run: the guest program's own checks and
    that the host counted it."""
    status, why = check(spec, run, schema=GUEST_SCHEMA)
    if status != Status.OK:
        return status, why
    doc = run.doc
    args = list(spec.args)
    want = args[args.index("--path") + 1] if "--path" in args else "syscall"
    if doc.get("path") != want:
        return Status.ERROR, f"measured path {doc.get('path')!r}, expected {want!r}"
    if spec.append not in (doc.get("cmdline") or "").split():
        return Status.ERROR, f"the kernel command line lacks {spec.append}"
    if measured is None or not doc.get("done"):
        return Status.ERROR, "the host did not count this run"
    return Status.OK, None


def cell(status, reason, figures=None):
    return {"status": status, "reason": reason, **(figures or {})}


def pti_of(spec):
    return spec.append.split("=", 1)[1]


def _record(spec, run, measured, status, why):
    """One run in the combined result."""
    opts = list(spec.options)
    ops = opts[opts.index("--only") + 1].split(",") if "--only" in opts else []
    return {"name": spec.name, "mode": mode_of(spec.name), "pti": pti_of(spec), "ops": ops,
            "title": spec.title, "program": spec.path, "args": list(spec.args),
            "cpl": spec.cpl, "exit_status": run.exit if run else None, "status": status,
            "reason": why, "sstep": measured.get("sstep") if measured else None,
            "seconds": measured.get("seconds") if measured else None,
            "plan": measured.get("plan") if measured else None}


def vdso_dbg(k):
    """The vDSO with symbols of kernel k (a kbuild.Kernel)."""
    return k.obj / "arch" / "x86" / "entry" / "vdso" / "vdso64.so.dbg"


def combine(specs_, runs, tracer, kernel_syms, vdso=VDSO_DBG):
    """The combined result (saved as JSON; report.pathlen_markdown()
    prints it)."""
    records, figures, docs = [], {}, {}
    for s in specs_:
        run, measured = runs.get(s.name), tracer.results.get(s.name)
        status, why = run_status(s, run, measured)
        records.append(_record(s, run, measured, status, why))
        if status == Status.OK:
            docs.setdefault(pti_of(s), run.doc)
            figures[s.name] = run_figures(measured, symbols_for(measured["ready"],
                                                                 kernel_syms, vdso=vdso))
    if not docs:
        why = "; ".join(f"{r['name']}: {r['status']}: {r['reason']}" for r in records)
        raise KmlError(f"pathlen: no run was counted ({why})")
    base = next(iter(docs.values()))
    return {"schema": SCHEMA, "emulated": bool(base.get("emulated")),
            "accel": base.get("accel"), "cpu": base.get("cpu"), "ncpus": base.get("ncpus"),
            "kernel": base.get("kernel"), "samples": tracer.samples, "skip": tracer.skip,
            "long_samples": tracer.long_samples, "long_ops": sorted(LONG_OPS),
            "sstep": sorted({r["sstep"] for r in records if r["sstep"] is not None}),
            "boots": [{"pti": p, "cmdline": docs[p].get("cmdline"),
                       "vulnerabilities": docs[p].get("vulnerabilities") or {},
                       "cpu_bugs": docs[p].get("cpu_bugs"),
                       "cpu_model_name": docs[p].get("cpu_model_name")}
                      for p in PTI if p in docs],
            "inside_tolerance": INSIDE_TOLERANCE, "runs": records,
            "rows": rows(records, figures)}


# A mode's "inside" count (the system call's own function, which kml does
# not change) further than this from the ordinary process's makes the
# row's totals not comparable: the two did different work in the kernel
INSIDE_TOLERANCE = 0.05


def comparable(cell_, base):
    """None if cell_'s totals compare with base's (the ordinary process's
    cell of the same operation and pti), else why not."""
    if (not base or cell_.get("status") != Status.OK or base.get("status") != Status.OK
            or cell_ is base or not base.get("inside")):
        return None
    a, b = cell_["inside"], base["inside"]
    if abs(a - b) <= INSIDE_TOLERANCE * b:
        return None
    return (f"inside {a} against the ordinary process's {b} ({(a - b) / b * 100:+.0f} %, "
            f"more than {INSIDE_TOLERANCE * 100:.0f} %): the system call's own function "
            "did different work, so only the outside column compares the modes")


def rows(records, figures):
    """One row per operation and mode, a cell per pti value; a cell whose
    inside count differs from the ordinary process's by more than
    INSIDE_TOLERANCE carries "not_comparable" (why)."""
    out = []
    modes = list(dict.fromkeys(r["mode"] for r in records))
    ops = list(dict.fromkeys(op for f in figures.values() for op in f))
    for op in ops:
        for mode in modes:
            cells = {}
            for r in records:
                if r["mode"] != mode or (r.get("ops") and op not in r["ops"]):
                    continue
                f = figures.get(r["name"], {}).get(op)
                cells[r["pti"]] = (cell(Status.OK, None, f) if f else
                                   cell(r["status"] if r["status"] != Status.OK
                                        else Status.NOT_RUN, r["reason"]))
            if cells:
                out.append({"op": op, "mode": mode, "cells": cells})
    user = {r["op"]: r["cells"] for r in out if r["mode"] == bench.MODES[0].name}
    for r in out:
        for pti, c in r["cells"].items():
            why = comparable(c, user.get(r["op"], {}).get(pti))
            if why:
                c["not_comparable"] = why
    return out


def exit_status(d):
    """0: every run counted or unavailable; 1: one failed, or the
    ordinary process was not counted."""
    bad = [r for r in d["runs"] if r["status"] not in (Status.OK, Status.UNAVAILABLE)]
    user = [r for r in d["runs"] if r["mode"] == bench.MODES[0].name]
    return 1 if bad or any(r["status"] != Status.OK for r in user) else 0



# ---- the CPU model and cycle estimates ----------------------------------

def cpu_model_record(model, qemu_stderr=()):
    """What the JSON says of the virtual CPU: the -cpu model, the cost
    family its estimates use (costs.py; None: no estimate), and the
    features QEMU said TCG cannot give it."""
    from . import costs
    return {"name": model, "family": costs.family_of(model),
            "tcg_missing": tcg_warnings("\n".join(t or "" for t in qemu_stderr))}


def estimates(data):
    """Adds an "estimate" (costs.estimate) to every counted cell of data's
    rows for the model's family; returns the basis ({"family", "cpi",
    "sources"}), or None when the model has no family (max)."""
    from . import costs
    family = (data.get("cpu_model") or {}).get("family")
    if not family:
        return None
    used = set()
    for r in data["rows"]:
        for c in r["cells"].values():
            if c.get("status") == "ok" and "instructions" in c:
                c["estimate"] = costs.estimate(c, family)
                used.update(c["estimate"]["sources"])
    return {"family": family, "title": costs.FAMILIES[family], "cpi": costs.CPI,
            "costs": costs.table(family), "sources": {k: costs.SOURCES[k] for k in
                                                       sorted(used | {"cpi"})}}
