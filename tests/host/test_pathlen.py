"""Unit tests: ./kml pathlen (host/kmltool/pathlen.py, insn.py, gdbstub.py,
report.pathlen_markdown, qemu.Watch): the gdb remote protocol's framing
and register layout, stepping with a stand-in stub, disassembly and the
classification of costly instructions, the figures of a trace, the run
checks, the combined result and its table; no VM.  The last test builds
the real kml-pathlen and runs it here (it waits briefly for a debugger
that never comes)."""
import json
import subprocess
import threading

import guest_prog
from fake_stub import FakeSocketStub
import pytest

from kmltool import cli, gdbstub, insn, pathlen, qemu, report
from kmltool.commands import runner
from kmltool.commands.pathlen import Pathlen
from kmltool.gdbstub import StopReply, StubError
from kmltool.guestrun import Run, Status
from kmltool.insn import Step, Symbols
from kmltool.paths import KmlError

K = 0xFFFFFFFF81000000      # a kernel address


# ---- the gdb remote protocol -----------------------------------------

def test_framing_and_escapes():
    assert gdbstub.frame("OK") == b"$OK#9a"
    assert gdbstub.frame("g") == b"$g#67"
    assert gdbstub.escape(b"a#b$c}d*") == b"a}\x03b}\x04c}]d}\x0a"
    assert gdbstub.decode(gdbstub.escape(b"x#$}*y")) == b"x#$}*y"
    assert gdbstub.decode(b"0* ") == b"0000"            # run-length: ' ' = 32 - 29 = 3 more
    pkts, rest = gdbstub.split_packets(b"+$OK#9a$T05thread:01;#")
    assert pkts == [b"OK"] and rest == b"$T05thread:01;#"
    pkts, rest = gdbstub.split_packets(rest + b"07")
    assert pkts == [b"T05thread:01;"] and rest == b""
    with pytest.raises(StubError, match="bad checksum"):
        gdbstub.split_packets(b"$OK#00")


def test_stop_replies_and_little_endian():
    r = StopReply("T05thread:01;")
    assert (r.signal, r.thread, r.exited) == (5, "01", False)
    assert StopReply("W00").exited and StopReply("X09").exited
    assert StopReply("S02").thread is None
    assert gdbstub.le_hex("7856341200000000") == 0x12345678


# QEMU's target description: an xi: prefix that is not declared
TARGET = ('<?xml version="1.0"?><!DOCTYPE target SYSTEM "gdb-target.dtd"><target>'
          '<architecture>i386:x86-64</architecture><xi:include href="core.xml"/></target>')
CORE = ('<feature name="org.gnu.gdb.i386.core"><reg name="rax" bitsize="64"/>'
        '<reg name="rcx" bitsize="64"/><reg name="rsp" bitsize="64"/>'
        '<reg name="rip" bitsize="64" type="code_ptr"/><reg name="eflags" bitsize="32"/>'
        '</feature>')


def test_register_layout_from_the_target_description():
    layout = gdbstub.parse_layout({"target.xml": TARGET, "core.xml": CORE})
    assert layout == [("rax", 8), ("rcx", 8), ("rsp", 8), ("rip", 8), ("eflags", 4)]
    text = "".join(v.to_bytes(n, "little").hex() for (_, n), v in
                   zip(layout, (1, 2, 0x7FF0, K, 0x246)))
    assert gdbstub.unpack_regs(layout, text) == {"rax": 1, "rcx": 2, "rsp": 0x7FF0,
                                                 "rip": K, "eflags": 0x246}
    # registers the stub cannot read ("xx") or a short packet end the list
    assert gdbstub.unpack_regs(layout, text[:32] + "xx" * 8) == {"rax": 1, "rcx": 2}



def test_stub_session_over_a_socket():
    fake = FakeSocketStub(["PacketSize=1000;qXfer:features:read+", "OK",
                           "l" + TARGET, "l" + CORE, "T05thread:01;", "3", "OK", "7",
                           "0100000000000000" * 4 + "46020000", "E14"],
                          hello="T02thread:01;")
    stub = gdbstub.Stub(fake.a, timeout=5)
    assert stub.start().thread == "01"
    assert stub.acks is False and [n for n, _ in stub.layout][:2] == ["rax", "rcx"]
    assert stub.sstep_flags() == 7             # 3 lacks NOTIMER: set to 7
    assert fake.got[-2] == "Qqemu.sstep=7"
    assert stub.regs()["rip"] == 1
    with pytest.raises(StubError, match="E14"):
        stub.read(0x1000, 4)


# ---- stepping, with a stand-in stub --------------------------------

class FakeStub:
    """Steps through a list of register states; None: a step that did
    nothing (the same registers again)."""

    def __init__(self, states, code=b"\x90"):
        self.states = list(states)
        self.i = 0
        self.code = code
        self.reads = []

    def step(self, thread):
        self.i += 1
        return StopReply("T05thread:01;")

    def regs(self):
        j = self.i
        while self.states[j] is None:
            j -= 1
        return dict(self.states[j])

    def read(self, addr, size):
        self.reads.append((addr, size))
        return self.code[:size]


def regs(rip, rsp=0x1000, rcx=0, rax=0):
    return {"rip": rip, "rsp": rsp, "rcx": rcx, "rax": rax}


def test_trace_counts_instructions_and_null_steps():
    end = 0x5A40228A
    states = [regs(0x5A402288), regs(K), None, regs(K + 4), None, None, regs(K + 8),
              regs(end)]
    stub = FakeStub(states)
    code = {}
    steps, nulls = pathlen.trace(stub, "01", stub.regs(), end, code)
    assert [s.rip for s in steps] == [0x5A402288, K, K + 4, K + 8]
    assert nulls == 3
    assert sorted(code) == [0x5A402288, K, K + 4, K + 8]


