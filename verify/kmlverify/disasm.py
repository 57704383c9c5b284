"""Linear-sweep disassembly of file ranges with GNU objdump.

The raw bytes of a range of the file are decoded as x86-64 code with
``objdump -D -b binary -m i386:x86-64``: the scanner looks at exactly the
bytes the loader maps executable, whatever the section headers claim.
Addresses in objdump's output are therefore file offsets.
"""

import shutil
import subprocess
from typing import NamedTuple


class DisassemblerError(Exception):
    """objdump is missing or failed."""


class Instruction(NamedTuple):
    """One decoded instruction: file offset, raw bytes (hex) and AT&T text."""

    offset: int
    raw: str
    text: str


def objdump_path():
    """The objdump executable, or raise :class:`DisassemblerError`."""
    path = shutil.which("objdump")
    if path is None:
        raise DisassemblerError("objdump not found (install binutils)")
    return path


def disassemble(path, start, stop):
    """Decode file bytes ``[start, stop)`` of ``path``; yield :class:`Instruction` s.

    objdump's output is streamed, not kept.  Undecodable bytes appear as
    instructions whose text is ``(bad)`` or ``.byte 0x..`` (for example a
    truncated instruction at the end of the range).
    """
    if stop <= start:
        return
    cmd = [objdump_path(), "-D", "-b", "binary", "-m", "i386:x86-64", "-w", "-z",
           f"--start-address={start:#x}", f"--stop-address={stop:#x}", path]
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace")
    except OSError as e:
        raise DisassemblerError(f"cannot run objdump: {e}") from e
    with proc:
        yield from parse_objdump(proc.stdout)
        err = proc.stderr.read()
    if proc.returncode != 0:
        raise DisassemblerError(f"objdump failed on {path}: {err.strip()}")


def parse_objdump(lines):
    """Parse ``objdump -w`` disassembly lines into :class:`Instruction` objects.

    An instruction line is ``OFFSET:<TAB>BYTES<TAB>TEXT`` (``TEXT`` may be
    missing after a lone prefix byte); header lines, blank lines and
    ``ADDRESS <symbol>:`` lines have no tab and are skipped.
    """
    for line in lines:
        parts = line.split("\t", 2)
        if len(parts) < 2 or not parts[0].endswith(":"):
            continue
        try:
            offset = int(parts[0][:-1], 16)
        except ValueError:
            continue
        text = parts[2].strip() if len(parts) == 3 else ""
        yield Instruction(offset, parts[1].strip(), text or "(bad)")


def is_undecodable(text):
    """True for objdump's markers of bytes it could not decode."""
    return text[0] == "(" or text.startswith(".byte")
