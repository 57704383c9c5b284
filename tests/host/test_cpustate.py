"""Unit tests: the vCPU state sampler (host/kmltool/cpustate.py) and the
gdb stub's thread list (gdbstub.Stub.threads): classification, parsing of
the registers, the checks and their messages, the sampler's phases with a
stand-in stub and output; no VM."""
import threading
import time

import pytest
from fake_stub import FakeSocketStub

from kmltool import cpustate, gdbstub, qemu
from kmltool.cpustate import BUSY, IDLE, KERNEL, KERNEL_MODE, USER, CpuState
from kmltool.gdbstub import StubError
from kmltool.paths import KmlError

K = 0xFFFFFFFF81000000      # a kernel address
U = 0x0000000000401000      # a program's
CR4_ON = 0x751EF0           # as QEMU's -cpu max guest has it: PKE, SMAP, SMEP, PAE...
CR4_OFF = CR4_ON & ~(cpustate.SMEP | cpustate.SMAP)


def test_classify():
    assert cpustate.classify(0, U) == KERNEL_MODE
    assert cpustate.classify(0, 0x00007FFFFFFFFFFF) == KERNEL_MODE
    assert cpustate.classify(0, 0x0000800000000000) == KERNEL
    assert cpustate.classify(0, K) == KERNEL
    assert cpustate.classify(3, U) == USER
    assert cpustate.classify(3, K) == USER          # CPL decides first
    with pytest.raises(KmlError, match="CPL 1"):
        cpustate.classify(1, K)


def test_thread_ids_to_vcpus():
    assert cpustate.thread_cpu("1") == 0
    assert cpustate.thread_cpu("0a") == 9
    assert cpustate.thread_cpu("p1.2") == 1
    with pytest.raises(KmlError, match="not a number"):
        cpustate.thread_cpu("p1.x")


def test_cpu_state_from_registers():
    s = cpustate.cpu_state(BUSY, 4, 1, {"cs": 0x10, "rip": U, "cr4": CR4_ON, "rax": 7})
    assert (s.cpl, s.kind, s.smep, s.smap) == (0, KERNEL_MODE, True, True)
    s = cpustate.cpu_state(BUSY, 4, 1, {"cs": 0x33, "rip": U, "cr4": CR4_OFF})
    assert (s.cpl, s.kind, s.smep, s.smap) == (3, USER, False, False)
    assert str(s) == ("busy sample 4 cpu 1: cpl 3 rip 0x0000000000401000 "
                      "cr4 0x451ef0 (SMEP 0, SMAP 0)")
    with pytest.raises(KmlError, match="no cr4"):
        cpustate.cpu_state(BUSY, 0, 0, {"cs": 0x10, "rip": K})
    # no long mode without PAE: such a CR4 is a misread layout, not a finding
    with pytest.raises(KmlError, match="without PAE.*misread"):
        cpustate.cpu_state(BUSY, 0, 0, {"cs": 0x10, "rip": K, "cr4": 0})


# QEMU 7.2's i386-64bit.xml, shortened: registers commented out between gs
# and fs_base, which must not count in the g packet's layout
I386_64 = ('<feature name="org.gnu.gdb.i386.core"><reg name="rip" bitsize="64"/>'
           '<reg name="eflags" bitsize="32"/><reg name="cs" bitsize="32"/>'
           '<reg name="gs" bitsize="32"/>\n  <!--reg name="ss_base" bitsize="64" '
           'type="int64"/>\n  <reg name="es_base" bitsize="64" type="int64"/-->\n'
           '<reg name="fs_base" bitsize="64"/><!-- Control registers -->'
           '<flags id="x64_cr4" size="8"><field name="SMAP" start="21" end="21"/></flags>'
           '<reg name="cr0" bitsize="64"/><reg name="cr4" bitsize="64"/></feature>')


def test_layout_skips_commented_out_registers():
    docs = {"target.xml": '<target><xi:include href="i386-64bit.xml"/></target>',
            "i386-64bit.xml": I386_64}
    layout = gdbstub.parse_layout(docs)
    assert [n for n, _ in layout] == ["rip", "eflags", "cs", "gs", "fs_base", "cr0", "cr4"]
    values = (U, 0x246, 0x10, 0, 0x1234, 0x80050033, CR4_ON)
    text = "".join(v.to_bytes(n, "little").hex() for (_, n), v in zip(layout, values))
    regs = gdbstub.unpack_regs(layout, text)
    assert cpustate.cpu_state(BUSY, 0, 0, regs).cr4 == CR4_ON


def test_layout_without_cr4_is_a_clear_error():
    cpustate.check_layout([("rip", 8), ("cs", 4), ("cr4", 8)])
    with pytest.raises(KmlError, match="lacks cr4.*cannot read CR4"):
        cpustate.check_layout([("rip", 8), ("cs", 4)])


def st(kind, cr4=CR4_ON, phase=BUSY, sample=0, cpu=0):
    cpl, rip = {KERNEL_MODE: (0, U), USER: (3, U), KERNEL: (0, K)}[kind]
    return CpuState(phase, sample, cpu, cpl, rip, cr4)


def test_all_protected_passes():
    states = [st(KERNEL_MODE), st(USER, cpu=1), st(KERNEL, sample=1), st(KERNEL, phase=IDLE)]
    assert cpustate.protection_failure(states) is None
    assert cpustate.missing_classes(states) == []
    c = cpustate.counts(states)
    assert c[(BUSY, KERNEL)] == {"samples": 1, "smep_clear": 0, "smap_clear": 0}
    assert c[(IDLE, KERNEL)]["samples"] == 1
    assert cpustate.summary(states).splitlines()[0].split() == [
        "busy", "kernel-mode", "program", "1", "sample(s),", "SMEP", "clear", "in", "0,",
        "SMAP", "clear", "in", "0"]


