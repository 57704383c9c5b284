"""A small reader for x86-64 ELF64 files: what the scanner needs and no more.

It reads the ELF header, the program headers (``PT_LOAD`` segments and
their flags, ``PT_INTERP``, ``PT_DYNAMIC``), the dynamic section
(``DT_NEEDED``, ``DT_RUNPATH``, ``DT_RPATH``), and -- when present -- the
section headers and symbol tables, which are used only to restart the
linear-sweep disassembly at section starts and to name the function a
finding is in.  Everything is bounds-checked; a malformed file raises
:class:`ElfError` with a message that says what is wrong.
"""

import struct
from dataclasses import dataclass, field

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
PF_X = 1
SHT_SYMTAB, SHT_NOBITS, SHT_DYNSYM = 2, 8, 11
SHF_ALLOC = 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 15, 29
ET_EXEC, ET_DYN = 2, 3
EM_X86_64 = 62
STT_FUNC = 2


class ElfError(Exception):
    """The file is not an ELF64 x86-64 file this reader can handle."""


@dataclass(frozen=True)
class Segment:
    """One program header."""

    type: int
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int

    @property
    def executable(self):
        """True for a loadable segment mapped with execute permission."""
        return self.type == PT_LOAD and bool(self.flags & PF_X)


@dataclass(frozen=True)
class Section:
    """One section header (name resolved)."""

    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int


@dataclass
class ElfFile:
    """The parts of an ELF file the scanner uses."""

    path: str
    size: int
    type: int
    segments: list
    sections: list
    interp: str = None
    needed: list = field(default_factory=list)
    runpath: list = field(default_factory=list)
    rpath: list = field(default_factory=list)
    symbols: list = field(default_factory=list)  # sorted (vaddr, size, name)

    @property
    def kind(self):
        """A short description: executable / shared object, static or dynamic."""
        if self.type == ET_EXEC:
            what = "executable"
        elif self.interp:
            what = "position-independent executable"
        else:
            what = "shared object"
        link = "dynamically linked" if (self.interp or self.needed) else "statically linked"
        return f"x86-64 ELF {what}, {link}"

    def executable_segments(self):
        """The ``PT_LOAD`` segments with ``PF_X``."""
        return [s for s in self.segments if s.executable]

    def vaddr_to_offset(self, vaddr):
        """File offset of a virtual address inside a loaded segment's file image."""
        for s in self.segments:
            if s.type == PT_LOAD and s.vaddr <= vaddr < s.vaddr + s.filesz:
                return s.offset + (vaddr - s.vaddr)
        return None

    def symbol_at(self, vaddr):
        """``name+0xoff`` of the function symbol containing ``vaddr``, or ``None``.

        A symbol of size 0 (common for hand-written assembly) is taken to
        extend to the next symbol.
        """
        best = None
        for start, size, name in self.symbols:
            if start > vaddr:
                break
            if size == 0 or vaddr < start + size:
                best = (start, name, size)
            elif best is not None and best[2] == 0:
                best = None            # a later symbol ends the size-0 one
        if best is None:
            return None
        start, name, _ = best
        return f"{name}+0x{vaddr - start:x}" if vaddr != start else name


class _Reader:
    """Bounds-checked little-endian reads from the file's bytes."""

    def __init__(self, data, path):
        self.data = data
        self.path = path

    def unpack(self, fmt, offset, what):
        size = struct.calcsize(fmt)
        if offset < 0 or offset + size > len(self.data):
            raise ElfError(f"{self.path}: truncated ELF file ({what} at offset {offset:#x} "
                           f"lies beyond the end of the {len(self.data)}-byte file)")
        return struct.unpack_from(fmt, self.data, offset)

    def cstring(self, offset, limit, what):
        if offset < 0 or offset >= len(self.data):
            raise ElfError(f"{self.path}: {what} at offset {offset:#x} lies outside the file")
        end = self.data.find(b"\0", offset, min(limit, len(self.data)))
        if end < 0:
            raise ElfError(f"{self.path}: unterminated string for {what} at offset {offset:#x}")
        return self.data[offset:end].decode("utf-8", "replace")