def test_trace_gives_up_without_progress(monkeypatch):
    monkeypatch.setattr(pathlen, "MAX_NULL_STEPS", 3)
    stub = FakeStub([regs(K)] + [None] * 10)
    with pytest.raises(StubError, match="no progress in 3 steps"):
        pathlen.trace(stub, "01", stub.regs(), K + 100, {})


def test_read_code_stops_at_an_unreadable_page():
    class Stub:
        def read(self, addr, size):
            if addr & 0xFFF == 0:
                raise StubError("E14")
            return b"\x0f\x05"[:size]
    assert pathlen.read_code(Stub(), 0x5000FFE) == b"\x0f\x05"


# ---- disassembly and classification --------------------------------

CODE = {K: bytes.fromhex("0f01f8"),               # swapgs
        K + 3: bytes.fromhex("0f22df"),           # mov %rdi,%cr3
        K + 6: bytes.fromhex("0f22e0"),           # mov %rax,%cr4
        K + 9: bytes.fromhex("0f30"),             # wrmsr
        K + 11: bytes.fromhex("480f07"),          # sysretq
        K + 14: bytes.fromhex("f348ab"),          # rep stos
        K + 17: bytes.fromhex("0faee8"),          # lfence
        K + 20: bytes.fromhex("0f01cb"),          # stac
        K + 23: bytes.fromhex("48cf"),            # iretq
        K + 25: bytes.fromhex("0fa2"),            # cpuid
        K + 27: bytes.fromhex("0f002d10000000"),  # verw 0x10(%rip)
        K + 34: bytes.fromhex("9d"),              # popf
        K + 35: bytes.fromhex("4889e5c3"),        # mov %rsp,%rbp (then a ret)
        K + 38: bytes.fromhex("0f32")}            # rdmsr


def test_disassemble_and_classify():
    text = insn.disassemble(CODE)
    assert text[K] == "swapgs" and text[K + 35] == "mov %rsp,%rbp"
    kinds = {a - K: insn.costly_kind(t) for a, t in text.items()}
    assert kinds == {0: "SWAPGS", 3: "CR3 write", 6: "CR4 write", 9: "WRMSR", 11: "SYSRET",
                     14: None, 17: "LFENCE", 20: "STAC", 23: "IRET", 25: "serializing",
                     27: "VERW", 34: "POPF", 35: None, 38: "RDMSR"}
    assert insn.is_rep(text[K + 14]) and not insn.is_rep(text[K])
    assert insn.disassemble({}) == {}


def test_objdump_parsing_and_normalising():
    listing = ("\n   0:\t0f 01 f8             \tswapgs\n"
               "   3:\t90                   \tnop\n"
               "  40:\t48 8b 05 00 00 00 00 \tmov    0x0(%rip),%rax        # 0x47\n"
               "  80:\te8 00 00 00 00       \tcall   0x85 <foo>\n")
    assert insn.parse_objdump(listing, [1, 2, 3]) == {1: "swapgs", 2: "mov 0x0(%rip),%rax",
                                                      3: "call 0x85"}
    data, rips = insn.blob({5: b"\x0f\x05", 1: b"\x90"})
    assert rips == [1, 5] and len(data) == 2 * insn.SLOT and data[insn.SLOT:][:2] == b"\x0f\x05"
    assert insn.mnemonic("cs nopw 0x0(%rax,%rax,1)") == "nopw 0x0(%rax,%rax,1)"
    assert insn.costly_kind("ds verw 0x10(%rip)") == "VERW"
    assert insn.msr_label("WRMSR", 0x48) == "WRMSR 0x48 (SPEC_CTRL)"
    assert insn.msr_label("RDMSR", 0xFFFFFFFF00000123) == "RDMSR 0x123"
    assert insn.msr_label("SWAPGS", 0x48) == "SWAPGS"


NM = f"""\
{K:016x} T _text
{K + 0x100:016x} T entry_SYSCALL_64
{K + 0x200:016x} T __x64_sys_getppid
{K + 0x240:016x} T task_tgid_vnr
{K + 0x300:016x} T __x86_return_thunk
{K + 0x400:016x} D some_data
0000000000001460 T __vdso_kml_syscall
"""


def test_symbols():
    syms = Symbols.from_nm(NM)
    assert syms.lookup(K + 0x105) == ("entry_SYSCALL_64", 5)
    assert syms.where(K + 0x410) == "__x86_return_thunk+0x110"     # data is not text
    assert syms.lookup(0x10) == ("?", 0x10) and syms.where(0x10) == "0x10"
    assert syms.address("_text") == K and syms.address("nothing") is None
    moved = Symbols.from_nm(NM, offset=0x7F0000000000)
    assert moved.where(0x7F0000001465) == "__vdso_kml_syscall+0x5"
    assert syms.merged(moved).name(0x7F0000001460) == "__vdso_kml_syscall"


def trace_steps():
    """getppid-like: user syscall, entry, the own function and a callee,
    a return thunk, a 3-iteration REP, swapgs, wrmsr, sysret."""
    S = 0x8000
    return [Step(0x5A402288, 0x7000, 0),
            Step(K + 0x100, 0x7000, 0x48),               # entry_SYSCALL_64: swapgs
            Step(K + 0x104, S, 0x48),                    # wrmsr (ecx = 0x48)
            Step(K + 0x200, S - 8, 0),                   # __x64_sys_getppid, entered
            Step(K + 0x204, S - 16, 0),
            Step(K + 0x240, S - 24, 0),                  # callee
            Step(K + 0x300, S - 24, 0),                  # __x86_return_thunk (in the callee)
            Step(K + 0x208, S - 16, 0),                  # back in the own function
            Step(K + 0x20C, S - 8, 0),                   # its ret
            Step(K + 0x108, S, 3), Step(K + 0x108, S, 2), Step(K + 0x108, S, 1),   # rep
            Step(K + 0x10B, S, 0)]                       # sysretq