def test_failure_names_classes_counts_and_examples():
    states = ([st(KERNEL_MODE, CR4_OFF, sample=i) for i in range(5)]
              + [st(KERNEL_MODE, sample=5), st(USER, cpu=1)]
              + [st(KERNEL, CR4_ON & ~cpustate.SMAP, phase=IDLE)])
    msg = cpustate.protection_failure(states, examples=2)
    lines = msg.splitlines()
    assert lines[0] == "6 of 8 vCPU sample(s) have SMEP or SMAP clear in CR4:"
    assert lines[1] == ("  busy: kernel-mode program: 5 of 6 sample(s) (SMEP clear in 5, "
                        "SMAP clear in 5), e.g.")
    assert lines[2].strip().startswith("busy sample 0 cpu 0: cpl 0 rip 0x0000000000401000")
    assert len([x for x in lines if x.startswith("    busy")]) == 2
    assert "  idle: kernel: 1 of 1 sample(s) (SMEP clear in 0, SMAP clear in 1), e.g." in lines
    assert "user program" not in msg


def test_missing_classes_only_count_the_phase():
    states = [st(KERNEL_MODE), st(KERNEL, phase=IDLE), st(USER, phase=IDLE)]
    assert cpustate.missing_classes(states) == [USER, KERNEL]
    assert cpustate.missing_classes(states, IDLE) == [KERNEL_MODE]


def test_intervals_are_deterministic_and_bounded():
    a = cpustate.intervals(50)
    assert a == cpustate.intervals(50) and a != cpustate.intervals(50, seed=1)
    assert all(0.05 <= x <= 0.15 for x in a) and len(set(a)) == 50


# ---- the stub's threads and the registers of every vCPU --------------



def test_thread_list_over_a_socket():
    fake = FakeSocketStub(["m1,2", "m3", "l", "l", "E01", "OK"])
    stub = gdbstub.Stub(fake.a, timeout=5)
    assert stub.threads() == ["1", "2", "3"]
    assert fake.got == ["qfThreadInfo", "qsThreadInfo", "qsThreadInfo"]
    assert stub.threads() == []
    with pytest.raises(StubError, match="E01"):
        stub.threads()
    with pytest.raises(StubError, match="not a thread list"):
        stub.threads()


class FakeStub:
    """The stub after start(): threads, Hg, g from a table."""

    def __init__(self, regs, layout=(("cs", 4), ("rip", 8), ("cr4", 8))):
        self.layout = list(layout)
        self.table = regs
        self.selected = None

    def threads(self):
        return list(self.table)

    def select(self, thread):
        self.selected = thread

    def regs(self):
        return self.table[self.selected]


def test_read_cpus_reads_every_thread():
    stub = FakeStub({"1": {"cs": 0x10, "rip": K, "cr4": CR4_ON},
                     "2": {"cs": 0x10, "rip": U, "cr4": CR4_OFF}})
    a, b = cpustate.read_cpus(stub, BUSY, 3)
    assert (a.cpu, a.kind, a.sample, b.cpu, b.kind, b.smep) == (0, KERNEL, 3, 1,
                                                                 KERNEL_MODE, False)
    with pytest.raises(KmlError, match="lacks cr4"):
        cpustate.read_cpus(FakeStub({}, layout=[("cs", 4), ("rip", 8)]))
    with pytest.raises(KmlError, match="no thread"):
        cpustate.read_cpus(FakeStub({}))


# ---- the sampler's phases ------------------------------------------

def test_sampler_phases_with_a_stand_in_stub(monkeypatch):
    calls = []

    def fake_sample(address, phase, sample):
        calls.append((phase, sample))
        if (phase, sample) == (IDLE, 2):     # the guest says the idle phase ended
            watch.feed(b"cpustate: done\n")
        return [CpuState(phase, sample, 0, 0, K, CR4_ON)]

    monkeypatch.setattr(cpustate, "sample_once", fake_sample)
    real_sleep = time.sleep
    monkeypatch.setattr(cpustate.time, "sleep", lambda s: None)
    watch = qemu.Watch("/nonexistent.sock")
    said = []
    sampler = cpustate.Sampler({BUSY: 4, IDLE: 10}, say=said.append)
    t = threading.Thread(target=sampler, args=(watch,))
    t.start()
    watch.feed(b"booting\ncpustate: busy\n")
    deadline = time.monotonic() + 5
    while len(calls) < 4 and time.monotonic() < deadline:
        real_sleep(0.01)
    assert calls[:4] == [(BUSY, i) for i in range(4)]
    watch.feed(b"cpustate: idle\n")
    t.join(5)
    assert not t.is_alive()
    assert calls[4:] == [(IDLE, 0), (IDLE, 1), (IDLE, 2)]
    assert sampler.phases == [BUSY, IDLE]
    assert (sampler.taken(BUSY), sampler.taken(IDLE)) == (4, 3)
    assert said[0].startswith("cpustate: busy: 4 sample(s) in ")


def test_sampler_stops_when_the_vm_ends_early(monkeypatch):
    monkeypatch.setattr(cpustate, "sample_once", lambda *a: pytest.fail("sampled"))
    watch = qemu.Watch("/nonexistent.sock")
    watch.feed(b"cpustate: busy")       # the line never completes
    watch.end()
    sampler = cpustate.Sampler()
    sampler(watch)
    assert sampler.phases == [] and sampler.states == []
