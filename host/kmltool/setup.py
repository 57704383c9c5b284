"""./kml setup: install the Debian packages the project needs."""
import os
import shutil
import subprocess
import tempfile

from . import paths
from .paths import KmlError
from .util import say

# package -> what it is for
PACKAGES = {
    "linux-source-6.12": "the kernel source tarball the patch series applies to",
    "linux-config-6.12": "Debian's own kernel configuration: ./kml build --kernel debian",
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
    "openssl": "the key the built kernels trust for signed kernel-mode programs (build/keys)",
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
    "redis-tools": "./kml bench --apps: redis-server (as redis-check-rdb) and redis-benchmark",
    "wrk": "./kml bench --apps: the HTTP load generator",
    "iperf3": "./kml bench --apps: TCP throughput over loopback (its service stays off)",
    "linux-perf": "perf in the guest: profiling a kernel-mode program (a guest test)",
    "dpkg-dev": "./kml package: dpkg-buildpackage, for the kernel's bindeb-pkg",
    "debhelper": "./kml package: the dh_* tools bindeb-pkg's debian/rules runs",
    "kmod": "./kml package: depmod for the packaged kernel's modules",
    "cpio": "./kml package: a build dependency bindeb-pkg checks",
    "rsync": "./kml package: a build dependency bindeb-pkg checks",
    "mmdebstrap": "./kml run --system debian: builds the Debian 12 root file system "
                  "from Debian's packages (as root, --mode=root)",
    "ovmf": "./kml run --system debian: the UEFI firmware the installed machine "
            "boots through (GRUB from its EFI system partition)",
    "libpcre2-8-0": "the guest's nginx (unpacked, not installed: see UNPACKED)",
    "libcrypt1": "the guest's nginx",
    "libssl3": "the guest's nginx",
    "zlib1g": "the guest's nginx",
}

# Packages whose programs only the guest runs and whose installation would
# start a service on the host (nginx: its nginx-common): downloaded and
# unpacked under build/debs/NAME (dpkg-deb -x, no maintainer scripts).
# Their libraries come from PACKAGES.
UNPACKED = {
    "nginx": "./kml bench --apps: the HTTP server",
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
        for pkg in UNPACKED:
            unpacked(pkg)
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
    for pkg in UNPACKED:
        unpacked(pkg)
    return missing


def unpacked(pkg):
    """The directory package pkg (of UNPACKED) is unpacked in, downloading
    and unpacking it first if needed."""
    root = paths.BUILD / "debs" / pkg
    if (root / ".unpacked").exists():
        return root
    say(f"downloading {pkg} ({UNPACKED[pkg]}; unpacked in {root}, not installed)")
    paths.BUILD.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=paths.BUILD) as tmp:
        cmd = ["apt-get", "download", pkg]
        # (as root, apt's _apt user cannot write to a private directory)
        os.chmod(tmp, 0o755)
        if subprocess.run(cmd, cwd=tmp).returncode != 0:
            say("apt-get download failed; updating the package lists and retrying")
            sudo = [] if os.geteuid() == 0 else ["sudo"]
            subprocess.run(sudo + ["apt-get", "update"])
            if subprocess.run(cmd, cwd=tmp).returncode != 0:
                raise KmlError(f"apt-get download {pkg} failed")
        debs = [f for f in os.listdir(tmp) if f.endswith(".deb")]
        if len(debs) != 1:
            raise KmlError(f"apt-get download {pkg}: expected one .deb, got {debs}")
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        if subprocess.run(["dpkg-deb", "-x", os.path.join(tmp, debs[0]), str(root)]).returncode:
            raise KmlError(f"dpkg-deb -x {debs[0]} failed")
        (root / ".unpacked").write_text(debs[0] + "\n")
    return root