INSNS = {0x5A402288: "syscall", K + 0x100: "swapgs", K + 0x104: "wrmsr",
         K + 0x200: "push %rbp", K + 0x204: "call 0x240", K + 0x240: "nop",
         K + 0x300: "ret", K + 0x208: "pop %rbp", K + 0x20C: "ret",
         K + 0x108: "rep stos %al,%es:(%rdi)", K + 0x10B: "sysretq"}


def test_summarize_a_trace():
    s = insn.summarize(trace_steps(), INSNS, Symbols.from_nm(NM))
    assert (s["instructions"], s["steps"], s["rep_iterations"]) == (11, 13, 2)
    assert (s["inside"], s["outside"], s["user"], s["kernel_outside"]) == (6, 5, 1, 4)
    assert s["own_functions"] == ["__x64_sys_getppid"]
    assert s["costly_counts"] == {"SWAPGS": 1, "WRMSR 0x48 (SPEC_CTRL)": 1, "SYSRET": 1}
    assert s["costly"][1] == {"kind": "WRMSR 0x48 (SPEC_CTRL)", "at": "entry_SYSCALL_64+0x4",
                              "insn": "wrmsr", "own": False}
    assert s["thunks"] == {"__x86_return_thunk": 1}
    assert dict(s["functions"])["entry_SYSCALL_64"] == 4


def test_rep_is_one_instruction_only_when_prefixed():
    steps = [Step(K, 0, 2), Step(K, 0, 1), Step(K + 2, 0, 0), Step(K + 2, 0, 0)]
    execs = insn.executions(steps, {K: "rep movsb %ds:(%rsi),%es:(%rdi)", K + 2: "nop"})
    assert [(s.rip, n) for s, n in execs] == [(K, 2), (K + 2, 1), (K + 2, 1)]


def test_first_difference():
    syms = Symbols.from_nm(NM)
    a = trace_steps()
    assert insn.first_difference(a, list(a), syms) is None
    b = a[:5] + [Step(K + 0x300, 0, 0)] + a[5:]
    assert insn.first_difference(a, b, syms) == {
        "step": 5, "a": "task_tgid_vnr+0x0", "b": "__x86_return_thunk+0x0"}
    assert insn.first_difference(a, a + [Step(K, 0, 0)], syms)["a"] == "(end)"


# ---- the runs, their checks, the combined result -------------------

READY_LINE = ("label=user-pti-on pid=50 cpl=3 path=syscall vdso=0x7f00 done=0x5a4c9560 "
              "ktext=0xffffffff81000000 op=getppid,0x5a402288,0x5a40228a "
              "op=pipe_rtt,0x5a402390,0x5a40239c")


def test_parse_ready():
    r = pathlen.parse_ready(READY_LINE)
    assert (r.label, r.pid, r.cpl, r.path, r.done) == ("user-pti-on", 50, 3, "syscall",
                                                       0x5A4C9560)
    assert r.ops[1] == pathlen.Op("pipe_rtt", 0x5A402390, 0x5A40239C)
    with pytest.raises(KmlError, match="bad ready line"):
        pathlen.parse_ready("label=x pid=y")


def test_specs_options_and_parser():
    specs = pathlen.specs(["getppid"])
    assert [s.name for s in specs] == [
        "user-pti-off", "kernel-syscall-pti-off", "kernel-call-pti-off",
        "kernel-syscall-generic-pti-off", "kernel-kfunc-pti-off",
        "user-pti-on", "kernel-syscall-pti-on", "kernel-call-pti-on",
        "kernel-syscall-generic-pti-on", "kernel-kfunc-pti-on"]
    g = specs[3]
    assert g.args == ("--expect-mode", "kernel", "--path", "syscall", "--syscall-path", "generic")
    assert g.mode == "kernel"
    s = specs[2]
    assert (s.program, s.mode, s.append, s.collect) == (pathlen.PROGRAM, "kernel", "pti=off",
                                                        "--json")
    assert s.args == ("--expect-mode", "kernel", "--path", "call")
    assert s.options == ("--only", "getppid", "--label", "kernel-call-pti-off")
    assert pathlen.specs()[0].options == ("--only", ",".join(
        o for o in pathlen.DEFAULT_OPS if o != "fault"), "--label", "user-pti-off")
    assert "user+long-pti-off" in [s.name for s in pathlen.specs()]     # fault
    m = Pathlen(cli.build_parser().parse_args(["pathlen", "--append", "nokaslr"]),
                None, 1, 1)
    runner.check_append(m)
    m.a.append = "quiet pti=auto"
    with pytest.raises(KmlError, match="the pti-off boot of pathlen sets pti=off itself"):
        runner.check_append(m)
    pathlen.check_only(["getppid", "pipe_rtt"])
    with pytest.raises(KmlError, match="unknown operation"):
        pathlen.check_only(["getpid"])
    a = cli.build_parser().parse_args(["pathlen"])
    assert (a.smp, a.quick, a.only, a.samples, a.timeout) == (1, False, None, None, 1800)
    a = cli.build_parser().parse_args(["pathlen", "--quick", "--smp", "2", "--samples", "4"])
    assert (a.smp, a.quick, a.samples) == (2, True, 4)


