"""./kml run: boot a VM (or the Debian system) and run CMD as root in it."""
import argparse
import os
import re
import tempfile

from .. import configs, guestrun, initramfs, kbuild, package, qemu, setup, system
from ..guestrun import Mode, Spec
from ..paths import KmlError
from ..util import say
from .common import accel_arg, add_kernel_option, add_vm_options, positive_int


def register(sub):
    p = sub.add_parser("run", help="boot a VM and run CMD as root in it",
                       usage="kml run [options] -- CMD [ARGS...]")
    add_vm_options(p, 300)
    p.add_argument("--add", action="append", default=[], metavar="HOST[:GUEST]",
                   help="copy a host file (and its shared libraries) into the guest")
    p.add_argument("--disk", type=positive_int, default=0, metavar="MIB",
                   help="attach an empty virtio disk of MIB MiB as /dev/vda")
    p.add_argument("--disk-fs", choices=qemu.DISK_FILESYSTEMS,
                   help="make that file system on the --disk image first (on the "
                        "host: mkfs.ext4); the guest can mount /dev/vda")
    p.add_argument("--kernel-mode", action="store_true",
                   help="copy CMD (a host file, or a program in the guest) into "
                        "/trusted and run it from there, in kernel mode")
    p.add_argument("--appliance", action="store_true",
                   help="boot with kml=all (appliance mode): every process, init "
                        "and CMD included, runs in kernel mode")
    add_kernel_option(p, "boot")
    p.add_argument("--deb", metavar="FILE",
                   help="boot the kernel of this image package (./kml package) "
                        "instead of a built one; with --system, the package "
                        "installed in the system image")
    p.add_argument("--system", choices=system.SYSTEMS,
                   help="boot a Debian 12 machine (UEFI firmware, GRUB, root on LVM "
                        "on NVMe, systemd as PID 1; built once in build/system/, as "
                        "root) with the kml kernel package installed by apt (default: "
                        "./kml package's package of the series) and run CMD once it "
                        "is up")
    p.add_argument("--direct-kernel", action="store_true",
                   help="with --system: boot the installed kernel with QEMU's -kernel "
                        "from an ext4 image on virtio (no firmware, GRUB or LVM; "
                        "--append works), instead of the installed machine")
    p.add_argument("argv", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def main(a):
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if not argv:
        raise KmlError("run: no command given (usage: kml run [options] -- CMD [ARGS...])")
    if a.disk_fs and not a.disk:
        raise KmlError(f"--disk-fs {a.disk_fs} needs --disk MIB (the size of the image)")
    for spec in a.add:      # check before booting: bad input loses nothing
        host, _ = initramfs.parse_add(spec)
        if not os.path.isfile(host):
            raise KmlError(f"--add {spec}: no such file: {host}")
    if a.deb and a.kernel:
        raise KmlError("run: --deb boots the packaged kernel; leave out --kernel")
    if a.system:
        return run_system(a, argv)
    if a.direct_kernel:
        raise KmlError("run: --direct-kernel is an option of --system")
    append = configs.merge(configs.KML_ALL, a.append, "--appliance") if a.appliance \
        else a.append
    adds, stream = list(a.add), True
    if a.kernel_mode:
        argv, extra = kernel_mode_argv(argv)
        adds += extra
        stream = guestrun.Stream(headers=False)
    with tempfile.TemporaryDirectory(prefix="kml-deb-") as tmp:
        if a.deb:
            k = package.kernel_from_deb(a.deb, tmp)
            say(f"booting {k.release()} from {a.deb}")
        else:
            k = kbuild.kernel(a.kernel)
        res = qemu.boot(argv, smp=a.smp, mem=a.mem, append=append, adds=adds,
                        timeout=a.timeout, accel=accel_arg(a), disk_mib=a.disk,
                        disk_fs=a.disk_fs, stream=stream, kernel=k)
    msg = res.verdict()
    if msg:
        say(f"run FAILED: {msg}")
    return res.exit_code()


def run_system(a, argv):
    """./kml run --system debian: the command in the Debian system (system.py)."""
    wrong = [o for o, v in (("--kernel", a.kernel), ("--disk", a.disk),
                            ("--kernel-mode", a.kernel_mode),
                            ("--appliance", a.appliance)) if v]
    if wrong:
        raise KmlError(f"run --system: {', '.join(wrong)} not available there (the system "
                       "boots its installed kernel package: --deb FILE chooses it)")
    if a.append and not a.direct_kernel:
        raise KmlError("run --system: the installed machine boots GRUB's command line; "
                       "--append needs --direct-kernel")
    system.require_root("run --system debian")
    setup.setup(quiet=True)
    deb = a.deb or system.current_deb()
    res = system.boot(argv, deb=deb, adds=a.add, smp=a.smp, mem=a.mem, append=a.append,
                      timeout=a.timeout, accel=accel_arg(a), direct_kernel=a.direct_kernel)
    msg = res.verdict()
    if msg:
        say(f"run FAILED: {msg}")
    return res.exit_code()


def kernel_mode_argv(argv):
    """argv running argv[0] from /trusted through kml-modes; (new argv,
    extra --add specs).  A host file is added to /root first."""
    prog = argv[0]
    name = os.path.basename(prog)
    if not name or name in (".", ".."):
        raise KmlError(f"--kernel-mode: bad program name {prog!r}")
    extra = []
    if os.path.isfile(prog):            # a host file: add it, then copy it
        extra = [f"{prog}:/root/{name}"]
        prog = f"/root/{name}"
    elif "/" in prog and not prog.startswith("/"):
        raise KmlError(f"--kernel-mode: {prog}: no such host file")
    run = re.sub(r"[^A-Za-z0-9_.@+-]", "_", name).lstrip("._-@+") or "program"
    return Spec(run, Mode.KERNEL, prog, argv[1:]).argv(), extra
