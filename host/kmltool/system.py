"""./kml run --system debian: a Debian 12 system with systemd as PID 1.

This module builds the base image and, for --direct-kernel, the -kernel
image and boot below; the default boot, an installed machine (UEFI,
GRUB, LVM on NVMe, the package installed with apt), is machine.py's,
built from the same base.

The initramfs guest (guest/init as PID 1, busybox) shows what kml does
to one program; it does not show what a Debian administrator meets:
systemd starting a service from its unit, in the mount namespace the
unit asks for, the kernel installed from a package.  This module builds
and boots such a system:

- the base image: mmdebstrap --mode=root makes a Debian bookworm root
  file system from Debian's packages (PACKAGES: systemd, udev, apt, the
  services of the application benchmark, initramfs-tools) into
  build/system/debian-base/, then guest/system/customize adds the
  command runner (kml-run.service) and a few settings.  A stamp holds
  the digest of what went in (suite, mirrors, packages, the guest/system
  files); the base is rebuilt only when that changes;
- the kernel image: a copy of the base in which `dpkg -i` installs the
  kml kernel's image package (./kml package), as a user installs it:
  its postinst runs Debian's initramfs-tools, which makes an initramfs.
  /boot/vmlinuz-RELEASE and /boot/initrd.img-RELEASE are copied out and
  the tree becomes build/system/debian.img (ext4, mkfs.ext4 -d: no loop
  mount).  Its stamp adds the package's name and SHA-256 to the base's
  digest, so a new package makes a new image and nothing else does;
- a boot: QEMU's -kernel and -initrd get the installed kernel and its
  initramfs (this stands in for GRUB, which would boot the same two
  files), root=/dev/vda is the image, opened with snapshot=on (every
  boot starts from the image as built; writes go to a temporary file),
  and /dev/vdb is a small ext4 image with the command and the --add
  files.  kml-run.service (after multi-user.target) runs the command as
  root with its output on ttyS1 and reports "KML-EXIT N" on ttyS2, then
  powers off: the serial ports and the verdict (qemu.Result: console
  problems, timeout, exit status) are those of every ./kml run.
"""
import contextlib
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import configs, initramfs, kbuild, package, patches, paths, qemu
from .paths import KmlError
from .util import digest, run, say

SYSTEMS = ("debian",)
SUITE = "bookworm"
VARIANT = "apt"             # Essential: yes packages and apt
SOURCES = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
# package -> why the image has it (apt pulls in what they depend on)
PACKAGES = {
    "systemd": "PID 1",
    "systemd-sysv": "/sbin/init is systemd",
    "udev": "device nodes and their links",
    "dbus": "the system bus logind and systemctl's users expect",
    "initramfs-tools": "the kernel package's postinst makes an initramfs, as on a "
                       "Debian installation",
    "e2fsprogs": "the root file system's tools",
    "procps": "pidof-free process lookups (pgrep), ps",
    "iproute2": "ip: the loopback device the services listen on",
    "redis-server": "the administrator's example service (Debian's unit) and "
                    "./kml bench --apps",
    "redis-tools": "redis-cli and redis-benchmark",
    "nginx": "./kml bench --apps: the HTTP server, with Debian's unit",
    "iperf3": "./kml bench --apps: TCP throughput",
    "wrk": "./kml bench --apps: the HTTP load generator",
    "linux-image-cloud-amd64": "Debian's own kernel: the installed machine's fallback "
                               "(GRUB keeps it), and the installer's",
    "grub-efi-amd64": "GRUB on the EFI system partition; update-grub runs from the "
                      "kernel packages' hooks",
    "lvm2": "the root file system's logical volume, activated by the initramfs",
    "gdisk": "sgdisk: the installer partitions the machine's disk",
    "dosfstools": "the EFI system partition's FAT",
    "zstd": "initramfs-tools compresses with it by default (gzip, with a warning, "
            "without it)",
}
GUEST_FILES = ("customize", "kml-run", "kml-run.service")   # install-machine: machine.py
GUEST_DIR = paths.GUEST_SRC / "system"
DIR = paths.BUILD / "system"
BASE = DIR / "debian-base"
IMAGE = DIR / "debian.img"
BOOT = DIR / "debian-boot"          # the installed kernel and initramfs, copied out
IMAGE_SPARE_MIB = 1024              # free space in the image beyond its files
APPEND = "root=/dev/vda rw"
# kml-run's first line on the command's port: firmware and boot loader
# write to every serial port before it (qemu.boot's output_start)
OUTPUT_START = b"KML-OUTPUT\n"


def require_root(what):
    """The Debian system's images are built as root (mmdebstrap
    --mode=root, chroot, mkfs.ext4 -d of root's files): refuse early,
    before a package is built, when not root."""
    if os.geteuid() != 0:
        raise KmlError(f"{what} needs root: it builds the Debian system with mmdebstrap "
                       f"--mode=root and chroot; run it as root (sudo ./kml {what})")


def mmdebstrap_command(dest, customize):
    return ["mmdebstrap", "--mode=root", f"--variant={VARIANT}", "--format=directory",
            "--include=" + ",".join(PACKAGES),
            f"--customize-hook=sh {shlex.quote(str(customize))} \"$1\"",
            SUITE, str(dest), *SOURCES]