def test_specs_count_each_operation_in_its_modes():
    default = {s.name: s.options[1] for s in pathlen.specs(pathlen.OPS)}
    bench_ops = ("stat,fstat,open_close,select_file_10,select_file_100,select_tcp_10,"
                 "select_tcp_100,sig_install,sig_deliver,prot_fault,unix_rtt")
    # the long rows in a process of their own (no select fds for fork to copy)
    assert default["user+long-pti-on"] == "fault,fork_exit,fork_exec"
    assert default["kernel-call+long-pti-off"] == "fork_exit,fork_exec"
    assert "kernel-kfunc+long-pti-on" not in default
    assert default["user-pti-on"] == ("getppid,read,write,futex_wake,pipe_rtt,xpipe_rtt,"
                                      + bench_ops)
    assert default["kernel-syscall-pti-off"] == default["user-pti-on"]
    assert default["kernel-call-pti-off"] == ("getppid,read,write,futex_wake,pipe_rtt,"
                                              "xpipe_rtt," + bench_ops.replace(
                                                  "prot_fault,", ""))
    assert default["kernel-syscall-generic-pti-off"] == "getppid,read,write,futex_wake,pipe_rtt"
    assert default["kernel-kfunc-pti-on"] == "getppid,read,write,futex_wake,pipe_rtt"
    # a mode without any of the operations asked for is not booted
    specs = pathlen.specs(["fault"])
    assert [(s.name, s.options[1]) for s in specs] == [
        ("user+long-pti-off", "fault"), ("kernel-syscall+long-pti-off", "fault"),
        ("user+long-pti-on", "fault"), ("kernel-syscall+long-pti-on", "fault")]
    pathlen.check_only(["xpipe_rtt", "fault"])
    with pytest.raises(KmlError, match="unknown operation"):
        pathlen.check_only(["timer"])


class BreakStub(FakeStub):
    """FakeStub with breakpoints: each cont() stops at the next of hits
    (RIPs); each stop's path is paths[hit]."""

    def __init__(self, hits, paths):
        super().__init__([None])
        self.hits, self.paths, self.h = hits, paths, -1
        self.breaks, self.written = set(), {}

    def set_break(self, at):
        self.breaks.add(at)

    def clear_break(self, at):
        self.breaks.discard(at)

    def cont(self):
        self.h += 1
        rip = self.hits[self.h]
        assert rip in self.breaks
        self.states, self.i = [regs(rip)] + self.paths[self.h], 0

    def wait_stop(self, timeout):
        return StopReply("T05thread:01;")

    def select(self, thread):
        pass

    def write(self, addr, data):
        self.written[addr] = data


def test_count_drops_a_path_that_is_too_long(monkeypatch):
    monkeypatch.setattr(pathlen, "MAX_STEPS", 3)
    at, end = 0x5A402E50, 0x5A402E5C
    ready = pathlen.Ready("t", 1, 3, "syscall", 0, 0x5A4C9560, 0,
                          (pathlen.Op("xpipe_rtt", at, end),))
    long_path = [regs(K), regs(K + 4), regs(K + 8), regs(K + 12), regs(end)]
    stub = BreakStub([at] * 3, [[regs(K), regs(end)], long_path, [regs(K + 4), regs(end)]])
    dropped = {}
    traces, _ = pathlen.count(stub, ready, 2, dropped=dropped)
    assert [[s.rip for s in t] for t, _ in traces["xpipe_rtt"]] == [[at, K], [at, K + 4]]
    assert dropped == {"xpipe_rtt": 1}
    assert stub.breaks == set() and stub.written == {0x5A4C9560: b"\x01\0\0\0"}
    monkeypatch.setattr(pathlen, "MAX_DROPPED", 0)
    stub = BreakStub([at], [long_path])
    with pytest.raises(pathlen.PathTooLong, match="within 3 instructions"):
        pathlen.count(stub, ready, 1)


def test_kernel_symbols_fall_back_to_system_map(tmp_path):
    said = []
    vmlinux = tmp_path / "vmlinux"
    syms, source = pathlen.kernel_symbols(vmlinux, said.append)
    assert (syms.addrs, source) == ([], None) and "inside/outside cannot be split" in said[0]
    (tmp_path / "System.map").write_text("ffffffff81000000 T _text\n"
                                         "ffffffff81000100 t asm_exc_page_fault\n"
                                         "ffffffff82000000 D some_data\n")
    syms, source = pathlen.kernel_symbols(vmlinux)
    assert source.endswith("System.map") and syms.address("_text") == K
    assert syms.where(K + 0x104) == "asm_exc_page_fault+0x4"
    # without kernel symbols a user symbol does not name a kernel address
    user = Symbols([(0x5A4CC000, "data_start")])
    assert user.where(K + 4) == hex(K + 4) and user.where(0x5A4CC010) == "data_start+0x10"


def guest_doc(spec, **more):
    pti = spec.append.split("=")[1]
    doc = {"schema": "kml-pathlen/2", "label": spec.name, "accel": "tcg", "emulated": True,
           "cpu": "QEMU TCG", "ncpus": 1, "kernel": "6.12.117-kml",
           "cmdline": f"console=ttyS0 kml.accel=tcg pti={pti}", "cpl": spec.cpl,
           "path": spec.args[list(spec.args).index("--path") + 1], "done": True,
           "vulnerabilities": {"meltdown": "Not affected"}}
    doc.update(more)
    return doc


def fake_run(spec, exit=0, **more):
    return Run(spec.name, spec.mode.value, exit=exit, finished=True,
               data=json.dumps(guest_doc(spec, **more)))


class FakeTracer:
    samples, skip, long_samples = 2, 1, 1

    def __init__(self, results):
        self.results = results


def measured(ready_label, traces):
    ready = pathlen.parse_ready(READY_LINE.replace("user-pti-on", ready_label))
    code = {K + 0x100: bytes.fromhex("0f01f8"), K + 0x200: b"\x55", K + 0x20C: b"\xc3",
            0x5A402288: bytes.fromhex("0f05"), K + 0x10B: bytes.fromhex("480f07")}
    return {"ready": ready, "sstep": 7, "traces": {"getppid": traces}, "code": code}


