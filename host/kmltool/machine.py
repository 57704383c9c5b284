"""The Debian system as an installed machine: UEFI, GRUB, GPT on NVMe,
root on LVM, and the kml package installed with apt.

./kml run --system debian boots this by default (system.boot); the
-kernel shortcut (system.prepare's ext4 image, QEMU's -kernel) stays an
explicit option.  Three images, each kept under build/system/ with a
stamp of what made it, and rebuilt only when that changes:

- the base image as ext4 (debian-base.img): the root file system of the
  installer VM;
- machine-stock.img, a 6 GiB disk laid out as Debian's installer lays
  out a UEFI machine with LVM (guest/system/install-machine): GPT, an
  EFI system partition with GRUB as the removable-media loader, /boot
  (ext4), and the volume group kml-vg with the root file system.  Debian's
  own kernel (linux-image-cloud-amd64) is the only one installed.  An
  installer VM makes it: Debian's kernel and initramfs from the base
  (-kernel), the base image as its root, the disk on NVMe;
- machine.img: a copy of machine-stock.img booted through OVMF and GRUB
  on Debian's kernel, where `apt-get install ./linux-image-….deb` installs
  the kml package as an administrator does: its hooks run update-initramfs
  and update-grub, and GRUB's default entry becomes the kml kernel (the
  newest version), Debian's kernel the fallback.  The next boot of the
  image (each one on a snapshot) is the "reboot" into it.

Every boot: OVMF (a fresh copy of its variables), the machine's disk on
NVMe, the command disk (system.command_disk) on virtio, a virtio-net card
on QEMU's user network.  The kernel's command line is GRUB's, which the
installer set to the serial console and panic=-1.
"""
import tempfile
import time
from pathlib import Path

from . import package, paths, qemu, system
from .paths import KmlError
from .util import digest, run, say

OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
FIRMWARE = (OVMF_CODE, OVMF_VARS)
DISK_MIB = 6144
INSTALLER = system.GUEST_DIR / "install-machine"
BASE_IMAGE = system.DIR / "debian-base.img"
STOCK = system.DIR / "machine-stock.img"
IMAGE = system.DIR / "machine.img"
INSTALL_TIMEOUT = 1500


def nvme(image, snapshot=True, serial="kml-root"):
    """QEMU arguments that attach image as an NVMe disk."""
    snap = ",snapshot=on" if snapshot else ",cache=unsafe"
    return ["-drive", f"file={image},format=raw,if=none,id={serial}{snap}",
            "-device", f"nvme,drive={serial},serial={serial}"]


def scsi(image, snapshot=True, serial="kml-root"):
    """QEMU arguments that attach image as a disk on a virtio-scsi HBA."""
    snap = ",snapshot=on" if snapshot else ",cache=unsafe"
    return ["-device", "virtio-scsi-pci,id=scsi0",
            "-drive", f"file={image},format=raw,if=none,id={serial}{snap}",
            "-device", f"scsi-hd,bus=scsi0.0,drive={serial},serial={serial}"]


BUSES = {"nvme": nvme, "scsi": scsi}


NETWORK = ["-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0"]


def stock_kernel(root=None):
    """(vmlinuz, initrd, release) of Debian's own kernel in the base tree."""
    root = Path(root or system.BASE)
    found = sorted((root / "boot").glob("vmlinuz-*-cloud-amd64"))
    if len(found) != 1:
        raise KmlError(f"{root}/boot: {len(found)} Debian cloud kernels, expected one "
                       "(system.PACKAGES: linux-image-cloud-amd64)")
    release = found[0].name[len("vmlinuz-"):]
    initrd = root / "boot" / f"initrd.img-{release}"
    if not initrd.exists():
        raise KmlError(f"{initrd}: missing (initramfs-tools did not run?)")
    return found[0], initrd, release


def _check(res, what):
    if res.exit_code() != 0:
        out = res.output.decode(errors="replace")[-3000:]
        why = res.verdict() or f"exit status {res.status}"
        raise KmlError(f"{what} failed: {why}\noutput:\n{out}")


