"""Rewrite gcc's x86-64 assembly (AT&T syntax) to follow the rules of
verified programs (docs/verification.md, "Verified programs: the rules").

The program keeps all its data below 4 GiB (crt0.s moves the initial stack
there; kmlcc.h makes anonymous mappings MAP_32BIT), so every memory operand
that is not RSP- or RIP-relative is written with 32-bit registers: gas then
emits the address-size prefix 0x67 and the CPU computes the address modulo
2^32, which is the same address for data below 4 GiB and can never reach
the upper half -- without a mask, so without touching RFLAGS, which gcc may
keep live across a load.  Besides:

* ``ret`` becomes ``pop %r11; and $-32, %r11d; jmp *%r11`` in one bundle
  (flags are dead at a return);
* every call ends at a bundle end, so return addresses are bundle starts;
* indirect calls and jumps go through %r11, masked to a bundle start below
  4 GiB in the bundle of the transfer;
* ``sub``/``add`` of an immediate to RSP are followed, in the same bundle,
  by a load from (%rsp), which brings RSP back to the stack type; other
  writes of RSP (``leave``, ``mov``/``lea``/``sub`` from registers, as in
  frames with variable-length arrays) compute the value, zero-extend it
  through %r11 -- the stack is below 4 GiB -- and load from (%rsp);
* string instructions get the address-size prefix;
* ``push`` from memory goes through %r11.

%r11 is the rewriter's (gcc runs with -ffixed-r11).  What the rules refuse
and this rewriter does not handle (frames larger than 64 KiB) is left as
it is, and the checker says where.
"""

import re

REG64 = ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
         "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"]
TO32 = {r: (r + "d" if r[1].isdigit() else "e" + r[1:]) for r in REG64}

# a memory operand: optional segment, displacement, (base, index, scale)
MEM = re.compile(r"(%[cdefgs]s:)?([-+]?[\w.$@+\-*/]*)\((%\w+)?(?:,(%\w+))?(?:,(\d))?\)")
STRING = re.compile(r"^(rep[a-z]*\s+)?(movs|stos|lods|cmps|scas)[bwlq]?\b")
CODE_SECTION = re.compile(r'^\s*\.(text\b|section\s+\.text[\w.]*(\s*,\s*"[^"]*x[^"]*")?\s*(,|$))')
OTHER_SECTION = re.compile(r"^\s*\.(section|data|bss|rodata)\b")


class RewriteError(Exception):
    pass


def _mem32(operands):
    """Operands with their memory operands' 64-bit registers made 32-bit,
    except RIP-relative ones and a bare RSP base; and whether any changed."""
    changed = False

    def fix(m):
        nonlocal changed
        seg, disp, base, index, scale = m.groups()
        if base == "%rip":
            return m.group(0)
        if base == "%rsp" and index is None:
            return m.group(0)
        regs = [r for r in (base, index) if r]
        if any(r[1:] not in REG64 for r in regs):
            return m.group(0)           # already 32-bit
        changed = True
        b = "%" + TO32[base[1:]] if base else ""
        i = ",%" + TO32[index[1:]] if index else ""
        s = "," + scale if scale else ""
        return f"{seg or ''}{disp}({b}{i}{s})"
    return MEM.sub(fix, operands), changed


def _split(line):
    """(indent, mnemonic, operands, comment) of an instruction line."""
    body, _, comment = line.partition("#")
    m = re.match(r"^(\s*)(\S+)\s*(.*?)\s*$", body)
    return m.group(1), m.group(2), m.group(3), comment


def _bundle(*insns):
    return ["\t.bundle_lock"] + [f"\t{i}" for i in insns] + ["\t.bundle_unlock"]


def _call_at_bundle_end(size, *insns):
    """insns (``size`` bytes in all) placed so that they end at a bundle
    end: the return address is then a bundle start."""
    return ["\t.p2align 5", f"\t.nops {32 - size}"] + _bundle(*insns)


def _set_rsp(reg):
    """RSP = reg (a stack address, below 4 GiB): zero-extend it through
    %r11 (a 32-bit move: no flags written, and a type the stack rule
    takes), move it to RSP, and load from (%rsp), which brings RSP back to
    the stack type -- in one bundle."""
    r32 = "%" + TO32[reg[1:]] if reg[1:] in TO32 else reg
    return _bundle(f"movl\t{r32}, %r11d", "movq\t%r11, %rsp", "movq\t(%rsp), %r11")


