"""The admission scan: disassemble what a program maps executable and flag
privileged or segment-altering instructions (see :mod:`kmlverify.policy`).

For every file the scan covers each ``PT_LOAD`` segment with ``PF_X``: the
segment's bytes in the file, decoded by a linear sweep that restarts at
every allocated section that begins inside the segment (section headers are
used only as resynchronisation points, never to skip bytes).  A program's
``PT_INTERP`` interpreter and its ``DT_NEEDED`` libraries, transitively,
are scanned too, each file once.

What a clean scan means, and what it does not, is in docs/verification.md:
a linear sweep sees one decoding of the bytes; a jump into the middle of
an instruction, code generated at run time, libraries loaded later with
``dlopen`` and data made executable with ``mprotect`` are not covered.
"""

import os
from collections import deque
from dataclasses import dataclass, field, replace

from . import disasm, elf, policy

#: Library directories searched after DT_RPATH/DT_RUNPATH, as by ld.so
#: on Debian x86-64 (without /etc/ld.so.cache).
DEFAULT_LIBRARY_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                        "/lib64", "/usr/lib64", "/lib", "/usr/lib")


class ScanError(Exception):
    """The scan could not be completed (I/O error, bad ELF, missing library)."""


@dataclass(frozen=True)
class Finding:
    """A flagged instruction."""

    offset: int          # file offset
    vaddr: int           # virtual address (as linked)
    raw: str             # instruction bytes, hex
    text: str            # objdump's AT&T disassembly
    mnemonic: str
    rule: policy.Rule
    symbol: str = None   # enclosing function, when the file has symbols

    @property
    def severity(self):
        """``error`` or ``warning`` (from the rule)."""
        return self.rule.severity


@dataclass
class FileReport:
    """The scan of one file."""

    path: str
    role: str                      # program, interpreter or library
    needed_by: str = None
    kind: str = ""
    ranges: list = field(default_factory=list)   # (offset, vaddr, size) swept
    segments: int = 0
    instructions: int = 0
    undecodable: int = 0
    findings: list = field(default_factory=list)

    def count(self, severity):
        """Number of findings of ``severity``."""
        return sum(1 for f in self.findings if f.severity == severity)

    def passed(self, strict=False):
        """True if no error (and, when ``strict``, no warning) was found."""
        bad = (policy.ERROR, policy.WARNING) if strict else (policy.ERROR,)
        return not any(f.severity in bad for f in self.findings)


def sweep_ranges(e):
    """The file ranges to disassemble: ``[(start, stop, segment)]``.

    Each executable segment's file image is split at the file offsets where
    allocated sections start, so that alignment padding between sections
    cannot desynchronise the sweep.
    """
    out = []
    for seg in e.executable_segments():
        lo, hi = seg.offset, seg.offset + seg.filesz
        cuts = {lo, hi}
        for s in e.sections:
            if s.flags & elf.SHF_ALLOC and s.type != elf.SHT_NOBITS and lo < s.offset < hi:
                cuts.add(s.offset)
        points = sorted(cuts)
        out.extend((a, b, seg) for a, b in zip(points, points[1:]))
    return out


def scan_elf(e, role="program", needed_by=None):
    """Scan the executable segments of a parsed ELF file."""
    report = FileReport(e.path, role, needed_by, e.kind,
                        segments=len(e.executable_segments()))
    split, classify, undecodable = policy.split_instruction, policy.classify, disasm.is_undecodable
    for start, stop, seg in sweep_ranges(e):
        report.ranges.append((start, seg.vaddr + (start - seg.offset), stop - start))
        for insn in disasm.disassemble(e.path, start, stop):
            report.instructions += 1
            text = insn.text
            if undecodable(text):
                report.undecodable += 1
                continue
            mnemonic, operands = split(text)
            rule = classify(mnemonic, operands)
            if rule is not None:
                vaddr = seg.vaddr + (insn.offset - seg.offset)
                report.findings.append(Finding(insn.offset, vaddr, insn.raw, text, mnemonic,
                                               rule, e.symbol_at(vaddr)))
    return report


def _load(path):
    """Parse ``path`` as ELF, turning every failure into :class:`ScanError`."""
    try:
        return elf.parse(path)
    except elf.ElfError as ex:
        raise ScanError(str(ex)) from ex
    except IsADirectoryError as ex:
        raise ScanError(f"{path}: is a directory") from ex
    except OSError as ex:
        raise ScanError(f"{path}: {ex.strerror or ex}") from ex