def short_trace(extra=0):
    steps = [Step(0x5A402288, 0x7000, 0), Step(K + 0x100, 0x7000, 0),
             Step(K + 0x200, 0x7FF8, 0), Step(K + 0x20C, 0x7FF8, 0)]
    return steps + [Step(K + 0x100, 0x8000, 0)] * extra + [Step(K + 0x10B, 0x8000, 0)]


def test_run_status():
    spec = next(s for s in pathlen.specs() if s.name == "kernel-syscall-pti-on")
    assert spec.name == "kernel-syscall-pti-on"
    ok = {"ready": None}
    assert pathlen.run_status(spec, fake_run(spec), ok) == (Status.OK, None)
    assert "lacks pti=on" in pathlen.run_status(
        spec, fake_run(spec, cmdline="pti=off"), ok)[1]
    assert "did not count" in pathlen.run_status(spec, fake_run(spec), None)[1]
    assert "did not count" in pathlen.run_status(spec, fake_run(spec, done=False), ok)[1]
    assert "expected 'syscall'" in pathlen.run_status(spec, fake_run(spec, path="call"), ok)[1]
    assert "expected CPL 0" in pathlen.run_status(spec, fake_run(spec, cpl=3), ok)[1]
    assert pathlen.run_status(spec, fake_run(spec, exit=3), ok)[0] == Status.UNAVAILABLE


def combined():
    specs = pathlen.specs(["getppid"])
    runs = {s.name: fake_run(s) for s in specs}
    runs["kernel-call-pti-on"] = Run("kernel-call-pti-on", "kernel", exit=3, finished=True,
                                     output=["no __vdso_kml_syscall"])
    results = {s.name: measured(s.name, [(short_trace(), 0), (short_trace(), 1)])
               for s in specs}
    results["user-pti-on"] = measured("user-pti-on", [(short_trace(), 0),
                                                      (short_trace(2), 0)])
    kernel = Symbols.from_nm(NM)
    return pathlen.combine(specs, runs, FakeTracer(results), kernel)


def test_combine_rows_and_exit_status(monkeypatch):
    monkeypatch.setattr(pathlen, "GUEST_BINARY", None)
    monkeypatch.setattr(pathlen, "VDSO_DBG", None)
    d = combined()
    assert d["schema"] == "kml-pathlen-modes/2" and d["emulated"] is True
    assert [b["pti"] for b in d["boots"]] == ["off", "on"]
    assert [(r["op"], r["mode"]) for r in d["rows"]] == [
        ("getppid", "user"), ("getppid", "kernel-syscall"), ("getppid", "kernel-call"),
        ("getppid", "kernel-syscall-generic"), ("getppid", "kernel-kfunc")]
    user = d["rows"][0]["cells"]
    assert (user["off"]["min"], user["off"]["max"], user["off"]["inside"]) == (5, 5, 2)
    assert user["off"]["null_steps"] == [0, 1]
    assert (user["on"]["min"], user["on"]["max"], user["on"]["samples"]) == (5, 7, [5, 7])
    assert user["on"]["differs"]["step"] == 4
    call = d["rows"][2]["cells"]
    assert call["on"]["status"] == Status.UNAVAILABLE and call["off"]["status"] == Status.OK
    assert pathlen.exit_status(d) == 0
    d["runs"][0]["status"] = Status.ERROR
    assert pathlen.exit_status(d) == 1


def test_markdown(monkeypatch):
    monkeypatch.setattr(pathlen, "GUEST_BINARY", None)
    monkeypatch.setattr(pathlen, "VDSO_DBG", None)
    md = report.pathlen_markdown(combined())
    assert "| getppid | user | 3 / 3 | 2 / 2 | 5 | 5–7 | SWAPGS, SYSRET | SWAPGS, SYSRET |" in md
    assert "| getppid | kernel-call | 3 / – | 2 / – | 5 | – | SWAPGS, SYSRET |  |" in md
    assert "not comparable" not in md.split("## Costly")[1]
    assert "- getppid, user, pti=on: SWAPGS `swapgs` at entry_SYSCALL_64+0x0;" in md
    assert "1. getppid, user, pti=on: [5, 7] instructions in the samples" in md
    assert "kernel-call-pti-on: kernel mode" in md and "**unavailable**" in md


def test_a_mode_whose_inside_differs_is_not_comparable():
    """The demo's first table compares like with like: a mode's total is
    marked when its system call's own function did more than 5 % more or
    less work than the ordinary process's (a cold cache, a refill)."""
    def fig(inside, outside):
        return {"instructions": inside + outside, "min": inside + outside,
                "max": inside + outside, "inside": inside, "outside": outside, "costly": []}
    records = [{"name": f"{m}-pti-off", "mode": m, "pti": "off", "ops": ["stat"],
                "status": Status.OK, "reason": None}
               for m in ("user", "kernel-syscall", "kernel-call")]
    figures = {"user-pti-off": {"stat": fig(3685, 176)},
               "kernel-syscall-pti-off": {"stat": fig(10537, 75)},
               "kernel-call-pti-off": {"stat": fig(3685 + 184, 80)}}
    rows = pathlen.rows(records, figures)
    marks = [r["cells"]["off"].get("not_comparable") for r in rows]
    assert marks[0] is None and marks[2] is None        # the ordinary one; within 5 %
    assert "inside 10537 against the ordinary process's 3685 (+186 %" in marks[1]
    d = {"rows": rows, "runs": [], "boots": [], "inside_tolerance": 0.05, "sstep": [1],
         "skip": 1, "samples": 5}
    md = report.pathlen_markdown(d)
    assert "| stat | kernel-syscall | 75 / n/a | 10537 / n/a | 10612 *not comparable* | – |" in md
    assert "stat, kernel-syscall, pti=off: not comparable: inside 10537" in md


