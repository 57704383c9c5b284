"""Boot the kml kernel in QEMU, run one command, report its exit status.

Serial ports: ttyS0 = kernel console (to console.log), ttyS1 = the
command's stdout/stderr (streamed to the caller), ttyS2 = control channel
(the guest init writes "KML-EXIT <status>").  Every boot has a timeout.
"""
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import console, initramfs, paths
from .paths import KmlError
from .util import say

QEMU = "qemu-system-x86_64"
KVM_PROBE = paths.BUILD / "kvm-probe.json"
KVM_PROBE_TIMEOUT = 20
KEEP_RUNS = 30
EXIT_TIMEOUT = 124          # like timeout(1)
EXIT_VM_FAILURE = 125       # console problems, no exit status, QEMU error
# Signals that mean QEMU itself crashed (not a kill of ours or the user's)
QEMU_CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGABRT,
                      signal.SIGFPE)


class Result:
    def __init__(self, rundir):
        self.rundir = rundir
        self.console_log = rundir / "console.log"
        self.output_log = rundir / "output.log"
        self.status = None          # the command's exit status, if reported
        self.timed_out = False
        self.problems = []          # console problem lines
        self.qemu_error = ""
        self.output = b""
        self.hook_error = None      # what the gdb hook raised (it ended the VM)
        self.started = None         # time.monotonic() when QEMU started
        self.qemu_crash = None      # the signal QEMU itself died of, if it crashed
        self.crashed_before = []    # earlier boots of this run whose QEMU crashed

    @property
    def ok(self):
        return (self.status is not None and not self.timed_out and not self.problems
                and not self.hook_error)

    def exit_code(self):
        if self.timed_out:
            return EXIT_TIMEOUT
        if self.problems or self.status is None or self.hook_error:
            return EXIT_VM_FAILURE
        return self.status

    def verdict(self):
        """A message for the user when the run failed for a VM reason, else None."""
        if self.timed_out:
            msg = "timeout: the VM did not finish in time"
        elif self.hook_error:
            msg = f"the gdb hook failed (the VM was stopped): {self.hook_error}"
        elif self.qemu_crash:
            msg = (f"QEMU itself crashed ({signal.Signals(self.qemu_crash).name}; the"
                   f" host's dmesg names the fault): a QEMU bug, not the guest's")
        elif self.problems:
            lines = "\n".join(f"  {n}: {line}" for _, n, line in self.problems[:20])
            more = len(self.problems) - 20
            msg = (f"the kernel console shows {len(self.problems)} problem line(s)"
                   f" ({', '.join(sorted({k for k, _, _ in self.problems}))}):\n{lines}"
                   + (f"\n  ... and {more} more" if more > 0 else ""))
        elif self.status is None:
            msg = "the guest reported no exit status (init crashed, kernel panic or QEMU failure)"
            if self.qemu_error:
                msg += f"\nQEMU said: {self.qemu_error.strip()}"
        else:
            return None
        return f"{msg}\nfull console log: {self.console_log}"


def _owner_alive(rundir):
    """Whether the ./kml process that made rundir (its name's third field)
    still runs: its boots may still write there."""
    try:
        pid = int(rundir.name.split("-")[2])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _new_rundir():
    paths.RUNS.mkdir(parents=True, exist_ok=True)
    old = sorted(p for p in paths.RUNS.iterdir() if p.is_dir())
    # The oldest beyond KEEP_RUNS go, but not those of a ./kml still running
    # (another command beside this one, or this one's earlier boots)
    for p in old[:max(0, len(old) - KEEP_RUNS)]:
        if not _owner_alive(p):
            shutil.rmtree(p, ignore_errors=True)
    d = paths.RUNS / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{time.monotonic_ns() % 10**6:06d}"
    d.mkdir()
    return d


class Watch:
    """What a gdb hook (boot(gdb=...)) sees of the running VM: the address
    of QEMU's gdb stub and the command's output so far."""

    def __init__(self, stub):
        self.stub = stub            # a unix socket path
        self._cv = threading.Condition()
        self._text = ""
        self._ended = False

    def feed(self, data):
        with self._cv:
            self._text += data.decode(errors="replace")
            self._cv.notify_all()

    def end(self):
        with self._cv:
            self._ended = True
            self._cv.notify_all()

    def wait_line(self, pattern, pos=0, timeout=None):
        """The first match of pattern (a regex, re.M, ending with $) from
        character pos on whose line is complete: the match (m.end() is
        where to go on), or None when the VM ended (or timeout seconds
        passed) first."""
        rx = re.compile(pattern, re.M)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                for m in rx.finditer(self._text, pos):
                    if self._text[m.end():m.end() + 1] in ("\n", "\r"):
                        return m
                left = None if deadline is None else deadline - time.monotonic()
                if self._ended or (left is not None and left <= 0):
                    return None
                self._cv.wait(left)