def check_ident(data, path):
    """Raise :class:`ElfError` unless ``data`` starts like an ELF64 x86-64 file."""
    if len(data) < 4 or data[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if len(data) < 20:
        raise ElfError(f"{path}: truncated ELF file ({len(data)} bytes)")
    if data[4] == 1:
        raise ElfError(f"{path}: 32-bit ELF file; only x86-64 ELF64 programs are supported")
    if data[4] != 2:
        raise ElfError(f"{path}: unknown ELF class {data[4]}")
    if data[5] != 1:
        raise ElfError(f"{path}: big-endian ELF file; only x86-64 is supported")
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != EM_X86_64:
        raise ElfError(f"{path}: ELF file for machine {machine}, not x86-64 ({EM_X86_64})")


def parse(path):
    """Read and parse ``path``; raise :class:`ElfError` or :class:`OSError`."""
    with open(path, "rb") as f:
        data = f.read()
    return parse_bytes(data, path)


def parse_bytes(data, path="<bytes>"):
    """Parse an ELF64 x86-64 image held in memory."""
    check_ident(data, path)
    r = _Reader(data, path)
    (e_type, _machine, _version, _entry, e_phoff, e_shoff, _flags, _ehsize,
     e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx) = r.unpack(
        "<HHIQQQIHHHHHH", 16, "ELF header")
    if e_type not in (ET_EXEC, ET_DYN):
        raise ElfError(f"{path}: ELF type {e_type} is neither an executable nor a shared object")
    if e_phnum and e_phentsize < 56:
        raise ElfError(f"{path}: bad program header size {e_phentsize}")
    segments = []
    for i in range(e_phnum):
        p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz, p_memsz, _align = r.unpack(
            "<IIQQQQQQ", e_phoff + i * e_phentsize, f"program header {i}")
        if p_type == PT_LOAD and p_offset + p_filesz > len(data):
            raise ElfError(f"{path}: segment {i} extends beyond the end of the file")
        segments.append(Segment(p_type, p_flags, p_offset, p_vaddr, p_filesz, p_memsz))
    elf = ElfFile(path, len(data), e_type, segments, _sections(r, e_shoff, e_shentsize,
                                                                 e_shnum, e_shstrndx))
    for s in segments:
        if s.type == PT_INTERP:
            elf.interp = r.cstring(s.offset, s.offset + s.filesz, "PT_INTERP")
        elif s.type == PT_DYNAMIC:
            _dynamic(r, elf, s)
    elf.symbols = _symbols(r, elf.sections)
    return elf


def _sections(r, shoff, shentsize, shnum, shstrndx):
    """Section headers, or ``[]`` when the file has none (or unusable ones)."""
    if shoff == 0 or shnum == 0 or shentsize < 64:
        return []
    raw = [r.unpack("<IIQQQQIIQQ", shoff + i * shentsize, f"section header {i}")
           for i in range(shnum)]
    names_off = raw[shstrndx][4] if shstrndx < shnum else None
    sections = []
    for sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, *_ in raw:
        name = ""
        if names_off is not None:
            name = r.cstring(names_off + sh_name, len(r.data), "section name")
        sections.append(Section(name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link))
    return sections


def _dynamic(r, elf, seg):
    """Fill ``needed``/``runpath``/``rpath`` from the dynamic section."""
    entries = []
    for off in range(seg.offset, seg.offset + seg.filesz - 15, 16):
        tag, val = r.unpack("<qQ", off, "dynamic entry")
        if tag == DT_NULL:
            break
        entries.append((tag, val))
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    strsz = next((v for t, v in entries if t == DT_STRSZ), 0)
    if strtab is None:
        return
    base = elf.vaddr_to_offset(strtab)
    if base is None:
        raise ElfError(f"{elf.path}: DT_STRTAB {strtab:#x} is not inside a loaded segment")
    for tag, val in entries:
        if tag in (DT_NEEDED, DT_RUNPATH, DT_RPATH):
            s = r.cstring(base + val, base + strsz, "dynamic string")
            if tag == DT_NEEDED:
                elf.needed.append(s)
            elif tag == DT_RUNPATH:
                elf.runpath.extend(p for p in s.split(":") if p)
            else:
                elf.rpath.extend(p for p in s.split(":") if p)


def _symbols(r, sections):
    """Function symbols from ``.symtab`` (else ``.dynsym``), sorted by address."""
    tables = [s for s in sections if s.type == SHT_SYMTAB] or \
             [s for s in sections if s.type == SHT_DYNSYM]
    out = []
    for tab in tables:
        if tab.link >= len(sections):
            continue
        strtab = sections[tab.link]  # sh_link of a symbol table: its string table
        for off in range(tab.offset, tab.offset + tab.size - 23, 24):
            st_name, st_info, _other, st_shndx, st_value, st_size = r.unpack(
                "<IBBHQQ", off, "symbol")
            if st_info & 0xF == STT_FUNC and st_shndx != 0 and st_name:
                name = r.cstring(strtab.offset + st_name, strtab.offset + strtab.size,
                                 "symbol name")
                out.append((st_value, st_size, name))
    out.sort()
    return out