def test_combine_without_any_counted_run():
    specs = pathlen.specs(["getppid"])
    with pytest.raises(KmlError, match="no run was counted"):
        pathlen.combine(specs, {}, FakeTracer({}), Symbols())


def test_symbols_follow_kaslr(tmp_path):
    kernel = Symbols.from_nm(NM)
    ready = pathlen.parse_ready(READY_LINE.replace("0xffffffff81000000", "0xffffffff82000000"))
    syms = pathlen.symbols_for(ready, kernel, program=None, vdso=None)
    assert syms.where(0xFFFFFFFF82000100) == "entry_SYSCALL_64+0x0"


# ---- the gdb hook's view of the VM ----------------------------------

def test_watch_wait_line():
    w = qemu.Watch("/tmp/x.sock")
    w.feed(b"boot\nkml-pathlen: ready label=a op=")
    assert w.wait_line(pathlen.READY, timeout=0.05) is None       # the line is incomplete
    w.feed(b"x,1,2\nmore\n")
    m = w.wait_line(pathlen.READY)
    assert m.group(1) == "label=a op=x,1,2"
    assert w.wait_line(pathlen.READY, m.end(), timeout=0.05) is None
    threading.Timer(0.05, w.end).start()
    assert w.wait_line(pathlen.READY, m.end()) is None             # the VM ended


def test_gdb_socket_path(tmp_path):
    assert qemu.gdb_socket(tmp_path / "run") == str(tmp_path / "run" / "gdb.sock")
    deep = tmp_path / ("d" * 100) / "20261123-121103-1-2"
    assert qemu.gdb_socket(deep) == "/tmp/kml-gdb-20261123-121103-1-2.sock"


def test_verdict_names_a_failed_hook(tmp_path):
    res = qemu.Result(tmp_path)
    res.status, res.hook_error = 0, "StubError: E14"
    assert not res.ok and res.exit_code() == qemu.EXIT_VM_FAILURE
    assert "the gdb hook failed (the VM was stopped): StubError: E14" in res.verdict()


# ---- the real guest program, on this machine -------------------------