def gdb_socket(rundir):
    """Where QEMU's gdb stub listens: in the run directory when the path
    fits a unix socket address, else in /tmp."""
    path = rundir / "gdb.sock"
    return str(path) if len(str(path)) < 100 else f"/tmp/kml-gdb-{rundir.name}.sock"


# QEMU before 8.0 emulates CMPXCHG8B/CMPXCHG16B in a helper that computes
# the flags it keeps (all but ZF) from the condition-code state last stored
# to the CPU, not from the instructions just before it: after POPF (or any
# end of a translation block that stored "flags are in CC_SRC") and an ADD,
# the helper takes the ADD's source operand for RFLAGS.  An interrupt that
# arrives before the next flag-setting instruction pushes those bits; its
# IRET loads TF, DF, AC, NT and IOPL from them (a kernel that uses slub's
# per-CPU CMPXCHG16B, such as Debian's, double-faults within minutes of
# random system calls).  cmpxchg16b_changes_only_zf of
# tools/testing/selftests/x86/kml_insn.c reproduces it.  Under such
# a TCG the guest gets no CX16: kernels then use their CMPXCHG16B emulation.
TCG_CX16_FIXED = (8, 0)


@functools.lru_cache(maxsize=None)
def qemu_version():
    """(major, minor) of the installed QEMU, or None if it cannot say."""
    try:
        out = subprocess.run([QEMU, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def cpu_model(accel, cpu=None, version=None):
    """The -cpu value: cpu (default max), without CX16 under a TCG whose
    CMPXCHG16B loses the flags (see TCG_CX16_FIXED)."""
    model = cpu or "max"
    if accel == "tcg":
        version = version or qemu_version()
        if version is None or version < TCG_CX16_FIXED:
            model += ",-cx16"
    return model


def qemu_command(accel, smp, mem, append, initrd, rundir, disk=None, bzimage=None,
                 drives=(), cpu=None, firmware=None, devices=()):
    """QEMU's command line; initrd None: no initramfs; drives: -drive
    values of virtio disks before disk (the first is /dev/vda); cpu: the
    -cpu model (default max).  firmware: (code, vars) flash images to boot
    through (UEFI) instead of -kernel, -initrd and -append, which the
    firmware's boot loader then chooses; devices: more QEMU arguments."""
    cmdline = f"console=ttyS0 panic=-1 kml.accel={accel} kml.smp={smp}"
    if append:
        cmdline += " " + append
    if firmware:
        code, nvram = firmware
        start = ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={code}",
                 "-drive", f"if=pflash,format=raw,unit=1,file={nvram}"]
    else:
        start = ["-kernel", str(bzimage or paths.BZIMAGE),
                 *(["-initrd", str(initrd)] if initrd else []),
                 "-append", cmdline]
    return [QEMU, "-accel", accel, "-cpu", cpu_model(accel, cpu), "-smp", str(smp),
            "-m", mem, "-nodefaults", "-no-reboot", "-display", "none", *start,
            "-serial", f"file:{rundir / 'console.log'}",
            "-chardev", "stdio,id=out,signal=off", "-serial", "chardev:out",
            "-serial", f"file:{rundir / 'ctl'}",
            *(x for d in drives for x in ("-drive", d)),
            *(["-drive", f"file={disk},format=raw,if=virtio,cache=unsafe"] if disk else []),
            *devices]


DISK_FILESYSTEMS = ("ext4",)
# mkfs.ext4 options: initialise the inode tables and the journal now, so
# that the guest kernel's ext4lazyinit thread does not write them during a
# measurement; -q: no progress output.
MKFS_EXT4 = ("-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", "-L", "kml")


def find_mkfs(fs):
    """Path of mkfs.<fs> on the host (also in /usr/sbin and /sbin when they
    are not in PATH, as for a non-root user)."""
    if fs not in DISK_FILESYSTEMS:
        raise KmlError(f"disk file system {fs!r}: only {', '.join(DISK_FILESYSTEMS)}")
    exe = shutil.which(f"mkfs.{fs}", path=os.pathsep.join(
        [os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if exe is None:
        raise KmlError(f"mkfs.{fs} not found: run ./kml setup (installs e2fsprogs)")
    return exe


def mkfs_command(fs, image):
    return [find_mkfs(fs), *MKFS_EXT4, str(image)]


def make_disk(path, mib, fs=None):
    """A sparse disk image of mib MiB, empty or with a fresh file system."""
    cmd = mkfs_command(fs, path) if fs else None
    with open(path, "wb") as f:
        f.truncate(mib << 20)
    if cmd:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            path.unlink(missing_ok=True)
            raise KmlError(f"{' '.join(cmd)} failed (exit status {p.returncode}): "
                           f"{(p.stderr or p.stdout).strip()}")
    return path


def boot(argv, **kw):
    """Boot a fresh VM running argv as root; return a Result (the keywords
    are _boot_once()'s).  If QEMU itself crashes (QEMU 7.2's multi-threaded
    TCG died once of a SIGSEGV in memory_region_dispatch_write(), in a
    day of boots here) before the command's exit status came, the
    boot is made once more, from scratch, when nothing of the first can
    have outlived it: no persistent drives,
    firmware variables or gdb hook.  The Result of the second boot lists
    the first in crashed_before, and a deterministic crash still fails."""
    res = _boot_once(argv, **kw)
    if res.qemu_crash and res.status is None and not (kw.get("drives") or kw.get("firmware") or kw.get("gdb")):
        say(f"QEMU crashed ({signal.Signals(res.qemu_crash).name}) in {res.rundir};"
            f" booting once more")
        first = res
        res = _boot_once(argv, **kw)
        res.crashed_before.append(first)
    return res


def _boot_once(argv, smp=2, mem="1G", append="", adds=(), timeout=300, accel=None,
               stream=True, env=None, disk_mib=0, disk_fs=None, gdb=None, kernel=None,
               initrd=None, drives=(), cpu=None, firmware=None, devices=(),
               output_start=None):
    """One boot of a fresh VM running argv as root; return a Result.  disk_mib > 0
    attaches a sparse virtio disk of that size as /dev/vda: empty, or with
    a new file system of type disk_fs (made on the host: mkfs.ext4).
    stream: True copies the command's output to stdout as it comes, a
    callable gets every chunk of it instead, False keeps it quiet.
    gdb: a function QEMU's gdb stub is started for; it runs in a thread
    while the VM runs and gets a Watch; if it raises, the VM is killed and
    Result.hook_error says why.
    kernel: a kbuild.Kernel to boot (default: the guest kernel).
    initrd: a complete initramfs to boot instead of the guest image with
    argv (an appliance image, whose init runs its own program; argv is
    then ignored).  cpu: QEMU's -cpu model (default max; QEMU's warnings,
    such as features TCG lacks, are in Result.qemu_error).
    firmware: (code, vars) UEFI flash images: the VM boots what the disks'
    boot loader chooses (kernel, initrd and append are then unused; vars
    is copied, the boot writes the copy); devices: more QEMU arguments.
    output_start: a line (bytes, with its newline) before which the
    command's serial port carries someone else's output (the firmware's):
    what precedes it is left out of the stream and Result.output, not of
    the output log.
    Result.started is the monotonic time QEMU started."""
    bzimage = kernel.bzimage if kernel else paths.BZIMAGE
    build = f"./kml build --kernel {kernel.name}" if kernel else "./kml build"
    if firmware:
        checks, initrd = [(Path(f), "firmware") for f in firmware], False
    else:
        checks = [(bzimage, "kernel"), (Path(initrd or paths.INITRAMFS), "initramfs")]
    for f, what in checks:
        if what == "initramfs" and initrd is False:
            continue
        if what == "firmware" and not f.exists():
            raise KmlError(f"no UEFI firmware at {f}: run ./kml setup (ovmf)")
        if not f.exists():
            raise KmlError(f"no {what} at {f}: run {build}")
    if shutil.which(QEMU) is None:
        raise KmlError(f"{QEMU} not found: run ./kml setup")
    if disk_fs:
        if not disk_mib:
            raise KmlError(f"a {disk_fs} file system needs a disk (disk_mib)")
        find_mkfs(disk_fs)          # before anything is started
    accel = accel or choose_accel()
    rundir = _new_rundir()
    res = Result(rundir)
    own_initrd = initrd is None
    if own_initrd:
        initrd = initramfs.run_archive(rundir / "initrd.cpio", argv, adds, env)
    disk = None
    if disk_mib:
        disk = make_disk(rundir / "disk.img", disk_mib, disk_fs)
    if firmware:
        nvram = rundir / "efivars.fd"
        shutil.copyfile(firmware[1], nvram)
        firmware = (firmware[0], nvram)
    cmd = qemu_command(accel, smp, mem, append, initrd, rundir, disk, bzimage, drives, cpu,
                       firmware, devices)
    watch = Watch(gdb_socket(rundir)) if gdb else None
    if watch:
        cmd += ["-gdb", f"unix:{watch.stub},server=on,wait=off"]
    (rundir / "qemu-cmd").write_text(" ".join(cmd) + "\n")
    errlog = open(rundir / "qemu-stderr.log", "wb")
    res.started = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=errlog)
    errlog.close()
    chunks = []
    before = bytearray() if output_start else None

    def pump():
        nonlocal before
        with open(res.output_log, "wb") as log:
            while True:
                data = proc.stdout.read1(65536)
                if not data:
                    break
                log.write(data)
                if before is not None:
                    before += data
                    at = before.find(output_start)
                    if at < 0:
                        continue
                    data, before = bytes(before[at + len(output_start):]), None
                    if not data:
                        continue
                chunks.append(data)
                if callable(stream):
                    stream(data)
                elif stream:
                    sys.stdout.buffer.write(data)
                    sys.stdout.buffer.flush()
                if watch:               # after the stream: the hook's messages follow
                    watch.feed(data)

    def hook():
        try:
            gdb(watch)
        except Exception as e:      # reported in the Result, the VM ends
            res.hook_error = f"{type(e).__name__}: {e}"
            proc.kill()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    hooked = threading.Thread(target=hook, daemon=True) if watch else None
    if hooked:
        hooked.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        res.timed_out = True
        proc.kill()
        proc.wait()
    finally:
        reader.join(timeout=5)
        if hooked:
            watch.end()
            hooked.join(timeout=10)
            if not watch.stub.startswith(str(rundir)):
                Path(watch.stub).unlink(missing_ok=True)
    res.qemu_error = (rundir / "qemu-stderr.log").read_text(errors="replace")
    if (proc.returncode is not None and -proc.returncode in QEMU_CRASH_SIGNALS
            and not res.timed_out and not res.hook_error):
        res.qemu_crash = -proc.returncode
    res.output = b"".join(chunks)
    try:
        ctl = (rundir / "ctl").read_text(errors="replace")
        for line in ctl.splitlines():
            if line.startswith("KML-EXIT "):
                res.status = int(line.split()[1])
    except (OSError, ValueError):
        pass
    try:
        text = res.console_log.read_text(errors="replace")
    except OSError:
        text = ""
    res.problems = console.problems(text)
    if own_initrd:
        (rundir / "initrd.cpio").unlink(missing_ok=True)
    if disk:
        disk.unlink(missing_ok=True)
    return res


def choose_accel():
    """KVM only if a probe boot of this very kernel succeeded; else TCG."""
    forced = os.environ.get("KML_ACCEL")
    if forced:
        if forced not in ("kvm", "tcg"):
            raise KmlError(f"KML_ACCEL={forced}: must be kvm or tcg")
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    st = paths.BZIMAGE.stat()
    key = f"{st.st_size}:{st.st_mtime_ns}"
    try:
        cached = json.loads(KVM_PROBE.read_text())
        if cached.get("key") == key:
            return cached["accel"]
    except (OSError, ValueError, KeyError):
        pass
    say(f"probing KVM with a test boot (up to {KVM_PROBE_TIMEOUT} s)")
    res = boot(["true"], smp=1, mem="256M", timeout=KVM_PROBE_TIMEOUT,
               accel="kvm", stream=False)
    accel = "kvm" if res.ok and res.status == 0 else "tcg"
    if accel == "tcg":
        why = "timed out" if res.timed_out else "failed"
        say(f"KVM probe boot {why}; using TCG (software emulation: "
            f"timings are emulated). Log: {res.console_log}")
    else:
        say("KVM works: using it")
    KVM_PROBE.write_text(json.dumps({"key": key, "accel": accel}))
    return accel
