"""Decoding x86-64 text with GNU objdump (Intel syntax) into operand trees.

Why objdump and not a decoder of our own: the kernel's checker will use the
kernel's instruction decoder (arch/x86/lib/insn.c); the reference checker
should decode with an *independent* implementation so that the planned
differential test compares two decoders, not one decoder with itself.
objdump is complete, maintained and already used by ``kmlverify``.  Its
known weak spots -- redundant or conflicting prefixes, where decoders
disagree about lengths -- are closed by :func:`scan_prefixes`, which reads
the prefix bytes itself, and by the prefix rule of :mod:`kmltal.x86.rules`.

The text is decoded by one linear sweep over the whole executable range.
The bundle rule (no instruction crosses a 32-byte boundary) makes the
linear sweep *the* decoding: every bundle start is an instruction start,
so a jump to any bundle start sees exactly the instructions checked here.
Addresses in objdump's output are file offsets.
"""

import functools
import re
import shutil
import subprocess
from typing import NamedTuple, Optional, Tuple

# ---------------------------------------------------------------- registers

GPR64 = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
         "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")
_GPR32 = ("eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi")
_GPR16 = ("ax", "cx", "dx", "bx", "sp", "bp", "si", "di")
_GPR8 = ("al", "cl", "dl", "bl", "spl", "bpl", "sil", "dil")

#: register name -> (canonical 64-bit name, size in bytes)
GPR = {}
for _i, _r in enumerate(GPR64):
    GPR[_r] = (_r, 8)
    if _i < 8:
        GPR[_GPR32[_i]] = (_r, 4)
        GPR[_GPR16[_i]] = (_r, 2)
        GPR[_GPR8[_i]] = (_r, 1)
    else:
        GPR[_r + "d"] = (_r, 4)
        GPR[_r + "w"] = (_r, 2)
        GPR[_r + "b"] = (_r, 1)
for _h, _r in zip(("ah", "ch", "dh", "bh"), ("rax", "rcx", "rdx", "rbx")):
    GPR[_h] = (_r, 1)

SEGMENT_REGS = {"es", "cs", "ss", "ds", "fs", "gs"}
_VECTOR_RE = re.compile(r"^([xyz]mm\d+|k\d|mm\d|st(\(\d\))?|tmm\d|bnd\d)$")
_SYSTEM_RE = re.compile(r"^(cr\d+|dr\d+|tr\d+)$")

# ---------------------------------------------------------------- operands


class Reg(NamedTuple):
    """A general-purpose register operand."""
    name: str        # as written (eax, r11d, ...)
    canon: str       # 64-bit register (rax, r11, ...)
    size: int        # bytes


class OtherReg(NamedTuple):
    """A non-GPR register: vector, x87, mask, segment, control, debug."""
    name: str
    kind: str        # "vector", "segment", "system"


class Imm(NamedTuple):
    """An immediate or a direct branch target (unsigned, as printed)."""
    value: int


class Mem(NamedTuple):
    """A memory operand ``seg:[base + index*scale + disp]`` or an absolute
    ``seg:disp`` (base and index None).  ``base`` is a canonical 64-bit GPR,
    ``rip``, or None; ``addr32`` when the registers are 32-bit (0x67);
    ``vsib`` when the index is a vector register (gather/scatter)."""
    seg: Optional[str]
    base: Optional[str]
    index: Optional[str]
    scale: int
    disp: int            # signed
    addr32: bool
    vsib: bool
    absolute: bool
    width: int = 0       # bytes, from objdump's size word (0: not printed)


class Insn(NamedTuple):
    """One decoded instruction."""
    offset: int                  # file offset
    raw: bytes
    text: str                    # objdump's text
    prefixes: Tuple[str, ...]    # prefix words objdump printed (rep, lock, data16, cs...)
    mnemonic: str                # "" when undecodable
    operands: tuple              # Reg / OtherReg / Imm / Mem
    error: Optional[str] = None  # why the operands could not be parsed

    @property
    def end(self):
        return self.offset + len(self.raw)