def test_guest_program_ready_line(tmp_path_factory, tmp_path):
    prog = guest_prog.build(tmp_path_factory, "kml-pathlen")
    p = subprocess.run([str(prog), "--only", "getppid,pipe_rtt", "--warmup", "3",
                        "--wait-s", "1", "--label", "t", "--json", str(tmp_path / "j")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "nobody set the done flag" in p.stderr
    line = next(x for x in p.stderr.splitlines() if x.startswith("kml-pathlen: ready "))
    ready = pathlen.parse_ready(line.split("ready ", 1)[1])
    syms = Symbols.of_file(prog)
    assert [o.name for o in ready.ops] == ["getppid", "pipe_rtt"]
    assert syms.address("pl_getppid_syscall_at") == ready.ops[0].at
    assert syms.address("pl_pipe_rtt_syscall_end") == ready.ops[1].end
    assert syms.address("pathlen_done") is None     # data: not a text symbol
    assert 0x5A400000 <= ready.ops[0].at < 0x5A500000   # its own address (guest/Makefile)
    doc = json.loads((tmp_path / "j").read_text())
    assert doc["schema"] == "kml-pathlen/2" and doc["done"] is False and doc["cpl"] == 3
    p = subprocess.run([str(prog), "--path", "call", "--expect-mode", "user"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 3 and "call path is not available" in p.stderr
    # the newer operations: the page fault's site
    p = subprocess.run([str(prog), "--only", "fault", "--warmup", "1100", "--wait-s", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "nobody set the done flag" in p.stderr
    line = next(x for x in p.stderr.splitlines() if x.startswith("kml-pathlen: ready "))
    words = line.split()
    fault = next(w for w in words if w.startswith("op=fault,")).split(",")
    assert int(fault[1], 16) == syms.address("pl_fault_syscall_at")
    # no kfunc path for the round trip across modes; not counted by default
    p = subprocess.run([str(prog), "--path", "kfunc", "--only", "xpipe_rtt"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "xpipe_rtt has no kfunc path" in p.stderr


# ---- the rows of kml-bench, --cpu, cycle estimates -----------------------

def test_count_clears_a_done_operation_and_counts_long_rows_apart():
    """Each operation gets its own number of hits; once it has them its
    breakpoint goes (a long row is not stepped again while the others
    are counted)."""
    a, b = pathlen.Op("getppid", 0x5A402288, 0x5A40228A), pathlen.Op("fork_exit", 0x5A403000,
                                                                      0x5A403010)
    ready = pathlen.Ready("t", 1, 3, "syscall", 0, 0x5A4C9560, 0, (a, b))
    stub = BreakStub([a.at, b.at, a.at, a.at],
                     [[regs(K), regs(a.end)], [regs(K + 4), regs(K + 8), regs(b.end)],
                      [regs(K), regs(a.end)], [regs(K), regs(a.end)]])
    traces, _ = pathlen.count(stub, ready, {"getppid": 3, "fork_exit": 1})
    assert [len(traces["getppid"]), len(traces["fork_exit"])] == [3, 1]
    assert stub.breaks == set()
    assert pathlen.plan(["getppid", "fork_exit", "fork_exec"], 5, 1, 2) == {
        "getppid": (1, 5), "fork_exit": (0, 2), "fork_exec": (0, 2)}
    assert pathlen.max_steps("fork_exec") > pathlen.max_steps("getppid") == pathlen.MAX_STEPS
    assert pathlen.plan(["getppid", "fault"], 1, 0) == {"getppid": (0, 1), "fault": (1, 1)}


def test_trace_reads_an_unreadable_instruction_again_later():
    """A program just exec'd: the fetch of its first instruction faults
    (the page is not there yet); its bytes are read when RIP is back."""
    class Stub(FakeStub):
        def read(self, addr, size):
            self.reads.append((addr, size))
            if addr == 0x401000 and len(self.reads) < 3:
                raise StubError("E14")
            return self.code[:size]
    end = 0x401004
    stub = Stub([regs(0x401000), regs(K), regs(0x401000), regs(end)])
    code = {}
    steps, _ = pathlen.trace(stub, "01", stub.regs(), end, code)
    assert [s.rip for s in steps] == [0x401000, K, 0x401000] and 0x401000 in code


def test_new_operations_and_their_modes():
    for op in ("stat", "fstat", "open_close", "select_file_10", "select_tcp_100",
               "sig_install", "sig_deliver", "unix_rtt", "fork_exit", "fork_exec"):
        assert op in pathlen.OPS and pathlen.OP_MODES[op] == pathlen.SYSCALL_AND_CALL
    assert pathlen.OP_MODES["prot_fault"] == ("user", "kernel-syscall")
    names = [s.name for s in pathlen.specs(["fork_exec"], ("on",))]
    assert names == ["user+long-pti-on", "kernel-syscall+long-pti-on",
                     "kernel-call+long-pti-on"]
    assert pathlen.mode_of("kernel-call+long-pti-on") == "kernel-call"
    assert [s.name for s in pathlen.specs(["fork_exec"], ("off",), ["user"])] == [
        "user+long-pti-off"]
    pathlen.check_modes(["user", "kernel-call"])
    with pytest.raises(KmlError, match="unknown mode"):
        pathlen.check_modes(["kernel"])
    assert pathlen.mode_of("kernel-syscall-generic-pti-off") == "kernel-syscall-generic"


HELP = """Available CPUs:
x86 486                   (alias configured by machine type)
x86 EPYC-Milan            (alias configured by machine type)
x86 EPYC-Milan-v1         AMD EPYC-Milan Processor
x86 Skylake-Server-v4     Intel Xeon Processor (Skylake, IBRS, no TSX)
x86 max                   Enables all features supported by the accelerator in the current host

Recognized CPUID flags:
  3dnow 3dnowext
"""


def test_cpu_models_and_check_cpu():
    models = pathlen.cpu_models(HELP)
    assert models == ["486", "EPYC-Milan", "EPYC-Milan-v1", "Skylake-Server-v4", "max"]
    assert pathlen.check_cpu("EPYC-Milan", models) == "EPYC-Milan"
    with pytest.raises(KmlError, match="no such CPU model; similar: EPYC-Milan EPYC-Milan-v1"):
        pathlen.check_cpu("EPYC-Genoa", models)
    with pytest.raises(KmlError, match="-cpu help"):
        pathlen.check_cpu("Pentium9", models)
    a = cli.build_parser().parse_args(["pathlen", "--cpu", "EPYC-Milan", "--pti", "off",
                                       "--long-samples", "2"])
    assert (a.cpu, a.pti, a.long_samples, a.long) == ("EPYC-Milan", "off", 2, False)
    assert cli.build_parser().parse_args(["pathlen"]).cpu == "max"
    cmd = qemu.qemu_command("tcg", 1, "1G", "", "i", pathlen.paths.BUILD, cpu="EPYC-Milan")
    assert cmd[cmd.index("-cpu") + 1] == qemu.cpu_model("tcg", "EPYC-Milan")
    cmd = qemu.qemu_command("tcg", 1, "1G", "", "i", pathlen.paths.BUILD)
    assert cmd[cmd.index("-cpu") + 1] == qemu.cpu_model("tcg")


def test_cpu_model_hides_cx16_from_a_tcg_that_loses_its_flags():
    assert qemu.cpu_model("tcg", None, (7, 2)) == "max,-cx16"
    assert qemu.cpu_model("tcg", "EPYC-Rome", (7, 2)) == "EPYC-Rome,-cx16"
    assert qemu.cpu_model("tcg", "EPYC-Rome", (8, 0)) == "EPYC-Rome"
    assert qemu.cpu_model("tcg", None, (9, 2)) == "max"
    assert qemu.cpu_model("kvm", None, (7, 2)) == "max"


def test_tcg_warnings_and_model_record():
    err = ("qemu-system-x86_64: warning: TCG doesn't support requested feature: "
           "CPUID.07H:EDX.spec-ctrl [bit 26]\n"
           "qemu-system-x86_64: warning: TCG doesn't support requested feature: "
           "CPUID.07H:EDX.spec-ctrl [bit 26]\n"
           "qemu-system-x86_64: warning: TCG doesn't support requested feature: "
           "CPUID.80000008H:EBX.amd-ssbd [bit 24]\n")
    assert pathlen.tcg_warnings(err) == ["CPUID.07H:EDX.spec-ctrl [bit 26]",
                                         "CPUID.80000008H:EBX.amd-ssbd [bit 24]"]
    rec = pathlen.cpu_model_record("Skylake-Server-v4", [err, None])
    assert rec["family"] == "skylake" and len(rec["tcg_missing"]) == 2
    assert pathlen.cpu_model_record("max")["family"] is None


def test_cost_families_and_estimate_arithmetic():
    from kmltool import costs
    assert [costs.family_of(m) for m in ("Skylake-Server-v4", "Cascadelake-Server",
                                         "Icelake-Server-v2", "EPYC-Rome", "EPYC-Milan-v1",
                                         "max", "EPYC-v3")] == [
        "skylake", "skylake", "icelake", "zen2", "zen3", None, None]
    cell = {"instructions": 300, "costly": [
        {"kind": "CR3 write", "insn": "mov %rdi,%cr3"},
        {"kind": "CR3 write", "insn": "mov %rdi,%cr3"},
        {"kind": "SWAPGS", "insn": "swapgs"},
        {"kind": "serializing", "insn": "cpuid"},
        {"kind": "serializing", "insn": "lidt (%rax)"}]}
    e = costs.estimate(cell, "skylake")
    # 297 ordinary at CPI 1 + 2 x 200 (CR3, G) + 100 (CPUID, A)
    assert (e["ordinary"], e["priced"], e["cycles"]) == (297, 3, 297 + 400 + 100)
    assert e["unpriced"] == {"SWAPGS": 1, "serializing": 1}
    assert e["sources"] == ["A", "G", "cpi"]
    z = costs.estimate(cell, "zen3")        # CR3 only, from pti.rst; no CPUID figure
    assert (z["cycles"], z["sources"]) == (298 + 200, ["P", "cpi"])
    assert all(src in costs.SOURCES for f in costs.COSTS.values() for _, src, _ in f.values())


def test_markdown_with_estimates(monkeypatch):
    monkeypatch.setattr(pathlen, "GUEST_BINARY", None)
    monkeypatch.setattr(pathlen, "VDSO_DBG", None)
    d = combined()
    d["cpu_model"] = pathlen.cpu_model_record("EPYC-Milan", [
        "warning: TCG doesn't support requested feature: CPUID.80000008H:EBX.ibrs [bit 14]"])
    d["estimates"] = pathlen.estimates(d)
    md = report.pathlen_markdown(d)
    assert "`-cpu EPYC-Milan` (cost family: Zen 3" in md
    assert "TCG does not support CPUID.80000008H:EBX.ibrs [bit 14]" in md
    assert "| est. cycles (off / on) |" in md and "| ~5 / ~5 |" in md
    assert "Cycle estimates for Zen 3" in md and "ESTIMATES, not measurements" in md
    assert "no spec-ctrl" in md
    d["cpu_model"] = pathlen.cpu_model_record("max")
    assert pathlen.estimates(d) is None


def test_a_long_rep_runs_to_its_end():
    """rep stos with 4096 iterations left: a breakpoint after it, one
    continue, the iterations from RCX; a short one is stepped."""
    assert pathlen.rep_length(bytes.fromhex("f3aa")) == 2          # rep stos %al
    assert pathlen.rep_length(bytes.fromhex("f348a5")) == 3        # rep movsq
    assert pathlen.rep_length(bytes.fromhex("aa")) is None         # stos, no rep
    assert pathlen.rep_length(bytes.fromhex("f390")) is None       # pause

    class Stub(FakeStub):
        breaks, conts, writes = [], 0, []

        def set_reg(self, name, value):
            self.writes.append((name, value))

        def set_break(self, at):
            self.breaks.append(at)

        def clear_break(self, at):
            self.breaks.remove(at)

        def cont(self):
            self.conts += 1
            self.i += 1

        def wait_stop(self, timeout):
            return StopReply("T05thread:01;")
    at, end = 0x5A402288, 0x5A40228A
    states = [regs(at), dict(regs(K, rcx=4096), eflags=0x246), dict(regs(K + 2, rcx=0),
                                                                   eflags=0x46),
              regs(K + 3, rcx=3),
              regs(K + 3, rcx=2), regs(K + 3, rcx=1), regs(K + 5), regs(end)]
    stub = Stub(states, code=bytes.fromhex("f3aa"))
    code = {}
    steps, _ = pathlen.trace(stub, "01", stub.regs(), end, code)
    assert stub.conts == 1 and stub.breaks == []
    # interrupts off for the run, on again after it
    assert stub.writes == [("eflags", 0x46), ("eflags", 0x246)]
    assert [s.rip for s in steps].count(K) == 4096
    assert [s.rip for s in steps].count(K + 3) == 3        # rcx 3 <= REP_RUN: stepped
    ex = insn.executions(steps, {K: "rep stos %al,%es:(%rdi)",
                                 K + 3: "rep stos %al,%es:(%rdi)"})
    assert [n for _, n in ex] == [1, 4096, 1, 3, 1]


def test_cpu_model_warnings_are_no_console_problems():
    """bugs.c's plain messages for a model's mitigations (--cpu) do not
    fail the boot; a real splat still does."""
    from kmltool import console
    log = ("[    0.1] RETBleed: WARNING: Spectre v2 mitigation leaves CPU vulnerable to "
           "RETBleed attacks, data leaks possible!\n"
           "[    0.1] Speculative Return Stack Overflow: WARNING: See "
           "https://kernel.org/doc/html/latest/admin-guide/hw-vuln/srso.html for mitigation "
           "options.\n"
           "[    0.2] WARNING: CPU: 0 PID: 1 at kernel/foo.c:1 bar+0x0/0x10\n")
    assert [k for k, _, _ in console.problems(log)] == ["WARNING"]


def test_the_demo_lead_boots_each_mode_afresh():
    """The demo's first table: every mode in a boot of its own, five hits
    counted per row, so no mode runs second to another's warm-up."""
    from kmltool import guestrun
    from kmltool.commands import bench
    specs = pathlen.specs(list(bench.LEAD_OPS), ("off",), None, boot_per_mode=True)
    boots = guestrun.group(specs)
    assert len(boots) == len(specs) == len(pathlen.MODES)
    assert all(len(members) == 1 for _, _, members in boots)
    assert bench.LEAD_SAMPLES >= 5
    assert len(guestrun.group(pathlen.specs(list(bench.LEAD_OPS), ("off",)))) == 1
