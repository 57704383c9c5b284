"""Check an x86-64 ELF executable against the rules of :mod:`kmltal.x86.rules`.

``check_file(path)`` returns a :class:`Result`: ``ok`` or the first
violation (lowest file offset among the code rules; the ELF rules come
first) with its file offset, virtual address, rule name and message.
"""

import struct
from typing import NamedTuple, Optional

from . import rules
from .decode import Imm, decode_file
from .rules import BUNDLE, G, GAMMA0, TEXT_LIMIT, TOP, Violation

PAGE = 4096
PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_GNU_STACK = 1, 2, 3, 0x6474E551
PF_X, PF_W = 1, 2
ET_EXEC, ET_DYN = 2, 3


class InputError(Exception):
    """The file cannot be read (exit status 2 of the command line)."""


class Result(NamedTuple):
    path: str
    ok: bool
    rule: Optional[str] = None
    offset: Optional[int] = None
    vaddr: Optional[int] = None
    message: Optional[str] = None
    instructions: int = 0
    bundles: int = 0

    def line(self):
        if self.ok:
            return f"{self.path}: ok ({self.instructions} instructions, " \
                   f"{self.bundles} bundles)"
        va = f" (vaddr {self.vaddr:#x})" if self.vaddr is not None else ""
        return f"{self.path}: offset {self.offset:#x}{va}: {self.rule}: {self.message}"


class Phdr(NamedTuple):
    index: int
    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    at: int          # file offset of the program header itself


def _pd(v):
    return v & ~(PAGE - 1)


def _pu(v):
    return (v + PAGE - 1) & ~(PAGE - 1)


class _Fail(Exception):
    def __init__(self, rule, offset, message, vaddr=None):
        super().__init__(message)
        self.rule, self.offset, self.message, self.vaddr = rule, offset, message, vaddr


def read_elf(data):
    """Header and program headers; raise :class:`_Fail` (rule "elf")."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise _Fail("elf", 0, "not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise _Fail("elf", 4, "not a little-endian ELF64 file")
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    e_entry, e_phoff = struct.unpack_from("<QQ", data, 24)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    if e_machine != 62:
        raise _Fail("elf", 18, f"e_machine {e_machine} is not x86-64")
    if e_type != ET_EXEC:
        what = "position-independent (ET_DYN)" if e_type == ET_DYN else f"type {e_type}"
        raise _Fail("elf", 16, f"{what}: only static, fixed-address executables "
                               f"(ET_EXEC) are checked")
    if e_phentsize != 56 or e_phoff + e_phnum * 56 > len(data) or e_phnum == 0:
        raise _Fail("elf", 32, "bad program header table")
    return e_entry, _phdrs(data, e_phoff, e_phnum)


def _phdrs(data, e_phoff, e_phnum):
    """The program headers of an ELF64 file, as Phdr."""
    out = []
    for i in range(e_phnum):
        at = e_phoff + i * 56
        p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz = \
            struct.unpack_from("<IIQQQQQ", data, at)
        out.append(Phdr(i, p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz, at))
    return out


def read_elf_any(data):
    """(entry, program headers) of an ELF64 file of any type (for tests)."""
    e_entry, e_phoff = struct.unpack_from("<QQ", data, 24)
    e_phnum = struct.unpack_from("<H", data, 56)[0]
    return e_entry, _phdrs(data, e_phoff, e_phnum)


def _text_segment(phdrs, size):
    for p in phdrs:
        if p.type == PT_INTERP:
            raise _Fail("static", p.at, "PT_INTERP: dynamically linked (needs a loader "
                                        "whose code is not checked)")
        if p.type == PT_DYNAMIC:
            raise _Fail("static", p.at, "PT_DYNAMIC: dynamic relocations/libraries")
    for p in phdrs:
        if p.type == PT_GNU_STACK and p.flags & PF_X:
            raise _Fail("segments", p.at, "executable stack (PT_GNU_STACK has PF_X)")
    loads = [p for p in phdrs if p.type == PT_LOAD]
    for p in loads:
        if p.flags & PF_W and p.flags & PF_X:
            raise _Fail("segments", p.at, "a segment both writable and executable")
        if p.vaddr < G or p.vaddr + p.memsz > TOP or p.memsz < p.filesz:
            raise _Fail("segments", p.at, f"PT_LOAD [{p.vaddr:#x}, {p.vaddr + p.memsz:#x}) "
                                          f"outside [{G:#x}, {TOP:#x}) or memsz < filesz")
        if p.offset % PAGE != p.vaddr % PAGE or p.offset + p.filesz > size:
            raise _Fail("segments", p.at, "p_offset and p_vaddr disagree modulo the page "
                                          "size, or the segment runs past the file's end")
    text = [p for p in loads if p.flags & PF_X]
    if not text:
        raise _Fail("segments", phdrs[0].at, "no executable PT_LOAD segment")
    if len(text) > 1:
        raise _Fail("segments", text[1].at, "more than one executable PT_LOAD segment")
    t = text[0]
    if t.memsz != t.filesz:
        raise _Fail("segments", t.at, "the executable segment has memsz != filesz "
                                      "(zero-filled executable bytes are not checked)")
    lo, hi = _pd(t.vaddr), _pu(t.vaddr + t.filesz)
    for p in loads:
        if p is not t and _pd(p.vaddr) < hi and lo < _pu(p.vaddr + p.memsz):
            raise _Fail("segments", p.at, "another PT_LOAD shares a page with the text")
    if lo < G or hi > TEXT_LIMIT:
        raise _Fail("text-range", t.at, f"the text pages [{lo:#x}, {hi:#x}) are not "
                                        f"within [{G:#x}, {TEXT_LIMIT:#x})")
    return t


def check_file(path):
    """Check one file.  Raises :class:`InputError` if it cannot be read or
    objdump cannot run."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror or e}") from e
    try:
        entry, phdrs = read_elf(data)
        t = _text_segment(phdrs, len(data))
    except _Fail as f:
        return Result(path, False, f.rule, f.offset, f.vaddr, f.message)

    # The kernel maps whole pages: every byte of them is executable and is
    # checked, not only [p_offset, p_offset + p_filesz).  Past the end of
    # the file a fetch faults (SIGBUS), so the range stops there.
    off_lo = _pd(t.offset)
    off_hi = min(off_lo + (_pu(t.vaddr + t.filesz) - _pd(t.vaddr)), len(data))
    delta = _pd(t.vaddr) - off_lo
    try:
        # objdump prints only the bytes below --stop-address, also of an
        # instruction it decodes with bytes past it: decode 15 bytes more,
        # so that such an instruction shows its true end (and is refused as
        # truncated), and drop what starts past the range
        insns = [i for i in decode_file(path, off_lo, min(off_hi + 15, len(data)))
                 if i.offset < off_hi]
    except Exception as e:        # objdump missing or failed
        raise InputError(str(e)) from e
    return check_insns(path, insns, off_lo, off_hi, delta, entry, data)