class DecodeError(Exception):
    """objdump is missing or failed."""


PREFIX_WORDS = {"rep", "repz", "repnz", "repe", "repne", "lock", "data16", "data32",
                "addr32", "cs", "ds", "es", "ss", "fs", "gs", "notrack", "bnd",
                "xacquire", "xrelease", "{vex}", "{vex3}", "{evex}"}

_MEM_RE = re.compile(r"^(?:(\w+) (?:PTR|BCST) )?(?:([a-z]s):)?\[([^\]]*)\]$")
_ABS_RE = re.compile(r"^(?:(\w+) (?:PTR|BCST) )?([a-z]s):(0x[0-9a-f]+|\d+)$")
_NUM_RE = re.compile(r"^-?(0x[0-9a-f]+|\d+)$")
_TERM_RE = re.compile(r"[+-]?[^+-]+")


def _num(s):
    return int(s, 0)


def _split_operands(s):
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return [o.strip() for o in out if o.strip()]


WIDTHS = {"BYTE": 1, "WORD": 2, "DWORD": 4, "FWORD": 6, "QWORD": 8, "TBYTE": 10,
          "OWORD": 16, "XMMWORD": 16, "YMMWORD": 32, "ZMMWORD": 64}


def _parse_address(seg, expr, width=0):
    base = index = None
    scale, disp, addr32, vsib = 1, 0, False, False
    for term in _TERM_RE.findall(expr.replace(" ", "")):
        sign = -1 if term[0] == "-" else 1
        t = term.lstrip("+-")
        if "*" in t:
            r, sc = t.split("*", 1)
            scale = _num(sc)
            if r in ("riz", "eiz"):
                addr32 = addr32 or r == "eiz"
                continue
            if r in GPR:
                canon, size = GPR[r]
                if size == 4:
                    addr32 = True
                elif size != 8:
                    raise ValueError(f"odd index register {r}")
                index = canon
            elif _VECTOR_RE.match(r):
                vsib, index = True, r
            else:
                raise ValueError(f"unknown index {r}")
        elif t in ("rip", "eip"):
            base, addr32 = "rip", addr32 or t == "eip"
        elif t in ("riz", "eiz"):
            addr32 = addr32 or t == "eiz"
        elif t in GPR:
            canon, size = GPR[t]
            if size == 4:
                addr32 = True
            elif size != 8:
                raise ValueError(f"odd base register {t}")
            if base is None:
                base = canon
            elif index is None:
                index = canon
            else:
                raise ValueError("three address registers")
        elif _NUM_RE.match(t):
            disp += sign * _num(t)
        else:
            raise ValueError(f"unknown address term {t!r}")
    if base == "rip" and disp >= 1 << 63:
        # objdump prints a negative RIP displacement sign-extended as an
        # unsigned 64-bit number ([rip+0xfffffffffffffff0]): read it back
        disp -= 1 << 64
    return Mem(seg, base, index, scale, disp, addr32, vsib, False, width)


def parse_operand(s):
    """One operand of objdump's Intel syntax."""
    s = re.sub(r"\{[^}]*\}", "", s).strip()          # AVX-512 {k1}{z}{1to16}{sae}
    if s in GPR:
        canon, size = GPR[s]
        return Reg(s, canon, size)
    if s in SEGMENT_REGS:
        return OtherReg(s, "segment")
    if _VECTOR_RE.match(s):
        return OtherReg(s, "vector")
    if _SYSTEM_RE.match(s):
        return OtherReg(s, "system")
    m = _MEM_RE.match(s)
    if m:
        return _parse_address(m.group(2), m.group(3), WIDTHS.get(m.group(1), 0))
    m = _ABS_RE.match(s)
    if m:
        v = _num(m.group(3))
        if v >= 1 << 63:
            v -= 1 << 64
        return Mem(m.group(2), None, None, 1, v, False, False, True,
                   WIDTHS.get(m.group(1), 0))
    if _NUM_RE.match(s):
        return Imm(_num(s))
    raise ValueError(f"cannot parse operand {s!r}")


