"""The instruction policy and objdump output parsing (no binaries needed)."""
import pytest

from kmlverify import disasm, policy


def rule_for(text):
    return policy.classify(*policy.split_instruction(text))


@pytest.mark.parametrize("text, category", [
    ("hlt", "halt"),
    ("cli", "interrupt-flag"),
    ("ds cli", "interrupt-flag"),
    ("popf", "interrupt-flag"),
    ("wrmsr", "msr"),
    ("mov    %rax,%cr3", "control-register"),
    ("mov    %cr0,%rax", "control-register"),
    ("mov    %rax,%db7", "control-register"),
    ("swapgs", "gs-base"),
    ("iretq", "privilege-return"),
    ("sysretq", "privilege-return"),
    ("mov    %eax,%ds", "segment-write"),
    ("mov    (%rax),%es", "segment-write"),
    ("movw   $0x10,%ss", "segment-write"),
    ("pop    %fs", "segment-write"),
    ("lss    (%rax),%esp", "segment-write"),
    ("lgdt   (%rax)", "system-register"),
    ("sgdt   (%rax)", "system-register"),
    ("out    %al,$0x80", "port-io"),
    ("rep insb (%dx),%es:(%rdi)", "port-io"),
    ("ljmp   *(%rax)", "far-transfer"),
    ("lretq", "far-transfer"),
    ("int    $0x80", "kernel-entry"),
    ("sysenter", "kernel-entry"),
    ("invlpg (%rax)", "cache-tlb"),
    ("stac", "smap"),
    ("xrstors (%rax)", "supervisor-state"),
    ("vmcall", "virtualization"),
])
def test_flagged(text, category):
    rule = rule_for(text)
    assert rule is not None and rule.category == category


@pytest.mark.parametrize("text", [
    "syscall", "int3", "ud2", "cpuid", "rdtsc", "rdtscp", "xgetbv", "pause",
    "mov    %fs:0x28,%rax",                      # segment override: a memory read
    "mov    %rax,%fs:0x10",                      # a memory write through FS
    "mov    %fs,%eax", "mov    %ds,(%rax)", "push   %fs",   # reading segment registers
    "rdfsbase %rax", "rdgsbase %rax", "wrfsbase %rax", "wrgsbase %rax",
    "cs nopw 0x0(%rax,%rax,1)", "data16 cs nopw 0x0(%rax,%rax,1)",
    "lock cmpxchg %rcx,(%rdx)", "notrack jmp *%rax", "bnd jmp *%rax",
    "mov    0x8(%rsp),%rax   # 0x1234", "call   *0x10(%rax)",
    "jmp    *%rax", "movabs $0xcafe,%rax", "xsave  (%rsp)", "xrstor (%rsp)",
    "fs",                                        # a lone prefix
])
def test_allowed(text):
    assert rule_for(text) is None


def test_prefixes_and_annotations_are_stripped():
    assert policy.split_instruction("rep stos %rax,%es:(%rdi)") == ("stos", "%rax,%es:(%rdi)")
    assert policy.split_instruction("rex.W iretq") == ("iretq", "")
    assert policy.split_instruction("call   0x401000 <main>") == ("call", "0x401000")
    assert rule_for("mov    0x8(%rax,%rbx,4),%ds") is policy.SEGMENT_WRITE


def test_every_rule_has_a_reason_and_a_known_severity():
    for mnemonics, rule in policy.policy_table():
        assert mnemonics and rule.reason and rule.severity in (policy.ERROR, policy.WARNING)
    assert [m for m, r in policy.MNEMONIC_RULES.items() if r.severity == policy.WARNING] == ["hlt"]


def test_parse_objdump_output():
    text = """
/tmp/x:     file format binary


Disassembly of section .data:

0000000000001000 <.data+0x1000>:
    1000:\tf4                   \thlt
    1001:\t0f 01 f8             \tswapgs
    1004:\t64 48 8b 04 25 28 00 00 00 \tmov    %fs:0x28,%rax
    100d:\tff                   \t(bad)
    100e:\t0f                   \t.byte 0xf
"""
    insns = list(disasm.parse_objdump(text.splitlines()))
    assert [(i.offset, i.raw, i.text) for i in insns[:3]] == [
        (0x1000, "f4", "hlt"), (0x1001, "0f 01 f8", "swapgs"),
        (0x1004, "64 48 8b 04 25 28 00 00 00", "mov    %fs:0x28,%rax")]
    assert [disasm.is_undecodable(i.text) for i in insns] == [False, False, False, True, True]