def resolve_in_root(root, path):
    """Resolve symlinks in ``path`` as if ``root`` were ``/`` (like chroot).

    Without a root this is :func:`os.path.realpath`.  With one, absolute
    link targets are taken relative to ``root`` and ``..`` cannot climb
    above it.
    """
    if root is None:
        return os.path.realpath(path)
    root = os.path.realpath(root)
    parts = [p for p in path.split("/") if p not in ("", ".")]
    resolved = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = os.path.join(root, *resolved, part)
        if os.path.islink(candidate):
            links += 1
            if links > 40:
                raise ScanError(f"{path}: too many levels of symbolic links under {root}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
        else:
            resolved.append(part)
    return os.path.join(root, *resolved)


def _is_x86_64_elf(path):
    try:
        with open(path, "rb") as f:
            elf.check_ident(f.read(20), path)
        return True
    except (OSError, elf.ElfError):
        return False


def library_dirs(e, root):
    """Directories searched for ``e``'s DT_NEEDED entries, in order.

    DT_RPATH (only when there is no DT_RUNPATH), then DT_RUNPATH, then
    :data:`DEFAULT_LIBRARY_DIRS`; ``$ORIGIN`` is the directory holding
    ``e``.  Entries with other dynamic-string tokens are skipped.
    Returned paths are as seen inside ``root``.
    """
    origin = os.path.dirname(os.path.realpath(e.path))
    if root is not None:
        origin = "/" + os.path.relpath(origin, os.path.realpath(root))
    dirs = []
    for d in (e.rpath if not e.runpath else []) + e.runpath:
        d = d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
        if "$" not in d:
            dirs.append(d)
    return dirs + list(DEFAULT_LIBRARY_DIRS)


def locate_library(name, e, root):
    """(path as the loader opens it, host path) of library ``name`` needed
    by ``e``, or raise :class:`ScanError`."""
    if "/" in name:
        candidates = [name]
    else:
        candidates = [os.path.join(d, name) for d in library_dirs(e, root)]
    for c in candidates:
        real = resolve_in_root(root, c)
        if os.path.isfile(real) and _is_x86_64_elf(real):
            return c, real
    where = f" under {root}" if root else ""
    raise ScanError(f"cannot find library {name} (needed by {e.path}){where}; searched "
                    + ", ".join(os.path.dirname(c) or "." for c in candidates))


def find_library(name, e, root):
    """Host path of library ``name`` needed by ``e``, or raise :class:`ScanError`."""
    return locate_library(name, e, root)[1]


@dataclass(frozen=True)
class Loaded:
    """A file a program needs to run: the program, its interpreter, a library."""

    elf: object          # the parsed file (elf.ElfFile)
    role: str            # program, interpreter or library
    needed_by: str       # the file that needs it (None for a program)
    name: str            # the path the kernel or loader opens (PT_INTERP, a search hit)
    path: str            # where it is on this machine


def walk(paths, follow_libs=True, root=None):
    """The programs in ``paths`` and (unless ``follow_libs`` is false) what
    they load, statically: ``PT_INTERP`` and ``DT_NEEDED``, transitively,
    searched like ld.so without a cache (:func:`library_dirs`).  Yields a
    :class:`Loaded` for each file, once; raises :class:`ScanError` for a
    file that is missing or not x86-64 ELF."""
    seen = set()
    queue = deque(Loaded(None, "program", None, p, p) for p in paths)
    while queue:
        item = queue.popleft()
        key = os.path.realpath(item.path)
        if key in seen:
            continue
        seen.add(key)
        e = _load(item.path)
        yield replace(item, elf=e)
        if not follow_libs:
            continue
        if e.interp:
            interp = resolve_in_root(root, e.interp)
            if not os.path.isfile(interp):
                where = f" under {root}" if root else ""
                raise ScanError(f"cannot find the interpreter {e.interp} "
                                f"(PT_INTERP of {e.path}){where}")
            queue.append(Loaded(None, "interpreter", e.path, e.interp, interp))
        for name in e.needed:
            queue.append(Loaded(None, "library", e.path, *locate_library(name, e, root)))


def scan(paths, follow_libs=True, root=None, cache=None):
    """Scan programs and (unless ``follow_libs`` is false) what they load.

    Returns the list of :class:`FileReport` s: the named files in the order
    given, then the interpreters and libraries, each file once.  ``cache``,
    a dict, keeps disassembly results by (real path, size, mtime) across
    calls.  Raises :class:`ScanError` or :class:`disasm.DisassemblerError`.
    """
    reports = []
    for item in walk(paths, follow_libs, root):
        e, stamp = item.elf, None
        if cache is not None:
            st = os.stat(os.path.realpath(item.path))
            stamp = (os.path.realpath(item.path), st.st_size, st.st_mtime_ns)
        if stamp in (cache or {}):
            report = replace(cache[stamp], role=item.role, needed_by=item.needed_by)
        else:
            report = scan_elf(e, item.role, item.needed_by)
            if cache is not None:
                cache[stamp] = report
        reports.append(report)
    return reports