@functools.lru_cache(maxsize=1 << 16)
def parse_text(text):
    """Split objdump's text into (prefix words, mnemonic, operands)."""
    text = text.split("#", 1)[0]
    text = re.sub(r"\s*<[^>]*>\s*$", "", text).strip()
    words = text.split(None, 1)
    prefixes = []
    while words and (words[0] in PREFIX_WORDS or words[0].startswith("rex")):
        prefixes.append(words[0])
        words = words[1].split(None, 1) if len(words) > 1 else []
    if not words:
        return tuple(prefixes), "", ()
    mnemonic = words[0]
    ops = tuple(parse_operand(o) for o in _split_operands(words[1])) if len(words) > 1 else ()
    return tuple(prefixes), mnemonic, ops


_LINE_RE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+)\t?(.*)$")


def parse_objdump(lines):
    """objdump -w lines -> :class:`Insn` (undecodable bytes: mnemonic "")."""
    for line in lines:
        m = _LINE_RE.match(line.rstrip("\n"))
        if not m:
            continue
        offset = int(m.group(1), 16)
        raw = bytes.fromhex(m.group(2).replace(" ", ""))
        text = m.group(3).strip()
        if text == "nop" and raw == b"\x90":
            yield Insn(offset, raw, text, (), "nop", ())
            continue
        if not text or text.startswith("(bad)") or text.startswith(".byte") \
                or "(bad)" in text:
            yield Insn(offset, raw, text or "(bad)", (), "", (), "undecodable")
            continue
        try:
            prefixes, mnemonic, ops = parse_text(text)
        except ValueError as e:
            yield Insn(offset, raw, text, (), "", (), str(e))
            continue
        yield Insn(offset, raw, text, prefixes, mnemonic, ops)


def objdump_path():
    path = shutil.which("objdump")
    if path is None:
        raise DecodeError("objdump not found (install binutils)")
    return path


def decode_file(path, start, stop):
    """Decode file bytes ``[start, stop)`` of ``path``; a list of :class:`Insn`."""
    if stop <= start:
        return []
    cmd = [objdump_path(), "-D", "-b", "binary", "-m", "i386:x86-64", "-M", "intel",
           "-w", "-z", f"--start-address={start:#x}", f"--stop-address={stop:#x}", path]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise DecodeError(f"cannot run objdump: {e}") from e
    if proc.returncode != 0:
        raise DecodeError(f"objdump failed on {path}: {proc.stderr.strip()}")
    return list(parse_objdump(proc.stdout.splitlines()))


# ---------------------------------------------------------------- raw prefixes

LEGACY_PREFIXES = {0xF0: "lock", 0xF2: "f2", 0xF3: "f3", 0x2E: "cs", 0x36: "ss",
                   0x3E: "ds", 0x26: "es", 0x64: "fs", 0x65: "gs", 0x66: "66", 0x67: "67"}


class Prefixes(NamedTuple):
    """The prefix bytes of an instruction, read from its raw bytes."""
    legacy: Tuple[int, ...]
    rex: Optional[int]
    opcode_at: int           # index of the first opcode byte (VEX/EVEX included)


def scan_prefixes(raw):
    """Read the legacy prefixes and REX of ``raw`` (independently of objdump)."""
    legacy = []
    i = 0
    while i < len(raw) and raw[i] in LEGACY_PREFIXES:
        legacy.append(raw[i])
        i += 1
    rex = None
    if i < len(raw) and 0x40 <= raw[i] <= 0x4F:
        rex = raw[i]
        i += 1
    return Prefixes(tuple(legacy), rex, i)
