"""./kml setup: install the Debian packages the project needs."""
import os
import shutil
import subprocess

from .paths import KmlError
from .util import say

# package -> what it is for
PACKAGES = {
    "linux-source-6.12": "the kernel source tarball the patch series applies to",
    "qemu-system-x86": "boots the guest",
    "busybox-static": "the guest's userland",
    "gcc": "kernel and guest programs",
    "make": "kernel and guest builds",
    "libc6-dev": "guest programs (static glibc)",
    "binutils": "assembler, linker, objdump",
    "flex": "kernel build (kconfig)",
    "bison": "kernel build (kconfig)",
    "bc": "kernel build",
    "libelf-dev": "kernel build (objtool)",
    "libssl-dev": "kernel build (certificate tools)",
    "xz-utils": "unpacks the source tarball",
    "git": "the patch-series tree",
    "ccache": "fast kernel rebuilds",
    "python3-pytest": "the test runner",
    "python3-ply": "scripts/checkpatch.pl (SPDX check) for ./kml patches check",
    "python3-git": "scripts/checkpatch.pl (SPDX check) for ./kml patches check",
    "dwarves": "pahole: the kernel's BTF (/sys/kernel/btf/vmlinux) for the kernel library",
    "libbpf-dev": "BTF reader (static libbpf) for the kernel-library programs",
    "zlib1g-dev": "static libbpf/libelf dependency of the kernel-library programs",
    "e2fsprogs": "mkfs.ext4: the ext4 disk image of ./kml bench's file I/O part",
    "stress-ng": "./kml soak: stressors run in kernel mode",
    "trinity": "./kml soak: the system-call fuzzer run in kernel mode",
}


def missing_packages():
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *PACKAGES],
        capture_output=True, text=True).stdout
    installed = {line.split()[0] for line in out.splitlines()
                 if len(line.split()) > 1 and line.split()[1].startswith("ii")}
    return [p for p in PACKAGES if p not in installed]


def setup(quiet=False):
    if not shutil.which("dpkg-query"):
        raise KmlError("this is not a Debian system: install by hand: " + " ".join(PACKAGES))
    missing = missing_packages()
    if not missing:
        if not quiet:
            say("all required packages are installed")
        return []
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    if sudo and not shutil.which("sudo"):
        raise KmlError("not root and no sudo: install as root: apt-get install " + " ".join(missing))
    say("installing: " + ", ".join(f"{p} ({PACKAGES[p]})" for p in missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = sudo + ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if subprocess.run(cmd, env=env).returncode != 0:
        say("apt-get install failed; updating the package lists and retrying")
        subprocess.run(sudo + ["apt-get", "update"], env=env)
        if subprocess.run(cmd, env=env).returncode != 0:
            raise KmlError("apt-get install failed for: " + " ".join(missing))
    still = missing_packages()
    if still:
        raise KmlError("still missing after apt-get: " + " ".join(still))
    say("installed: " + " ".join(missing))
    return missing
