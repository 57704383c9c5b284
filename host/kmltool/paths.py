"""Where things live.  Everything generated goes below BUILD (ignored by git)."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("KML_BUILD_DIR", ROOT / "build")).resolve()

PATCH_DIR = ROOT / "kernel" / "patches"
BASE_FILE = ROOT / "kernel" / "BASE"
CONFIG_FRAGMENT = ROOT / "kernel" / "config" / "kml.config"
DEBUG_FRAGMENT = ROOT / "kernel" / "config" / "debug.config"
DEFCONFIG_FRAGMENT = ROOT / "kernel" / "config" / "defconfig.config"
DEBIAN_FRAGMENT = ROOT / "kernel" / "config" / "debian.config"
# Debian's own configuration of its 6.12 amd64 kernel (linux-config-6.12)
DEBIAN_CONFIG = Path("/usr/src/linux-config-6.12/config.amd64_none_amd64.xz")
# Debian's flavour for cloud VMs (NVMe, virtio, ENA, gVNIC; 1,138 modules)
DEBIAN_CLOUD_CONFIG = Path("/usr/src/linux-config-6.12/config.amd64_none_cloud-amd64.xz")
CLOUD_FRAGMENT = ROOT / "kernel" / "config" / "cloud.config"
GUEST_SRC = ROOT / "guest"

TREE = BUILD / "linux"          # scratch git tree: tarball + series as commits
OBJ = BUILD / "obj"             # out-of-tree kernel build (kbuild.KERNELS)
GUEST_OUT = BUILD / "guest"     # compiled guest programs
GUEST_ROOT = BUILD / "initramfs" / "root"  # their staging tree (make install DESTDIR=)
INITRAMFS = BUILD / "initramfs" / "base.cpio"
RUNS = BUILD / "runs"           # one directory per VM boot (console logs)
BENCH_OUT = BUILD / "bench"

BZIMAGE = OBJ / "arch" / "x86" / "boot" / "bzImage"


class KmlError(Exception):
    """An error with a message meant for the user; ./kml prints it and exits 1."""
