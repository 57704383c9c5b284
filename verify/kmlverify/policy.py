"""Which x86-64 instructions the admission scan rejects, and why.

The rule: a program that will run at CPL 0 must not contain an instruction
whose effect *changes* when hardware protection is taken away.  In an
ordinary Linux process (CPL 3) each instruction listed here either faults
(#GP/#UD: privileged, IOPL-sensitive, UMIP-protected) or is harmless only
because the CPU checks the current privilege level (segment loads, far
transfers, POPF ignoring IF/IOPL).  At CPL 0 the same bytes reprogram the
CPU, talk to devices, disable interrupts, leave the kernel's GS/stack
conventions or return to another privilege level.

Two severities:

* ``error`` -- the instruction can subvert the kernel or the machine when
  executed at CPL 0; the file fails the scan.
* ``warning`` -- CPL 0-only but cannot hurt the kernel while interrupts stay
  enabled (they can only be disabled by instructions in the error list).
  Only ``hlt`` is here: glibc uses it as its "crash now" instruction (after
  ``exit_group`` in ``_exit``, at the end of ``abort``, after
  ``__libc_start_main`` in ``_start``).  At CPL 3 it faults; at CPL 0 it
  waits for the next interrupt and glibc's code then loops or continues to
  ``_exit``.  ``--strict`` turns warnings into failures.

Deliberately *allowed* (not flagged): ``syscall`` (how a kernel-mode
process calls the kernel), ``int3`` and ``ud2`` (they raise exceptions that
the kernel-mode patch turns into signals for the process), ``cpuid``,
``rdtsc``/``rdtscp``/``rdpid``/``rdpmc`` (readable from CPL 3 on Linux),
``xgetbv``, ``xsave``/``xrstor``/``fxsave``/``fxrstor`` (user state only),
``rdfsbase``/``rdgsbase``/``wrfsbase``/``wrgsbase`` (FSGSBASE is enabled
for user space, and a kernel-mode process always runs with its own GS
base: every entry from it swaps to the kernel's, the rst's "Events while
the process runs"),
``rdpkru``/``wrpkru``, user shadow-stack instructions,
``umonitor``/``umwait``/``tpause``, ``enclu``, reads of segment registers
(``mov %fs,%eax``, ``push %fs``) and segment-override prefixes
(``mov %fs:0x28,%rax``).
"""

import re
from dataclasses import dataclass

#: Severity of a finding that makes the scan fail.
ERROR = "error"
#: Severity of a finding that is reported but passes unless ``--strict``.
WARNING = "warning"


@dataclass(frozen=True)
class Rule:
    """Why an instruction is flagged."""

    category: str
    severity: str
    reason: str


def _rules(mnemonics, category, reason, severity=ERROR):
    rule = Rule(category, severity, reason)
    return {m: rule for m in mnemonics.split()}


def _sized(base, suffixes="w l q"):
    """``base`` plus its AT&T operand-size spellings (``iret iretw iretl ...``)."""
    return " ".join([base] + [base + s for s in suffixes.split()])


#: Mnemonic (as objdump prints it, AT&T syntax, prefixes removed) -> rule.
MNEMONIC_RULES = {}
MNEMONIC_RULES.update(_rules(
    "hlt", "halt",
    "CPL 0 only: halts the CPU until the next interrupt (glibc's crash "
    "instruction; harmless while interrupts stay enabled)", WARNING))
MNEMONIC_RULES.update(_rules(
    "cli sti " + _sized("popf", "w l q"), "interrupt-flag",
    "at CPL 0 changes IF (and POPF also IOPL/AC): disables interrupts, "
    "so the process can no longer be preempted, or grants I/O privilege"))
MNEMONIC_RULES.update(_rules(
    "in inb inw inl ins insb insw insl insd "
    "out outb outw outl outs outsb outsw outsl outsd", "port-io",
    "IOPL-sensitive port I/O: direct device access"))
MNEMONIC_RULES.update(_rules(
    "wrmsr rdmsr wrmsrns rdmsrlist wrmsrlist", "msr",
    "CPL 0 only: reads or writes model-specific registers (syscall entry "
    "point, GS base, EFER, ...)"))
MNEMONIC_RULES.update(_rules(
    "lgdt lidt lldt ltr lmsw clts xsetbv", "system-register",
    "CPL 0 only: loads descriptor tables, the task register or "
    "control state"))
MNEMONIC_RULES.update(_rules(
    "sgdt sidt sldt str smsw", "system-register",
    "UMIP-protected (faults at CPL 3): reveals kernel descriptor-table "
    "addresses (KASLR)"))
MNEMONIC_RULES.update(_rules(
    "invd wbinvd wbnoinvd invlpg invlpga invlpgb tlbsync invpcid invept "
    "invvpid", "cache-tlb",
    "CPL 0 only: cache or TLB invalidation (INVD discards dirty lines; "
    "TLB control breaks the kernel's page-table invariants)"))
MNEMONIC_RULES.update(_rules(
    "swapgs", "gs-base",
    "CPL 0 only: swaps the user and kernel GS base; the kernel finds its "
    "per-CPU data through GS"))
MNEMONIC_RULES.update(_rules(
    _sized("iret", "w l d q") + " " + _sized("sysret", "w l q") + " "
    + _sized("sysexit", "l q") + " erets eretu", "privilege-return",
    "returns to another privilege level with a caller-chosen CS/SS/RFLAGS"))