def _to_r11(target):
    """Instructions that put an indirect transfer's target in %r11."""
    if target.startswith("%"):
        return [f"\tmovq\t{target}, %r11"]
    mem, _ = _mem32(target)
    return [f"\tmovq\t{mem}, %r11"]


def rewrite_insn(line):
    indent, mn, ops, _ = _split(line)
    base = mn.rstrip("q") if mn in ("retq", "callq", "jmpq", "pushq", "popq") else mn
    if mn in ("ret", "retq") or (mn == "rep" and ops in ("ret", "retq")):
        return _bundle("popq\t%r11", "andl\t$-32, %r11d", "jmp\t*%r11")
    if base == "call":
        if ops.startswith("*"):
            return _to_r11(ops[1:]) + _call_at_bundle_end(
                7, "andl\t$-32, %r11d", "call\t*%r11")
        return _call_at_bundle_end(5, f"call\t{ops}")
    if base == "jmp" and ops.startswith("*"):
        return _to_r11(ops[1:]) + _bundle("andl\t$-32, %r11d", "jmp\t*%r11")
    if base == "enter":
        raise RewriteError("`enter`: not supported")
    if base == "leave":
        return _set_rsp("%rbp") + ["\tpopq\t%rbp"]
    m = re.match(r"^\$(-?(?:0x[0-9a-f]+|\d+)),\s*%rsp$", ops)
    if mn in ("subq", "sub", "addq", "add") and m:
        return _bundle(f"{mn}\t{ops}", "movq\t(%rsp), %r11")
    m = re.match(r"^(.*),\s*%rsp$", ops)
    if m and mn not in ("cmpq", "cmp", "testq", "test", "andq", "and"):
        src = m.group(1).strip()
        if mn in ("movq", "mov") and re.fullmatch(r"%\w+", src):
            return _set_rsp(src)
        if mn in ("leaq", "lea"):
            return [f"\tleaq\t{src}, %r11"] + _set_rsp("%r11")
        if mn in ("subq", "sub", "addq", "add") and re.fullmatch(r"%\w+", src):
            # the same arithmetic on a copy: the same flags
            return ["\tmovq\t%rsp, %r11", f"\t{mn}\t{src}, %r11"] + _set_rsp("%r11")
        raise RewriteError(f"`{mn} {ops}`: RSP written in a way not supported")
    if base == "push" and "(" in ops:
        mem, _ = _mem32(ops)
        return [f"\tmovq\t{mem}, %r11", "\tpushq\t%r11"]
    text = f"{mn} {ops}".strip()
    m = STRING.match(text)
    if m:
        rest = text[m.end():].strip()      # explicit operands, if any
        if rest:
            new, _ = _mem32(rest)
            return [f"\t{text[:m.end()]}\t{new}"]
        return [f"\taddr32 {text}"]
    if mn.startswith(("lea", "nop")) or "(" not in ops:
        return [line]
    new, changed = _mem32(ops)
    return [f"{indent}{mn}\t{new}"] if changed else [line]


def rewrite(asm, drop=("_start",)):
    """The rewritten text of a gcc .s file.  Functions named in ``drop``
    (nolibc's weak ``_start``, which crt0.s replaces) are left out."""
    out = ["\t.bundle_align_mode 5"]
    code = True
    dropping = None
    for line in asm.splitlines():
        s = line.strip()
        if dropping:
            if s.startswith(".size") and dropping in s:
                dropping = None
            continue
        if s.startswith(".globl") or s.startswith(".weak"):
            name = s.split()[1]
            if name in drop:
                dropping = name
                continue
        if CODE_SECTION.match(line) or OTHER_SECTION.match(line):
            # end each code section's part at a bundle end: ld fills gaps
            # between input sections with NOPs that may cross bundles
            if code:
                out.append("\t.p2align 5")
            code = bool(CODE_SECTION.match(line))
        if not code or not s or s.startswith((".", "#")) or re.fullmatch(r"[\w.$]+:", s):
            out.append(line)
            continue
        if re.match(r"^[\w.$]+:\s*\S", s):      # "label: insn" on one line
            label, rest = s.split(":", 1)
            out.append(f"{label}:")
            line = "\t" + rest.strip()
        for sub in line.split(";"):
            if sub.strip():
                out.extend(rewrite_insn("\t" + sub.strip()))
    if code:
        out.append("\t.p2align 5")
    return "\n".join(out) + "\n"
