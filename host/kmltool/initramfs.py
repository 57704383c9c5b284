"""The guest image: busybox-static, the project's guest programs, /trusted.

base.cpio is rebuilt when any input changes; each VM run appends a small
overlay archive (the command, files from --add) to a copy of it.
"""
import os
import shlex
import shutil
from pathlib import Path

from kmlverify import mark, scanner

from . import paths
from .cpio import Archive
from .paths import KmlError
from .util import run, say

BUSYBOX = "/bin/busybox"
PASSWD = ("root:x:0:0:root:/root:/bin/sh\n"
          "kmluser:x:1000:1000:kml test user:/tmp:/bin/sh\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
GROUP = "root:x:0:\nkmluser:x:1000:\nnogroup:x:65534:\n"


def build_guest_programs():
    tree = paths.TREE
    ksft = tree / "tools" / "testing" / "selftests"
    if not (ksft / "kselftest_harness.h").exists():
        raise KmlError(f"{ksft}/kselftest_harness.h missing: run ./kml patches apply")
    say("building guest programs")
    run(["make", "-s", "-C", str(paths.GUEST_SRC), f"O={paths.GUEST_OUT}",
         f"KSFT={ksft}", f"-j{(os.cpu_count() or 1) + 1}"])


def shared_libs(path):
    """[(guest path, host path)] of the interpreter and the shared libraries
    an ELF program needs, transitively ([] for a static program or a file
    that is not ELF): PT_INTERP and DT_NEEDED, searched like ld.so."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return []
    try:
        return [(x.name, x.path) for x in scanner.walk([str(path)]) if x.role != "program"]
    except scanner.ScanError as e:
        raise KmlError(f"{path}: needs a file that is missing here: {e}") from None


def add_libs(arc, host):
    """The interpreter and libraries host needs, into arc (once each)."""
    for guest, lib in shared_libs(host):
        if guest not in arc:
            arc.file(guest, Path(lib).read_bytes(), mode=0o755)


def add_host_file(arc, host, guest, mode=None):
    """Copy a host file (and, for ELF programs, its libraries) into arc."""
    host = Path(host)
    if not host.is_file():
        raise KmlError(f"--add {host}: no such file")
    st = host.stat()
    arc.file(guest, host.read_bytes(), mode=mode if mode is not None else st.st_mode & 0o7777)
    add_libs(arc, host)


def _busybox(arc):
    if not os.path.exists(BUSYBOX):
        raise KmlError(f"{BUSYBOX} missing: run ./kml setup (installs busybox-static)")
    if shared_libs(BUSYBOX):
        raise KmlError(f"{BUSYBOX} is dynamically linked: install busybox-static")
    arc.file("bin/busybox", Path(BUSYBOX).read_bytes(), mode=0o755)
    applets = run([BUSYBOX, "--list-full"], capture=True).stdout.split()
    for a in applets:
        if a != "bin/busybox" and a not in arc:
            arc.symlink(a, "/bin/busybox")


def verification_mark(path):
    """The trusted.kml.verified value for a clean scan of path (./kml verify)."""
    reports = scanner.scan([str(path)], follow_libs=False)
    if not all(r.passed() for r in reports):
        raise KmlError(f"{path}: the admission scan flags it (./kml verify {path})")
    return mark.mark_value(mark.file_sha256(path)).encode()


def base_archive():
    arc = Archive()
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys",
              "dev", "run", "var", "root", "kml", "usr/lib/kml/tests"):
        arc.dir(d, mode=0o700 if d == "root" else 0o755)
    arc.dir("tmp", mode=0o1777)
    # Later issues run programs from here in kernel mode: owned by root, not
    # writable by anyone else.
    arc.dir("trusted", mode=0o755)
    arc.chardev("dev/console", 5, 1)
    arc.chardev("dev/null", 1, 3, mode=0o666)
    _busybox(arc)
    arc.file("init", (paths.GUEST_SRC / "init").read_bytes(), mode=0o755)
    arc.file("usr/bin/run-tests", (paths.GUEST_SRC / "run-tests").read_bytes(), mode=0o755)
    arc.file("usr/bin/kml-modes", (paths.GUEST_SRC / "kml-modes").read_bytes(), mode=0o755)
    arc.file("etc/passwd", PASSWD.encode())
    arc.file("etc/group", GROUP.encode())
    arc.file("etc/hosts", b"127.0.0.1 localhost kml\n")
    out = paths.GUEST_OUT
    for t in sorted((out / "tests").iterdir()):
        arc.file(f"usr/lib/kml/tests/{t.name}", t.read_bytes(), mode=0o755)
    arc.file("usr/bin/kml-bench", (out / "kml-bench").read_bytes(), mode=0o755)
    # UnixBench-style system tests, kernel-stack memory (./kml kstack-bench)
    arc.file("usr/bin/kml-ubench", (out / "kml-ubench").read_bytes(), mode=0o755)
    # the file I/O benchmark (./kml bench copies it into /trusted)
    arc.file("usr/lib/kml/kml-iobench", (out / "kml-iobench").read_bytes(), mode=0o755)
    arc.symlink("usr/bin/kml-iobench", "/usr/lib/kml/kml-iobench")
    arc.file("usr/lib/kml/hello", (out / "hello").read_bytes(), mode=0o755)
    add_host_file(arc, out / "kml-hello-dyn", "usr/bin/kml-hello-dyn", mode=0o755)
    arc.file("usr/lib/kml/kml-probe", (out / "kml-probe").read_bytes(), mode=0o755)
    arc.symlink("usr/bin/kml-probe", "/usr/lib/kml/kml-probe")
    # The admission scanner's verification mark for kml-probe: cpio cannot
    # carry trusted.* xattrs, so the guest tests set it from this file.
    arc.file("usr/lib/kml/marks/kml-probe", verification_mark(out / "kml-probe") + b"\n")
    add_host_file(arc, out / "kml-probe-dyn", "usr/lib/kml/kml-probe-dyn", mode=0o755)
    arc.file("usr/lib/kml/kml-preload.so", (out / "kml-preload.so").read_bytes(), mode=0o755)
    # static, nolibc, every system call through libkml (libkml.a itself is
    # only linked, never installed)
    arc.file("usr/lib/kml/kml-callpath-demo", (out / "kml-callpath-demo").read_bytes(),
             mode=0o755)
    arc.symlink("usr/bin/kml-callpath-demo", "/usr/lib/kml/kml-callpath-demo")
    # The kernel library's programs run in kernel mode: in /trusted, root-owned,
    # 0755.  A copy in /usr/lib/kml runs in user mode (their refusal is tested).
    for prog in ("kml-ps", "kml-udp"):
        data = (out / prog).read_bytes()
        arc.file(f"trusted/{prog}", data, mode=0o755)
        arc.file(f"usr/lib/kml/{prog}", data, mode=0o755)
    return arc


def inputs_newer_than(target):
    if not target.exists():
        return True
    t = target.stat().st_mtime
    srcs = [paths.GUEST_SRC / "init", paths.GUEST_SRC / "run-tests",
            paths.GUEST_SRC / "kml-modes", Path(BUSYBOX),
            Path(__file__)]
    srcs += [p for p in paths.GUEST_OUT.rglob("*") if p.is_file()]
    srcs += list((paths.ROOT / "verify" / "kmlverify").glob("*.py"))   # the marks
    return any(p.stat().st_mtime > t for p in srcs if p.exists())


def build_initramfs():
    build_guest_programs()
    if not inputs_newer_than(paths.INITRAMFS):
        return paths.INITRAMFS
    say("building initramfs")
    paths.INITRAMFS.parent.mkdir(parents=True, exist_ok=True)
    tmp = paths.INITRAMFS.with_suffix(".tmp")
    tmp.write_bytes(base_archive().to_bytes())
    tmp.rename(paths.INITRAMFS)
    say(f"initramfs: {paths.INITRAMFS} ({paths.INITRAMFS.stat().st_size // 1024} KiB)")
    return paths.INITRAMFS


def parse_add(spec):
    """--add HOST[:GUEST] -> (host, guest); GUEST defaults to /root/<name>."""
    host, sep, guest = spec.partition(":")
    if not host:
        raise KmlError(f"--add {spec!r}: empty host path")
    if not sep or not guest:
        guest = "/root/" + os.path.basename(host)
    elif guest.endswith("/"):
        guest += os.path.basename(host)
    if not guest.startswith("/"):
        raise KmlError(f"--add {spec!r}: guest path must be absolute")
    return host, guest


def run_archive(dest, argv, adds=(), env=None):
    """base.cpio + an overlay with /kml/cmd and the added files, written to dest."""
    arc = Archive()
    for spec in adds:
        host, guest = parse_add(spec)
        add_host_file(arc, host, guest)
    lines = [f"export {k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    lines.append("exec " + " ".join(shlex.quote(a) for a in argv))
    arc.file("kml/cmd", ("\n".join(lines) + "\n").encode())
    with open(dest, "wb") as f:
        with open(paths.INITRAMFS, "rb") as base:
            shutil.copyfileobj(base, f)
        f.write(arc.to_bytes())
    return dest
