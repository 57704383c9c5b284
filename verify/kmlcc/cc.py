"""kmlcc: compile C into a program that the rules of verified programs
accept (docs/verification.md, "Verified programs: the rules").

    python3 -m kmlcc [-o OUT] [-O LEVEL] [-I DIR] [-D NAME[=V]] FILE.c...

Each C file is compiled by the system's gcc to assembly for the x86-64
baseline with nolibc (the kernel tree's tools/include/nolibc) as its C
library, rewritten (rewrite.py), assembled with 32-byte bundles and
linked with crt0.s, statically, at the default address; the text's last
page is padded with NOPs; the result is checked with the reference
checker (kmltal.x86), whose verdict is the exit status.
"""

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from kmltal.x86 import check_file

from . import rewrite

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# what gcc must not emit: VEX encodings (the x86-64 baseline has none),
# jump tables (targets that are not bundle starts), CET's endbr64 and
# notrack, stack-protector TLS loads, frame pointers' leave; %r11 is the
# rewriter's
GCC_FLAGS = ["-march=x86-64", "-mtune=generic", "-fno-pic", "-fno-pie",
             "-fno-jump-tables", "-fcf-protection=none", "-fno-stack-protector",
             "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables",
             "-fno-unwind-tables", "-ffixed-r11", "-falign-functions=32",
             "-fno-builtin", "-ffreestanding", "-nostdlib", "-static"]


class CcError(Exception):
    pass


def nolibc_dir():
    """tools/include/nolibc of the kernel tree ./kml builds, or $KMLCC_NOLIBC."""
    env = os.environ.get("KMLCC_NOLIBC")
    d = Path(env) if env else ROOT / "build" / "linux" / "tools" / "include" / "nolibc"
    if not (d / "nolibc.h").is_file():
        raise CcError(f"nolibc not found in {d} (run ./kml build, or set KMLCC_NOLIBC)")
    return d


def _run(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise CcError(f"{what} failed:\n{p.stderr.strip()}")
    return p


def text_tail(path):
    """Bytes from the end of the executable segment to its page end."""
    data = Path(path).read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        at = phoff + i * phentsize
        ptype, flags = struct.unpack_from("<II", data, at)
        vaddr, filesz = struct.unpack_from("<Q", data, at + 16)[0], \
            struct.unpack_from("<Q", data, at + 32)[0]
        if ptype == 1 and flags & 1:
            return -(vaddr + filesz) % 4096
    raise CcError("no executable segment")


def compile_program(sources, out, opt="2", extra=(), keep=None):
    """Build ``out`` from C ``sources``; returns the reference checker's
    Result (kmltal.x86.check_file)."""
    for tool in ("gcc", "as", "ld"):
        if shutil.which(tool) is None:
            raise CcError(f"{tool} is not installed")
    libc = nolibc_dir()
    with tempfile.TemporaryDirectory(prefix="kmlcc-") as tmp:
        work = Path(keep) if keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        objs = [work / "crt0.o"]
        _run(["as", "-o", str(objs[0]), str(HERE / "crt0.s")], "as crt0.s")
        for src in sources:
            stem = Path(src).stem
            s, rw, o = work / f"{stem}.s", work / f"{stem}.kml.s", work / f"{stem}.o"
            _run(["gcc", "-S", f"-O{opt}", *GCC_FLAGS, "-I", str(libc), *extra,
                  "-include", str(HERE / "kmlcc.h"), "-o", str(s), str(src)], f"gcc {src}")
            try:
                rw.write_text(rewrite.rewrite(s.read_text()))
            except rewrite.RewriteError as e:
                raise CcError(f"{src}: {e}") from e
            _run(["as", "-o", str(o), str(rw)], f"as {rw.name}")
            objs.append(o)
        ld = ["ld", "-static", "-nostdlib", "-z", "noexecstack", "-z", "separate-code",
              "-o", str(out)]
        _run(ld + [str(o) for o in objs], "ld")
        # link again with NOPs to the text's page end as its last input: the
        # kernel maps the whole last page executable, and every byte of it
        # is checked
        pad = work / "pad.s"
        pad.write_text(f"\t.text\n\t.fill {text_tail(out)}, 1, 0x90\n"
                       f"\t.section .note.GNU-stack,\"\",@progbits\n")
        _run(["as", "-o", str(work / "pad.o"), str(pad)], "as pad.s")
        _run(ld + [str(o) for o in objs] + [str(work / "pad.o")], "ld")
        if text_tail(out):
            raise CcError("the text does not end at a page end after padding")
    return check_file(str(out))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="kmlcc", description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+", metavar="FILE.c")
    ap.add_argument("-o", dest="out", default="a.out")
    ap.add_argument("-O", dest="opt", default="2", help="gcc's optimization level (default 2)")
    ap.add_argument("-I", dest="incs", action="append", default=[])
    ap.add_argument("-D", dest="defs", action="append", default=[])
    ap.add_argument("--keep", metavar="DIR", help="keep the intermediate files in DIR")
    a = ap.parse_args(argv)
    extra = [f"-I{d}" for d in a.incs] + [f"-D{d}" for d in a.defs]
    try:
        r = compile_program(a.sources, a.out, a.opt, extra, a.keep)
    except CcError as e:
        print(f"kmlcc: {e}", file=sys.stderr)
        return 2
    print(r.line())
    return 0 if r.ok else 1