def base_key(guest_dir=GUEST_DIR):
    """Digest of everything the base image is made of."""
    files = [(n, (Path(guest_dir) / n).read_bytes()) for n in GUEST_FILES]
    return digest("kml-debian-base-1", SUITE, VARIANT, *SOURCES, *sorted(PACKAGES),
                  *(x for f in files for x in f))


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def image_key(base, deb):
    """Digest of the kernel image: the base's and the package's."""
    deb = Path(deb)
    return digest("kml-debian-image-1", base, deb.name, file_sha256(deb))


def stamp_ok(stamp, key):
    try:
        return Path(stamp).read_text().split("\n", 1)[0].strip() == key
    except OSError:
        return False


def build_base(force=False):
    """build/system/debian-base, built with mmdebstrap unless its stamp
    matches; returns its key."""
    key = base_key()
    stamp = DIR / "debian-base.stamp"
    if not force and BASE.is_dir() and stamp_ok(stamp, key):
        return key
    if shutil.which("mmdebstrap") is None:
        raise KmlError("mmdebstrap not found: run ./kml setup")
    require_root("run --system debian")
    DIR.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    tmp = DIR / "debian-base.new"
    shutil.rmtree(tmp, ignore_errors=True)
    say(f"building the Debian {SUITE} base image with mmdebstrap "
        f"({len(PACKAGES)} packages and their dependencies; minutes, once)")
    t = time.monotonic()
    log = DIR / "debian-base.log"
    with open(log, "w") as f:
        p = subprocess.run(mmdebstrap_command(tmp, GUEST_DIR / "customize"),
                           stdout=f, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise KmlError(f"mmdebstrap failed (exit status {p.returncode}): see {log}")
    shutil.rmtree(BASE, ignore_errors=True)
    tmp.rename(BASE)
    stamp.write_text(f"{key}\nbuilt in {time.monotonic() - t:.0f} s\n")
    say(f"base image: {BASE} ({time.monotonic() - t:.0f} s)")
    return key


@dataclass
class Image:
    """The kernel image: the root file system and the installed kernel."""
    image: Path
    vmlinuz: Path
    initrd: Path            # None: Debian's tools made none
    release: str
    deb: Path

    @property
    def name(self):
        return f"Debian {SUITE} with {self.deb.name}"


def _boot_files(release):
    vmlinuz = BOOT / f"vmlinuz-{release}"
    initrd = BOOT / f"initrd.img-{release}"
    return vmlinuz, (initrd if initrd.exists() else None)


def install_kernel(root, deb):
    """dpkg -i the image package deb in the tree root (a chroot with its
    own /proc, /sys and /dev, in a private mount namespace that ends with
    it); the kernel release it installed."""
    before = {p.name for p in (root / "boot").glob("vmlinuz-*")}
    shutil.copy2(deb, root / "tmp" / Path(deb).name)
    script = ("set -e; mount -t proc proc /proc; mount -t sysfs sysfs /sys; "
              "mount -t devtmpfs devtmpfs /dev 2>/dev/null || true; "
              f"dpkg -i /tmp/{shlex.quote(Path(deb).name)}")
    run(["unshare", "--mount", "--propagation", "private", "--fork",
         "chroot", str(root), "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
         "DEBIAN_FRONTEND=noninteractive", "/bin/sh", "-c", script], capture=True)
    (root / "tmp" / Path(deb).name).unlink()
    new = sorted(p.name for p in (root / "boot").glob("vmlinuz-*") if p.name not in before)
    if len(new) != 1:
        raise KmlError(f"dpkg -i {Path(deb).name} installed {len(new)} kernels in /boot, "
                       "expected one")
    return new[0][len("vmlinuz-"):]


def tree_mib(root):
    p = run(["du", "-sm", "--apparent-size", str(root)], capture=True)
    return int(p.stdout.split()[0])


def make_image(root, image, spare_mib=IMAGE_SPARE_MIB, label="kml-root"):
    """An ext4 image of the tree root (mkfs.ext4 -d: owners, modes and
    extended attributes as they are, no mount)."""
    mib = tree_mib(root) * 5 // 4 + spare_mib
    image.unlink(missing_ok=True)
    with open(image, "wb") as f:
        f.truncate(mib << 20)
    run([qemu.find_mkfs("ext4"), "-F", "-q", "-L", label, "-d", str(root), str(image)],
        capture=True)
    return image


@contextlib.contextmanager
def locked():
    """One ./kml at a time builds or checks the images (two runs started
    together would otherwise both rebuild debian-work)."""
    DIR.mkdir(parents=True, exist_ok=True)
    with open(DIR / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def prepare(deb):
    """The kernel image for image package deb: built from the base (built
    first if needed) unless its stamp matches."""
    deb = Path(deb)
    if not deb.is_file():
        raise KmlError(f"{deb}: no such kernel package")
    with locked():
        return _prepare(deb)


def _prepare(deb):
    key = image_key(build_base(), deb)
    stamp = DIR / "debian.stamp"
    if IMAGE.exists() and stamp_ok(stamp, key):
        release = stamp.read_text().splitlines()[1]
        vmlinuz, initrd = _boot_files(release)
        if vmlinuz.exists():
            return Image(IMAGE, vmlinuz, initrd, release, deb)
    stamp.unlink(missing_ok=True)
    say(f"installing {deb.name} into a copy of the base image (dpkg -i)")
    t = time.monotonic()
    work = DIR / "debian-work"
    shutil.rmtree(work, ignore_errors=True)
    try:
        run(["cp", "-a", "--reflink=auto", str(BASE), str(work)])
        release = install_kernel(work, deb)
        shutil.rmtree(BOOT, ignore_errors=True)
        BOOT.mkdir(parents=True)
        for name in (f"vmlinuz-{release}", f"initrd.img-{release}"):
            if (work / "boot" / name).exists():
                shutil.copy2(work / "boot" / name, BOOT / name)
        make_image(work, IMAGE)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    vmlinuz, initrd = _boot_files(release)
    stamp.write_text(f"{key}\n{release}\n{deb.name}\n")
    say(f"system image: {IMAGE} ({IMAGE.stat().st_size >> 20} MiB, kernel {release}, "
        f"{'with' if initrd else 'no'} initramfs; {time.monotonic() - t:.0f} s)")
    return Image(IMAGE, vmlinuz, initrd, release, deb)


def current_deb(build=True):
    """The image package of Debian's kernel for the series as it is
    (./kml package's name for it); built with ./kml package's code when
    missing and build is true."""
    k = kbuild.kernel(package.DEFAULT_KERNEL)
    version = package.package_version(patches.base_version(), patches.series_digest(),
                                      len(patches.read_series()))
    release = k.release()
    if release:
        deb = package.OUT / package.image_deb_name(release, version)
        if deb.is_file():
            return deb
    if not build:
        raise KmlError(f"no kernel package of the series {version}: run ./kml package")
    say(f"no package of the series {version} yet: building it (./kml package)")
    return package.build_package(package.DEFAULT_KERNEL)


# ---- the command disk --------------------------------------------------

def command_script(argv, env=None):
    lines = [f"export {k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    lines.append("exec " + " ".join(shlex.quote(a) for a in argv))
    return "\n".join(lines) + "\n"


def command_tree(dest, argv, adds=(), env=None):
    """The command disk's files in dest: cmd, files/N, files.list."""
    dest = Path(dest)
    (dest / "files").mkdir(parents=True)
    (dest / "cmd").write_text(command_script(argv, env))
    lines = []
    for n, spec in enumerate(adds):
        host, guest = initramfs.parse_add(spec)
        if not os.path.isfile(host):
            raise KmlError(f"--add {spec}: no such file: {host}")
        if any(c in guest for c in "\n\r") or guest != guest.strip():
            raise KmlError(f"--add {spec}: bad guest path {guest!r}")
        shutil.copy2(host, dest / "files" / str(n))
        lines.append(f"{n} {guest}\n")
    if lines:
        (dest / "files.list").write_text("".join(lines))
    return dest


def command_disk(image, argv, adds=(), env=None):
    with tempfile.TemporaryDirectory(prefix="kml-cmd-") as tmp:
        tree = command_tree(Path(tmp) / "d", argv, adds, env)
        return make_image(tree, Path(image), spare_mib=8, label="kml-cmd")


def boot(argv, deb=None, adds=(), env=None, smp=2, mem="1G", append="", timeout=600,
         accel=None, stream=True, direct_kernel=False):
    """Boot the Debian system with the kernel of image package deb
    (default: current_deb()) and run argv as root once it is up; a
    qemu.Result.  By default the installed machine (machine.py: OVMF,
    GRUB, NVMe, LVM; the package installed with apt); direct_kernel: the
    ext4 image below, its installed kernel and initramfs booted with
    QEMU's -kernel and -initrd, append added to the command line."""
    if not direct_kernel:
        from . import machine       # machine builds on this module
        if append:
            raise KmlError("the installed machine boots GRUB's command line: "
                           "append needs direct_kernel")
        image, _ = machine.prepare(deb or current_deb())
        return machine.boot(image, argv, adds, env, smp=smp, mem=mem, timeout=timeout,
                            accel=accel, stream=stream)
    append = configs.merge(APPEND, append, "the Debian system")    # before building
    img = prepare(deb or current_deb())
    with tempfile.TemporaryDirectory(prefix="kml-sys-", dir=paths.BUILD) as tmp:
        cmd = command_disk(Path(tmp) / "cmd.img", argv, adds, env)
        drives = [f"file={img.image},format=raw,if=virtio,snapshot=on",
                  f"file={cmd},format=raw,if=virtio,readonly=on"]
        return qemu.boot(argv, smp=smp, mem=mem, append=append, output_start=OUTPUT_START,
                         timeout=timeout, accel=accel, stream=stream,
                         kernel=img_kernel(img), initrd=img.initrd or False,
                         drives=drives)


def img_kernel(img):
    return package.KernelImage(img.vmlinuz, img.release, img.deb)