def build_stock(base_key):
    """machine-stock.img for the base of base_key, unless its stamp matches."""
    key = digest("kml-machine-stock-1", base_key, INSTALLER.read_bytes(), str(DISK_MIB))
    stamp = system.DIR / "machine-stock.stamp"
    if STOCK.exists() and system.stamp_ok(stamp, key):
        return key
    stamp.unlink(missing_ok=True)
    vmlinuz, initrd, release = stock_kernel()
    t = time.monotonic()
    bstamp = system.DIR / "debian-base-img.stamp"
    if not (BASE_IMAGE.exists() and system.stamp_ok(bstamp, base_key)):
        system.make_image(system.BASE, BASE_IMAGE)
        bstamp.write_text(f"{base_key}\n")
    say(f"installing Debian {system.SUITE} on an NVMe disk (GPT, EFI, /boot, LVM) "
        f"with its kernel {release}: an installer VM, minutes, once")
    new = STOCK.with_suffix(".new")
    qemu.make_disk(new, DISK_MIB)
    with tempfile.TemporaryDirectory(prefix="kml-inst-", dir=paths.BUILD) as tmp:
        cmd = system.command_disk(Path(tmp) / "cmd.img",
                                  ["sh", "/root/install-machine", "/dev/nvme0n1"],
                                  [f"{INSTALLER}:/root/"])
        drives = [f"file={BASE_IMAGE},format=raw,if=virtio,snapshot=on",
                  f"file={cmd},format=raw,if=virtio,readonly=on"]
        res = qemu.boot([], append=system.APPEND, timeout=INSTALL_TIMEOUT, stream=False,
                        output_start=system.OUTPUT_START,
                        kernel=package.KernelImage(vmlinuz, release), initrd=initrd,
                        drives=drives, devices=nvme(new, snapshot=False, serial="target"))
    _check(res, "the installer VM (guest/system/install-machine)")
    new.rename(STOCK)
    stamp.write_text(f"{key}\nbuilt in {time.monotonic() - t:.0f} s\n")
    say(f"machine disk: {STOCK} ({time.monotonic() - t:.0f} s)")
    return key


def boot(image, argv, adds=(), env=None, smp=2, mem="1G", timeout=600, accel=None,
         stream=True, snapshot=True, bus="nvme"):
    """Boot the machine disk image through OVMF and GRUB, the disk on bus
    (BUSES: nvme, scsi); run argv as root once the system is up
    (kml-run.service); a qemu.Result."""
    with tempfile.TemporaryDirectory(prefix="kml-sys-", dir=paths.BUILD) as tmp:
        cmd = system.command_disk(Path(tmp) / "cmd.img", argv, adds, env)
        return qemu.boot(argv, smp=smp, mem=mem, timeout=timeout, accel=accel,
                         stream=stream, firmware=FIRMWARE, output_start=system.OUTPUT_START,
                         drives=[f"file={cmd},format=raw,if=virtio,readonly=on"],
                         devices=[*BUSES[bus](image, snapshot), *NETWORK])


def install_package(stock_key, deb):
    """machine.img: machine-stock.img with the image package deb installed
    by apt in a booted machine, unless its stamp matches; returns the
    kernel release the package installed."""
    deb = Path(deb)
    key = digest("kml-machine-1", stock_key, deb.name, system.file_sha256(deb))
    stamp = system.DIR / "machine.stamp"
    if IMAGE.exists() and system.stamp_ok(stamp, key):
        return stamp.read_text().splitlines()[1]
    stamp.unlink(missing_ok=True)
    release = deb.name.split("_")[0][len("linux-image-"):]
    say(f"installing {deb.name} on the machine with apt (booted on Debian's kernel)")
    t = time.monotonic()
    new = IMAGE.with_suffix(".new")
    new.unlink(missing_ok=True)
    run(["cp", "--sparse=always", "--reflink=auto", str(STOCK), str(new)])
    script = ("set -e; export DEBIAN_FRONTEND=noninteractive; "
              f"apt-get install -y /root/{deb.name}; "
              f"grep -q 'vmlinuz-{release}' /boot/grub/grub.cfg; "
              "echo == default: $(grep -m1 -o \"vmlinuz-[^ ]*\" /boot/grub/grub.cfg)")
    res = boot(new, ["sh", "-c", script], adds=[f"{deb}:/root/"], timeout=INSTALL_TIMEOUT,
               stream=False, snapshot=False)
    _check(res, f"apt-get install {deb.name} on the machine")
    new.rename(IMAGE)
    stamp.write_text(f"{key}\n{release}\n{deb.name}\n")
    say(f"machine image: {IMAGE} (kernel {release}; {time.monotonic() - t:.0f} s)")
    return release


def prepare(deb):
    """The machine image with the image package deb installed, built as
    needed; (image path, release)."""
    deb = Path(deb)
    if not deb.is_file():
        raise KmlError(f"{deb}: no such kernel package")
    for f in FIRMWARE:
        if not f.exists():
            raise KmlError(f"no UEFI firmware at {f}: run ./kml setup (ovmf)")
    with system.locked():
        stock = build_stock(system.build_base())
        return IMAGE, install_package(stock, deb)