def _direct_targets(insns):
    out = set()
    for i in insns:
        if (i.mnemonic in rules.JCC or i.mnemonic in ("jmp", "call")) \
                and len(i.operands) == 1 and isinstance(i.operands[0], Imm):
            out.add(i.operands[0].value)
    return out


def check_insns(path, insns, off_lo, off_hi, delta, entry=None, data=None):
    """The code rules over a decoded text ``[off_lo, off_hi)`` (file offsets,
    ``vaddr = offset + delta``; ``data``: the file's bytes, if at hand)."""
    def fail(rule, offset, message):
        return Result(path, False, rule, offset, offset + delta, message)

    def raw(insn):
        if data is None:
            return None
        return data[insn.offset:min(insn.offset + 16, off_hi)]

    # The first pass (instruction starts, direct targets) stops at the first
    # instruction off the allow-list: the walk refuses there at the latest,
    # and what comes after it is nobody's instruction stream (decoders may
    # read bytes off the list differently).  A jump past it is refused.
    stop = next((k for k, i in enumerate(insns) if not rules.allowed_encoding(i, raw(i))),
                len(insns))
    starts = {i.offset for i in insns[:stop + 1]}
    targets = _direct_targets(insns[:stop + 1])
    ctx = rules.Context(starts, off_lo, off_hi, delta,
                        insns[stop].offset if stop < len(insns) else None)
    if entry is not None:
        e = entry - delta
        if entry % BUNDLE or not (off_lo <= e < off_hi):
            return fail("entry", max(off_lo, min(e, off_hi - 1)) if off_hi > off_lo
                        else off_lo, f"entry point {entry:#x} is not a bundle start "
                                     f"of the text")
    state = dict(GAMMA0)
    expected = off_lo
    prev = None
    falls = False
    for insn in insns:
        if insn.offset != expected:
            return fail("decode", expected, "the decoder skipped or overlapped bytes")
        vaddr = insn.offset + delta
        n = len(insn.raw)
        if vaddr % BUNDLE == 0 or insn.offset in targets:
            if prev is not None and falls:
                try:
                    rules.require_isp(state, "where control falls into a bundle start "
                                             "or a branch target")
                except Violation as v:
                    return fail(v.rule, prev.offset, v.message)
            state = dict(GAMMA0)
        # a VEX/EVEX/XOP encoding is refused whatever its length, which the
        # decoders need not agree on; then truncation, then the rest of the
        # encoding checks, which run before the bundle rule for the same
        # reason
        enc = rules.vector_encoding(raw(insn) or insn.raw)
        if enc:
            return fail("instruction", insn.offset, f"`{insn.text}`: {enc.upper()}-"
                                                    f"encoded: not on the allow-list")
        if insn.end > off_hi:
            return fail("decode", insn.offset, "instruction truncated at the end of "
                                               "the executable range")
        try:
            rules.encoding_checks(insn, raw(insn))
        except Violation as v:
            return fail(v.rule, insn.offset, f"`{insn.text}`: {v.message}")
        if vaddr // BUNDLE != (vaddr + n - 1) // BUNDLE:
            return fail("bundle", insn.offset, f"`{insn.text}` ({n} bytes) crosses the "
                                               f"bundle boundary at "
                                               f"{(vaddr // BUNDLE + 1) * BUNDLE:#x}")
        try:
            out = rules.judge(insn, state, ctx)
        except Violation as v:
            return fail(v.rule, insn.offset, f"`{insn.text}`: {v.message}")
        except (ValueError, KeyError, IndexError, AttributeError, TypeError) as e:
            # an operand shape the rules do not know: refuse, never crash
            return fail("instruction", insn.offset, f"`{insn.text}`: unsupported "
                                                    f"operand form ({e})")
        falls = out.falls_through
        if not falls:
            state = dict(GAMMA0)
        prev = insn
        expected = insn.end
    if expected != off_hi:
        return fail("decode", expected, "the decoder stopped before the end of the text")
    if entry is not None and entry - delta not in starts:
        return fail("entry", entry - delta, "the entry point is not an instruction start")
    return Result(path, True, instructions=len(insns),
                  bundles=(off_hi - off_lo + BUNDLE - 1) // BUNDLE)