MNEMONIC_RULES.update(_rules(
    "sysenter int int1 icebp", "kernel-entry",
    "enters a kernel entry point that assumes it was called from CPL 3 "
    "(SWAPGS, stack switch); from CPL 0 that corrupts kernel state "
    "(a kernel-mode process calls the kernel with syscall)"))
MNEMONIC_RULES.update(_rules(
    _sized("ljmp") + " " + _sized("lcall") + " " + _sized("lret"),
    "far-transfer",
    "far jump/call/return loads CS: at CPL 0 it can switch to another "
    "code segment or return to CPL 3 on a forged stack"))
MNEMONIC_RULES.update(_rules(
    "lss lfs lgs lds les lkgs", "segment-write",
    "loads a segment register (at CPL 0 any descriptor, including kernel "
    "ones and a null SS)"))
MNEMONIC_RULES.update(_rules(
    "monitor mwait", "power",
    "CPL 0 only: MONITOR/MWAIT can put the CPU into a deep idle state"))
MNEMONIC_RULES.update(_rules(
    "stac clac", "smap",
    "CPL 0 only: toggles SMAP enforcement (RFLAGS.AC)"))
MNEMONIC_RULES.update(_rules(
    "xsaves xsaves64 xrstors xrstors64", "supervisor-state",
    "CPL 0 only: saves or restores supervisor XSAVE state"))
MNEMONIC_RULES.update(_rules(
    "wrussd wrussq setssbsy clrssbsy", "shadow-stack",
    "CPL 0 only: writes user shadow stacks or supervisor shadow-stack "
    "tokens"))
MNEMONIC_RULES.update(_rules(
    "vmcall vmmcall vmlaunch vmresume vmxon vmxoff vmptrld vmptrst vmclear "
    "vmread vmwrite vmfunc vmrun vmload vmsave stgi clgi skinit tdcall "
    "seamcall seamret seamops", "virtualization",
    "hypervisor interface: VMX/SVM/TDX control, or hypercalls that the "
    "hypervisor trusts when they come from CPL 0"))
MNEMONIC_RULES.update(_rules(
    "encls enclv getsec pconfig rsm hreset enqcmds pvalidate psmash "
    "rmpupdate rmpadjust rmpquery", "platform",
    "CPL 0 only (or SMM only): SGX/SMX/TME/SEV-SNP platform control"))

#: Rules for instructions that are flagged only with some operands.
SEGMENT_WRITE = Rule(
    "segment-write", ERROR,
    "writes a segment register (at CPL 0 any descriptor, including kernel "
    "ones and a null SS; reading one is fine)")
CONTROL_REGISTER = Rule(
    "control-register", ERROR,
    "CPL 0 only: moves to or from control/debug registers (CR0, CR3 page "
    "tables, CR4, CR8, DR0-DR7)")

#: Prefixes objdump prints in front of the mnemonic.
PREFIXES = frozenset(
    "rep repz repnz repe repne lock cs ds es fs gs ss data16 data32 addr16 "
    "addr32 notrack bnd xacquire xrelease {vex} {vex2} {vex3} {evex} "
    "{disp8} {disp32} {load} {store}".split())

_MOVES = frozenset("mov movw movl movq".split())
_POPS = frozenset("pop popw popl popq".split())
_SEGMENT_REGS = frozenset("%cs %ds %es %fs %gs %ss".split())
_SYSTEM_REG = re.compile(r"%(?:cr|db|dr|tr)\d+\b")


def split_instruction(text):
    """Split objdump's instruction text into ``(mnemonic, operands)``.

    Prefixes (``rep``, ``lock``, ``cs``, ``rex.W``, ...) are dropped, as
    are objdump's trailing ``# comment`` and ``<symbol>`` annotations.  A
    line holding only prefixes yields the last prefix as mnemonic.
    """
    text = text.split("#", 1)[0]
    if "<" in text:
        text = re.sub(r"<[^>]*>", "", text)
    tokens = text.split()
    i = 0
    while i < len(tokens) - 1 and (tokens[i] in PREFIXES or tokens[i].startswith("rex")):
        i += 1
    if not tokens:
        return "", ""
    return tokens[i], " ".join(tokens[i + 1:])


def _writes_segment_register(operands):
    """True if the last (destination) AT&T operand is a bare segment register."""
    ops = operands.rstrip()
    return ops[-3:] in _SEGMENT_REGS and (len(ops) == 3 or ops[-4] == ",")


def classify(mnemonic, operands):
    """Return the :class:`Rule` that flags this instruction, or ``None``."""
    rule = MNEMONIC_RULES.get(mnemonic)
    if rule is not None:
        return rule
    if mnemonic in _MOVES:
        if "%" not in operands:
            return None
        if _SYSTEM_REG.search(operands):
            return CONTROL_REGISTER
        if _writes_segment_register(operands):
            return SEGMENT_WRITE
    elif mnemonic in _POPS and _writes_segment_register(operands):
        return SEGMENT_WRITE
    return None


def policy_table():
    """The rules as ``[(mnemonics, rule)]`` grouped by rule, for docs/tests."""
    groups = {}
    for mnemonic, rule in MNEMONIC_RULES.items():
        groups.setdefault(rule, []).append(mnemonic)
    table = [(sorted(ms), rule) for rule, ms in groups.items()]
    table.append((["mov to/from %crN/%dbN"], CONTROL_REGISTER))
    table.append((["mov ...,%sreg", "pop %sreg"], SEGMENT_WRITE))
    return table
