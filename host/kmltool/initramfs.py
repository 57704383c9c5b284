"""The guest image: busybox-static, the project's guest programs, /trusted.

What the image holds from guest/ is what `make -C guest install` puts in a
staging tree (paths.GUEST_ROOT): guest/Makefile is the one list.  This
module adds the skeleton (directories, device nodes, busybox, /etc), copies
the staging tree as it is, and adds the interpreter and libraries of each
dynamically linked program (resolved statically from PT_INTERP and
DT_NEEDED by kmlverify, like --add).  base.cpio is rebuilt when any input
changes; each VM run appends a small overlay archive (the command, files
from --add) to a copy of it.
"""
import os
import shlex
import shutil
import stat
from pathlib import Path

from kmlverify import mark, scanner

from . import paths
from .cpio import Archive
from .paths import KmlError
from .util import digest, run, say

BUSYBOX = "/bin/busybox"
PASSWD = ("root:x:0:0:root:/root:/bin/sh\n"
          "kmluser:x:1000:1000:kml test user:/tmp:/bin/sh\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
GROUP = "root:x:0:\nkmluser:x:1000:\nnogroup:x:65534:\n"
# Programs whose admission-scanner mark the image carries: cpio cannot carry
# trusted.* xattrs, so the guest tests set it from usr/lib/kml/marks/NAME.
MARKED = ("usr/lib/kml/kml-probe",)


def build_guest_programs():
    """make all, then make install into a fresh staging tree."""
    tree = paths.TREE
    ksft = tree / "tools" / "testing" / "selftests"
    if not (ksft / "kselftest_harness.h").exists():
        raise KmlError(f"{ksft}/kselftest_harness.h missing: run ./kml patches apply")
    say("building guest programs")
    make = ["make", "-s", "-C", str(paths.GUEST_SRC), f"O={paths.GUEST_OUT}", f"KSFT={ksft}"]
    run([*make, f"-j{(os.cpu_count() or 1) + 1}"])
    shutil.rmtree(paths.GUEST_ROOT, ignore_errors=True)
    run([*make, "install", f"DESTDIR={paths.GUEST_ROOT}"])


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


def add_tree(arc, root):
    """Everything under root (a staging tree) at the same place in arc:
    directories, files with their modes (owned by root), symbolic links;
    the libraries of dynamically linked programs."""
    for d, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(d, root)
        for name in dirs + sorted(files):
            p = Path(d) / name
            guest = name if rel == "." else f"{rel}/{name}"
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                arc.symlink(guest, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                if guest not in arc:
                    arc.dir(guest, mode=st.st_mode & 0o7777)
            elif stat.S_ISREG(st.st_mode):
                arc.file(guest, p.read_bytes(), mode=st.st_mode & 0o7777)
                add_libs(arc, p)


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


def base_archive(root=None):
    """The skeleton, then the staging tree root (default paths.GUEST_ROOT)."""
    root = Path(root or paths.GUEST_ROOT)
    arc = Archive()
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys",
              "dev", "run", "var", "root", "kml", "usr/lib/kml/tests"):
        arc.dir(d, mode=0o700 if d == "root" else 0o755)
    arc.dir("tmp", mode=0o1777)
    # Kernel-mode programs run from here: owned by root, not writable by
    # anyone else.
    arc.dir("trusted", mode=0o755)
    arc.chardev("dev/console", 5, 1)
    arc.chardev("dev/null", 1, 3, mode=0o666)
    _busybox(arc)
    arc.file("etc/passwd", PASSWD.encode())
    arc.file("etc/group", GROUP.encode())
    arc.file("etc/hosts", b"127.0.0.1 localhost kml\n")
    add_tree(arc, root)
    for rel in MARKED:
        name = rel.rsplit("/", 1)[-1]
        arc.file(f"usr/lib/kml/marks/{name}", verification_mark(root / rel) + b"\n")
    return arc


def inputs_digest(root=None):
    """A digest of everything base.cpio is made of (names, modes, sizes and
    times of the staging tree, busybox, this code and the scanner's)."""
    root = Path(root or paths.GUEST_ROOT)
    parts = []
    for p in sorted(root.rglob("*")):
        st, what = p.lstat(), ""
        if stat.S_ISLNK(st.st_mode):
            what = f" -> {os.readlink(p)}"
        elif stat.S_ISREG(st.st_mode):      # (a directory's time changes each install)
            what = f" {st.st_size} {st.st_mtime_ns}"
        parts.append(f"{p.relative_to(root)} {st.st_mode:o}{what}")
    for p in [Path(BUSYBOX), Path(__file__), *sorted(Path(mark.__file__).parent.glob("*.py"))]:
        st = p.stat() if p.exists() else None
        parts.append(f"{p} {st.st_size} {st.st_mtime_ns}" if st else f"{p} missing")
    return digest(*parts)


def build_initramfs():
    build_guest_programs()
    stamp = paths.INITRAMFS.with_suffix(".digest")
    want = inputs_digest()
    if (paths.INITRAMFS.exists() and stamp.exists()
            and stamp.read_text().strip() == want):
        return paths.INITRAMFS
    say("building initramfs")
    paths.INITRAMFS.parent.mkdir(parents=True, exist_ok=True)
    tmp = paths.INITRAMFS.with_suffix(".tmp")
    tmp.write_bytes(base_archive().to_bytes())
    tmp.rename(paths.INITRAMFS)
    stamp.write_text(want + "\n")
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
