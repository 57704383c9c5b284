"""Command line of ./kml."""
import argparse
import functools
import os
import re
import subprocess
import tempfile
import sys
import time
from pathlib import Path

from kmlverify.cli import main as verify_main

from . import bench, guestrun, initramfs, kbuild, kstackbench, patches, paths, qemu, report
from . import appliance, apps, package, setup, soak, system
from .guestrun import Mode, Spec, Status
from . import pathlen
from .paths import KmlError
from .util import say

TEST_CONFIGS = {
    # name: (smp, extra kernel arguments, kernel (kbuild.KERNELS))
    "smp2-pti-on": (2, "pti=on", "default"),
    "smp2-pti-off": (2, "pti=off", "default"),
    "smp1-pti-on": (1, "pti=on", "default"),
    "smp1-pti-off": (1, "pti=off", "default"),
    # the same tests with demand-paged kernel stacks
    "smp2-pti-on-dks": (2, "pti=on dynamic_kstacks=on", "default"),
    "smp2-pti-off-dks": (2, "pti=off dynamic_kstacks=on", "default"),
    # and with kernel-mode system calls on the generic path instead of
    # the bypass, so that every guest test also runs against that path
    "smp2-pti-on-dks-generic": (2, "pti=on dynamic_kstacks=on sysctl.kernel.kml_fast_syscall=1",
                                "default"),
    # and with the fault-free variant: whole stacks, sleepers' cold pages
    # reclaimed
    "smp2-pti-off-dks-reclaim": (2, "pti=off dynamic_kstacks=reclaim", "default"),
    # the debug kernel (full preemption, lockdep, DEBUG_ENTRY, ...), both
    # PTI modes, both stack modes; it does not offer the bypass, so its
    # kernel-mode system calls take the generic path
    "debug-smp2-pti-on-dks": (2, "pti=on dynamic_kstacks=on", "debug"),
    "debug-smp2-pti-off-dks-reclaim": (2, "pti=off dynamic_kstacks=reclaim", "debug"),
    # the distribution-style kernel (./kml test --kernel defconfig)
    "defconfig-smp2-pti-on": (2, "pti=on", "defconfig"),
    "defconfig-smp2-pti-off-dks-reclaim": (2, "pti=off dynamic_kstacks=reclaim", "defconfig"),
    # Debian's own configuration (./kml test --kernel debian): its
    # mitigations, IBT, X86_DEBUG_FPU, context tracking built in
    "debian-smp2-pti-on": (2, "pti=on", "debian"),
    "debian-smp2-pti-off-dks": (2, "pti=off dynamic_kstacks=on", "debian"),
}
DEFAULT_TEST_CONFIGS = ["smp2-pti-on", "smp2-pti-off", "smp2-pti-off-dks",
                        "smp2-pti-off-dks-reclaim", "debug-smp2-pti-on-dks",
                        "debug-smp2-pti-off-dks-reclaim"]
# The demo: one program as installed and from /trusted (CPL 3, then CPL 0)
DEMO = (Spec("kml-probe", Mode.USER, "/usr/lib/kml/kml-probe", ("info",), required=True),
        Spec("kml-probe@kernel", Mode.KERNEL, "/usr/lib/kml/kml-probe", ("info",),
             required=True))
DEMO_PRELUDE = 'grep KernelMode /proc/self/status | sed "s/^/== this shell: /"'


def positive_int(s):
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {s!r}")
    return v


def smp_count(s):
    v = positive_int(s)
    if v > 8:
        raise argparse.ArgumentTypeError(f"at most 8 vCPUs (CONFIG_NR_CPUS): {s}")
    return v


def mem_size(s):
    m = re.fullmatch(r"(\d+)([MG])", s.upper())
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"memory size like 512M or 2G, not {s!r}")
    mib = int(m.group(1)) * (1024 if m.group(2) == "G" else 1)
    if not 128 <= mib <= 16384:
        raise argparse.ArgumentTypeError(f"memory must be between 128M and 16G: {s}")
    return f"{m.group(1)}{m.group(2)}"


def add_vm_options(p, timeout, smp=2, mem="1G", smp_help=None):
    p.add_argument("--smp", type=smp_count, default=smp,
                   help=f"vCPUs (default {smp_help or smp})")
    p.add_argument("--mem", type=mem_size, default=mem, help=f"guest memory (default {mem})")
    p.add_argument("--append", default="", metavar="ARGS", help="extra kernel command line")
    p.add_argument("--timeout", type=positive_int, default=timeout, metavar="S",
                   help=f"seconds before the VM is killed (default {timeout})")
    p.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto",
                   help="auto: KVM only if a probe boot works, else TCG")


def add_kernel_option(p, what="build"):
    p.add_argument("--kernel", choices=sorted(kbuild.KERNELS), default=None,
                   help=f"which kernel to {what}: " + "; ".join(
                       f"{k.name}: {k.text}" for k in kbuild.KERNELS.values())
                   + " (default: default)")


def build_parser():
    ap = argparse.ArgumentParser(prog="kml", description=(
        "Kernel Mode Linux: build the patched kernel and guest, boot QEMU, "
        "run commands, tests and benchmarks."))
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", required=True)
    sub.add_parser("setup", help="install missing Debian packages")
    p = sub.add_parser("build", help="build kernel and initramfs (incremental)")
    add_kernel_option(p)

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
                   help="boot a Debian 12 system (systemd as PID 1, root file system "
                        "on a virtio disk, built once in build/system/) with the kml "
                        "kernel package installed by dpkg -i (default: ./kml package's "
                        "package of the series) and run CMD once it is up")
    p.add_argument("argv", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    text = ("build a kernel of the series as an installable Debian package (the "
            "kernel's bindeb-pkg, the series recorded in it) into build/packages/")
    p = sub.add_parser("package", help=text, description=text + ".")
    p.add_argument("--kernel", choices=sorted(kbuild.KERNELS), default=package.DEFAULT_KERNEL,
                   help=f"which kernel (default: {package.DEFAULT_KERNEL}, Debian's "
                        "own configuration)")

    p = sub.add_parser("test", help="run the test suite (host unit tests and guest tests)")
    p.add_argument("--config", action="append", choices=sorted(TEST_CONFIGS),
                   help="VM configuration(s) for guest tests "
                        f"(default: {' '.join(DEFAULT_TEST_CONFIGS)})")
    p.add_argument("--kernel", choices=sorted(kbuild.KERNELS),
                   help="only the configurations that boot this kernel")
    p.add_argument("--host-only", action="store_true", help="skip VM boots")
    p.add_argument("--system", choices=system.SYSTEMS,
                   help="instead of the guest configurations: the Debian system's VM "
                        "tests (./kml run --system debian), after ./kml package")
    p.add_argument("-k", dest="pytest_k", metavar="EXPR", help="pytest -k selection")

    for name, text in (("bench", "run the benchmarks in a VM: syscall latency as an ordinary "
                                 "process, in kernel mode with syscall and with the call "
                                 "path; file I/O throughput (tmpfs, ext4) as an ordinary "
                                 "process and in kernel mode"),
                       ("demo", "the main job: set up, build, boot, show the path length "
                                "of getppid, then the latency and file I/O tables")):
        p = sub.add_parser(name, help=text, description=text + ".")
        # One vCPU for the latency tables: with two, a vCPU the host
        # deschedules while it holds a guest spinlock makes the other spin
        # (docs/performance.md, "Why the emulator times ...")
        add_vm_options(p, 1200, smp=None,
                       smp_help=f"{BENCH_SMP} for the latency tables, {APPS_SMP} with --apps")
        p.add_argument("--quick", action="store_true",
                       help="few short runs (smoke test), latency and file I/O")
        p.add_argument("--only", metavar="ROWS",
                       help="comma-separated latency rows (kml-bench --list); it does "
                            "not restrict the file I/O part: --no-io skips that")
        p.add_argument("--no-io", action="store_true",
                       help="skip the file I/O part (kml-iobench on tmpfs and on an ext4 "
                            f"disk image of {bench.IO_DISK_MIB} MiB)")
        p.add_argument("--no-pathlen", action="store_true",
                       help="skip the counted table that leads the output (the "
                            "instructions of each latency row: one more boot, 1 vCPU, "
                            "minutes of single stepping)")
        if name != "bench":
            continue
        p.add_argument("--apps", action="store_true",
                       help="instead: Debian's redis-server, nginx, iperf3 and find as "
                            "ordinary processes, in kernel mode from /trusted (clients "
                            "ordinary) and, in the appliance configurations (kml=all), "
                            "with server and client at CPL 0; one boot per "
                            "configuration (--quick: 1 round, short runs)")
        p.add_argument("--rounds", type=positive_int, metavar="N",
                       help=f"with --apps: rounds per configuration (default {apps.ROUNDS})")
        p.add_argument("--config", action="append", choices=apps.CONFIG_NAMES,
                       help="with --apps: the configuration(s) to boot (default: "
                            f"{' '.join(apps.DEFAULT_CONFIGS)}; debian-pti-off: the "
                            "Debian system of ./kml run --system debian, on its own)")
        p.add_argument("--deb", metavar="FILE",
                       help="with --apps --config debian-pti-off: the kernel package "
                            "installed in the Debian system (default: ./kml package's)")

    text = ("UnixBench-style system tests and the kernel-stack memory of idle threads "
            f"(kml-ubench) in a boot without, one with {kstackbench.PARAM} and one "
            f"with {kstackbench.RECLAIM_PARAM}")
    p = sub.add_parser("kstack-bench", help=text, description=text + ".")
    add_vm_options(p, 900)
    p.add_argument("--quick", action="store_true",
                   help="3 runs of 0.3 s per test instead of 5 of 2 s (smoke test)")
    p.add_argument("--threads", type=positive_int, default=kstackbench.DEFAULT_THREADS,
                   metavar="N", help="idle threads for the kernel-stack memory "
                   f"measurement (default {kstackbench.DEFAULT_THREADS})")

    text = ("Debian's stress-ng (as an ordinary process and in kernel mode) and trinity "
            "(in kernel mode), one boot per configuration; fails on any kernel console "
            "problem or a stressor that fails in kernel mode only")
    p = sub.add_parser("soak", help=text, description=text + ".")
    add_vm_options(p, 5400, mem="2G")
    p.add_argument("--short", action="store_true",
                   help=f"the CI form: {len(soak.SHORT)} stressors, "
                        f"{' and '.join(soak.SHORT_CONFIGS)}, fewer trinity calls")
    p.add_argument("--config", action="append", choices=soak.CONFIG_NAMES,
                   help="configuration(s) to boot (default: all four; --short: "
                        f"{' '.join(soak.SHORT_CONFIGS)})")
    p.add_argument("--stressor-timeout", type=positive_int, metavar="S",
                   help="seconds per stressor and mode (default 2)")
    p.add_argument("--calls", type=positive_int, metavar="N",
                   help="trinity's system calls per boot (default 100000; --short: 20000)")
    p.add_argument("--seed", type=int, metavar="N",
                   help=f"trinity's random seed (default {soak.TRINITY_SEED})")

    p = sub.add_parser("patches", help="the kernel patch series")
    psub = p.add_subparsers(dest="pcmd", metavar="ACTION", required=True)
    psub.add_parser("apply", help="(re)create build/linux: source + series as commits")
    pe = psub.add_parser("export", help="write the tree's commits back to kernel/patches")
    pe.add_argument("--from", dest="tree", metavar="TREE", help="tree to export (default build/linux)")
    psub.add_parser("check", help="run scripts/checkpatch.pl on every patch of the series")

    p = sub.add_parser("verify", help="scan ELF programs for privileged instructions")
    p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    text = ("a single-service appliance: the guest kernel and an initramfs of "
            "kml-appinit and the service only, booted with kml=all (every process, "
            "init included, at CPL 0); prints the image sizes and the boot-to-service "
            "time against the same service on the normal image")
    p = sub.add_parser("appliance", help=text, description=text + ".")
    add_vm_options(p, 300)
    p.add_argument("--service", choices=sorted(appliance.SERVICES), default="redis",
                   help="the service (default redis: redis-server, checked with PING, "
                        "SET and GET)")
    p.add_argument("--rounds", type=positive_int, default=3, metavar="N",
                   help="boots of each image, alternating (default 3)")

    text = ("instructions per system call (getppid, read, write, futex wake, pipe round "
            "trip), per pipe round trip with a process of the other mode (context switches "
            "across modes), per first-touch page fault and per row of kml-bench's latency "
            "table (stat, fstat, open+close, select, signals, protection fault, AF_UNIX "
            "round trip; fork+exit and fork+exec with --long), in the three modes of bench, "
            "with pti=off and pti=on, counted by single-stepping through QEMU's gdb stub, "
            "with the costly instructions met; --cpu MODEL adds cycle estimates")
    p = sub.add_parser("pathlen", help=text, description=text + ".")
    add_vm_options(p, 1800, smp=1)    # one vCPU: nothing else runs while it is stepped
    p.add_argument("--quick", action="store_true", help="getppid only, 3 samples")
    p.add_argument("--only", metavar="OPS", help="comma-separated operations: "
                   + ",".join(pathlen.OPS))
    p.add_argument("--samples", type=positive_int, metavar="N",
                   help=f"hits counted per operation (default {pathlen.DEFAULT_SAMPLES})")
    p.add_argument("--skip", type=int, choices=range(0, 10), metavar="N",
                   default=pathlen.DEFAULT_SKIP,
                   help=f"hits of each operation dropped before counting (default "
                        f"{pathlen.DEFAULT_SKIP}; the long rows drop none)")
    p.add_argument("--long", action="store_true",
                   help=f"also count the long rows ({', '.join(pathlen.LONG_OPS)}), which "
                        "the default set leaves out (minutes per hit)")
    p.add_argument("--long-samples", type=positive_int, metavar="N",
                   default=pathlen.DEFAULT_LONG_SAMPLES,
                   help=f"hits counted of {' and '.join(pathlen.LONG_OPS)} (hundreds of "
                        f"thousands of steps each; default {pathlen.DEFAULT_LONG_SAMPLES})")
    p.add_argument("--cpu", metavar="MODEL", default=pathlen.DEFAULT_CPU,
                   help="QEMU's -cpu model (qemu-system-x86_64 -cpu help), e.g. "
                        "Skylake-Server-v4 or EPYC-Milan: the guest kernel picks that "
                        "CPU's mitigations; the table adds cycle estimates for its family "
                        f"(default {pathlen.DEFAULT_CPU})")
    p.add_argument("--mode", metavar="MODES",
                   help="comma-separated modes to count in (default: all): "
                        + ",".join(m.name for m in pathlen.MODES))
    p.add_argument("--pti", choices=("both", "off", "on"), default="both",
                   help="the boot(s): pti=off, pti=on or both (default both)")
    add_kernel_option(p, "count on")
    return ap


def build_all(kernels=("default",)):
    setup.setup(quiet=True)
    t = time.monotonic()
    for name in kernels:
        kbuild.build_kernel(kbuild.kernel(name))
    initramfs.build_initramfs()
    say(f"build done in {time.monotonic() - t:.0f} s ("
        + ", ".join(f"{n}: {kbuild.kernel(n).release()}" for n in kernels) + ")")


def test_configs(a):
    """The test configurations chosen by --config and --kernel."""
    configs = a.config or (DEFAULT_TEST_CONFIGS if not a.kernel else
                           [c for c, v in TEST_CONFIGS.items() if v[2] == a.kernel])
    wrong = [c for c in configs if a.kernel and TEST_CONFIGS[c][2] != a.kernel]
    if wrong:
        raise KmlError(f"--config {wrong[0]} boots the {TEST_CONFIGS[wrong[0]][2]} "
                       f"kernel, not --kernel {a.kernel}")
    return configs


def accel_arg(a):
    return None if a.accel == "auto" else a.accel


def cmd_run(a):
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
    append = f"{a.append} kml=all".strip() if a.appliance else a.append
    if a.appliance and re.search(r"(^|\s)kml=", a.append):
        raise KmlError("--appliance sets kml=all: leave kml= out of --append")
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
    setup.setup(quiet=True)
    deb = a.deb or system.current_deb()
    res = system.boot(argv, deb=deb, adds=a.add, smp=a.smp, mem=a.mem, append=a.append,
                      timeout=a.timeout, accel=accel_arg(a))
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


def pytest_python():
    for exe in (sys.executable, "/usr/bin/python3"):
        if subprocess.run([exe, "-c", "import pytest"], capture_output=True).returncode == 0:
            return exe
    raise KmlError("pytest is not installed: run ./kml setup")


def cmd_test(a):
    if a.system and (a.config or a.kernel):
        raise KmlError("test --system runs the system's VM tests only: leave out "
                       "--config and --kernel")
    configs = [] if a.system else test_configs(a)
    if a.host_only:
        setup.setup(quiet=True)
    elif a.system:
        setup.setup(quiet=True)
        package.build_package(package.DEFAULT_KERNEL)   # the package the image installs
    else:
        build_all(sorted({TEST_CONFIGS[c][2] for c in configs}))
    cmd = [pytest_python(), "-m", "pytest", "-v", "-rfEs", "-p", "no:cacheprovider",
           f"--kml-configs={','.join(configs)}"]
    if a.system:
        cmd.append(f"--kml-system={a.system}")
    if a.host_only:
        cmd.append("--kml-host-only")
    if a.kernel:
        cmd.append(f"--kml-kernel={a.kernel}")
    if a.pytest_k:
        cmd += ["-k", a.pytest_k]
    cmd.append("tests")
    if (paths.ROOT / "verify" / "tests").is_dir():
        cmd.append("verify/tests")
    say("running: " + " ".join(cmd[1:]))
    return subprocess.run(cmd, cwd=paths.ROOT).returncode


def vm_options(a):
    return {"smp": a.smp, "mem": a.mem, "append": a.append, "timeout": a.timeout,
            "accel": accel_arg(a)}


# vCPUs of ./kml bench's latency and file I/O boot, and of --apps's
# boots (a server and its client)
BENCH_SMP, APPS_SMP = 1, 2

# What the demo and ./kml bench say between the path length and the timings
TCG_NOTE = (
    "The timings below are EMULATED unless they say otherwise: under QEMU TCG a CR3 "
    "or CR4 write (it flushes QEMU's software TLB) costs microseconds, while most other "
    "instructions, the serializing and mitigation ones included, cost almost nothing, "
    "so the ratios between modes show the direction of a change, not its size on "
    "hardware.  "
    "The instruction counts above do not depend on the emulator: they are what a "
    "CPU executes (docs/pathlen.md relates them to hardware costs).  Where a timing "
    "below says kernel mode is slower although it counts fewer instructions, the "
    "emulator is the cause: a kernel-mode process's pages share QEMU's software TLB "
    "with the kernel's (a direct-mapped table that is not resized inside a loop), "
    "its direct return ends two more of QEMU's translation blocks, and host "
    "contention differs from mode to mode; docs/performance.md, 'Why the emulator "
    "times some kernel-mode rows slower'.")


def show_and_save(data, table, prefix="", what="results"):
    """Print a command's Markdown, save it with its JSON (report.save) and
    say where; the path stem."""
    print("\n" + table, end="", flush=True)
    stem = report.save(data, table, prefix=prefix)
    say(f"{what}: {stem}.json and {stem}.md")
    return stem


def run_pathlen(a, only, samples, smp):
    """kml-pathlen's specs booted with the gdb hook (see pathlen.py) on
    the kernel --kernel names and the CPU model --cpu names: boots,
    combine, render, save.  0 or an exit code."""
    k = kbuild.kernel(getattr(a, "kernel", None))
    cpu = getattr(a, "cpu", None) or pathlen.DEFAULT_CPU
    kernel, source = pathlen.kernel_symbols(k.vmlinux, say=say)
    tracer = pathlen.Tracer(samples, skip=getattr(a, "skip", pathlen.DEFAULT_SKIP), say=say,
                            progress=say if os.environ.get("KML_PATHLEN_PROGRESS") == "1"
                            else None,
                            long_samples=getattr(a, "long_samples", None)
                            or pathlen.DEFAULT_LONG_SAMPLES)
    pti = {"off": ("off",), "on": ("on",)}.get(getattr(a, "pti", "both"), pathlen.PTI)
    modes = getattr(a, "mode", None)
    specs = pathlen.specs(only, pti, modes.split(",") if modes else None)
    t = time.monotonic()
    vm = dict(vm_options(a), smp=smp)
    if any(o in pathlen.LONG_OPS for o in (only or ())):
        vm["append"] = f"{vm.get('append') or ''} {pathlen.LONG_APPEND}".strip()
    out = guestrun.boot(specs, gdb=tracer, kernel=k, **vm,
                        **({"cpu": cpu} if cpu != pathlen.DEFAULT_CPU else {}))
    if out.failed:
        say(f"pathlen FAILED: {out.failed.failure}")
        return out.failed.code
    data = pathlen.combine(specs, out.runs, tracer, kernel, vdso=pathlen.vdso_dbg(k))
    # relative to the checkout: saved results go into docs/perf-data/
    data["kernel_symbols"] = (os.path.relpath(source, paths.ROOT)
                              if source and source.startswith(str(paths.ROOT) + os.sep)
                              else source)
    data["kernel"] = {"name": k.name, "release": k.release()}
    data["cpu_model"] = pathlen.cpu_model_record(
        cpu, [b.result.qemu_error for b in out.boots if b.result is not None])
    data["seconds"] = round(time.monotonic() - t)
    data["estimates"] = pathlen.estimates(data)
    table = report.pathlen_markdown(data)
    show_and_save(data, table, "pathlen-", "path length results")
    return pathlen.exit_status(data)


# What the demo and ./kml bench count before their timings: getppid and
# every row of the latency table that takes seconds per hit to step
LEAD_OPS = ("getppid",) + tuple(o for o in pathlen.BENCH_OPS if o not in pathlen.LONG_OPS)


def bench_pathlen(a):
    """The demo's and ./kml bench's lead: the instructions of every row of
    the latency table (but the two fork rows, minutes per hit), one hit
    each, pti=off.  0 or an exit code."""
    say("first the deterministic part: the instructions of each row of the latency "
        "table, counted through QEMU's gdb stub (pti=off, one hit each after one "
        "dropped); fork+exit and fork+exec take minutes per hit: ./kml pathlen --long")
    rc = run_pathlen(argparse.Namespace(**dict(vars(a), pti="off")), list(LEAD_OPS), 1,
                     smp=1)
    if not rc:
        print("\n" + TCG_NOTE + "\n", flush=True)
    return rc


def cmd_bench(a, demo=False):
    """kml-bench in three modes and kml-iobench in two, on tmpfs and ext4,
    in one boot (see bench.py): specs, boot, combine, render, save.  Led by
    getppid's path length unless --no-pathlen."""
    wrong = [o for o in ("rounds", "config", "deb") if getattr(a, o, None)]
    if wrong:
        raise KmlError(", ".join("--" + o for o in wrong) + ": options of --apps")
    if not a.no_pathlen:
        try:
            pathlen.check_append(a.append)
        except KmlError as e:
            raise KmlError(f"{e}; or use --no-pathlen") from None
    build_all()
    if not a.no_pathlen:
        rc = bench_pathlen(a)
        if rc:
            return rc
    options = ["--quick"] if a.quick else []
    if a.only:
        bench.check_only(a.only, paths.GUEST_OUT / "kml-bench")
        options += ["--only", a.only]
    io_options = None if a.no_io else (["--quick"] if a.quick else [])
    specs, prelude = bench.specs(options, io_options), ()
    if demo:
        say("the main job: one program run in user mode and from /trusted in "
            "kernel mode, then the syscall latency and file I/O tables, in a fresh VM "
            "(after the path length, unless --no-pathlen)")
        specs, prelude = list(DEMO) + specs, (DEMO_PRELUDE,)
    say("kml-bench in three modes: " + ", ".join(m.name for m in bench.MODES)
        + ("" if io_options is None else
           "; then kml-iobench as " + " and ".join(m.name for m in bench.IO_MODES)
           + " on " + " and ".join(fs.name for fs in bench.IO_FS)))
    out = guestrun.boot(specs, prelude, **dict(vm_options(a), smp=a.smp or BENCH_SMP))
    if out.failed:
        say(f"bench FAILED: {out.failed.failure}")
        return out.failed.code
    data = bench.combine(out.runs, io_fs=None if io_options is None else bench.IO_FS)
    table = report.bench_markdown(data)
    show_and_save(data, table)
    for m in data["modes"]:
        if m["status"] != Status.OK:
            say(f"bench: mode {m['name']} {m['status']}: {m['reason']}")
    for p in (data["io"] or {}).get("modes", []):
        if p["status"] != Status.OK:
            say(f"bench: file I/O run {p['name']} {p['status']}: {p['reason']}")
    return bench.exit_status(data)


def cmd_bench_apps(a):
    """Debian's applications in both modes (see apps.py): specs, one boot
    per configuration, combine, render, save."""
    wrong = [o for o, v in (("--only", a.only), ("--no-io", a.no_io),
                            ("--no-pathlen", a.no_pathlen)) if v]
    if wrong:
        raise KmlError(f"{', '.join(wrong)}: options of the latency benchmark; "
                       "--apps runs only the applications")
    configs = [c for c in apps.CONFIGS if c.name in (a.config or apps.DEFAULT_CONFIGS)]
    systems = {c.system for c in configs}
    if len(systems) > 1:
        raise KmlError("--config: the Debian system's configuration boots another image; "
                       "run it on its own (--config "
                       + " --config ".join(c.name for c in configs if c.system) + ")")
    sysname = systems.pop()
    runner, adds, prelude = None, None, apps.PRELUDE
    if sysname:
        setup.setup(quiet=True)
        initramfs.build_guest_programs()        # kml-apps
        runner = functools.partial(system.boot, deb=a.deb or system.current_deb())
        adds, prelude = apps.system_adds(), apps.SYSTEM_PRELUDE
    else:
        if a.deb:
            raise KmlError("--deb: the kernel package of the Debian system's configuration")
        build_all()
    expect = apps.write_manifest()
    if not expect:
        raise KmlError(f"the kernel source has no file named {apps.FIND_NAME} for find")
    rounds = a.rounds or (1 if a.quick else apps.ROUNDS)
    sizes = apps.QUICK if a.quick else apps.FULL
    specs = apps.specs(configs, rounds, sizes, expect)
    adds = adds or apps.adds()
    say(f"applications: {', '.join(apps.APP_NAMES)}; {rounds} round(s) in each of "
        f"{len(configs)} boot(s) ({', '.join(c.name for c in configs)})")
    vm = dict(vm_options(a), smp=a.smp or APPS_SMP)
    vm["accel"] = vm["accel"] or qemu.choose_accel()
    out = guestrun.boot(specs, prelude, adds=adds, runner=runner, **vm)
    data = apps.combine(configs, rounds, sizes, expect, out.runs, vm["accel"])
    table = report.apps_markdown(data)
    show_and_save(data, table, "apps-")
    if out.failed:
        say(f"bench --apps FAILED: {out.failed.failure}")
        return out.failed.code
    return apps.exit_status(data)


def cmd_kstack_bench(a):
    """kml-ubench in a boot without, one with dynamic_kstacks=on and one with
    dynamic_kstacks=reclaim (see
    kstackbench.py): specs, boots, combine, render, save."""
    kstackbench.check_append(a.append)          # before building: a clear error
    build_all()
    out = guestrun.boot(kstackbench.specs(a.quick, a.threads), **vm_options(a))
    if out.failed:
        say(f"kstack-bench FAILED: {out.failed.failure}")
        return out.failed.code
    docs = kstackbench.boot_docs(out.runs)
    data = kstackbench.combine(docs, {s.name: b.append for b in out.boots for s in b.specs})
    table = report.kstack_markdown(data)
    show_and_save(data, table, "kstack-")
    return 0


def cmd_appliance(a):
    """The appliance image against the normal one (see appliance.py)."""
    if re.search(r"(^|\s)kml(=|\.appliance=)", a.append):
        raise KmlError("--append: appliance sets kml=all and kml.appliance= itself")
    build_all()
    data = appliance.measure(appliance.SERVICES[a.service], a.rounds, vm_options(a))
    show_and_save(data, appliance.markdown(data), "appliance-")
    return appliance.exit_status(data)


def cmd_soak(a):
    """stress-ng and trinity in every configuration (see soak.py): plan,
    specs, boots, combine, render, save."""
    p = soak.plan(a.short, a.config, a.stressor_timeout, a.calls, a.seed)
    build_all()
    members = {c: soak.class_members(c) for c in soak.CLASSES}
    specs = soak.specs(p, members)
    say(f"soak: {len(p.configs)} boot(s) ({', '.join(c.name for c in p.configs)}); "
        f"stress-ng {p.stressor_timeout} s per stressor and mode, trinity {p.calls} calls")
    vm = vm_options(a)
    out = guestrun.boot(specs, soak.PRELUDE, adds=soak.adds(), **vm)
    data = soak.combine(p, members, out)
    table = soak.markdown(data)
    show_and_save(data, table, "soak-")
    if out.failed:
        say(f"soak FAILED: {out.failed.failure}")
        return out.failed.code
    if data["status"] is not Status.OK:
        say("soak FAILED: " + "; ".join(p for c in data["configs"] for p in c["problems"])[:2000])
        return 1
    say("soak: clean")
    return 0


def cmd_verify(a):
    return verify_main(a.args[1:] if a.args[:1] == ["--"] else a.args)


def cmd_pathlen(a):
    """kml-pathlen in three modes, in a boot with pti=off and one with
    pti=on, counted by a gdb hook (see pathlen.py): specs, boots, combine,
    render, save.  KML_NO_KERNEL_BUILD=1: the kernel as it is."""
    only = a.only.split(",") if a.only else (["getppid"] if a.quick else None)
    if a.long:
        only = list(dict.fromkeys((only or list(pathlen.DEFAULT_OPS)) + list(pathlen.LONG_OPS)))
    if only:
        pathlen.check_only(only)
    pathlen.check_append(a.append)
    pathlen.check_cpu(a.cpu)
    if a.mode:
        pathlen.check_modes(a.mode.split(","))
    if os.environ.get("KML_NO_KERNEL_BUILD") == "1":
        initramfs.build_initramfs()
    else:
        build_all([a.kernel or "default"])
    return run_pathlen(a, only, a.samples or (3 if a.quick else pathlen.DEFAULT_SAMPLES),
                       a.smp)


def main(argv):
    a = build_parser().parse_args(argv)
    try:
        if a.cmd == "setup":
            setup.setup()
            return 0
        if a.cmd == "build":
            build_all([a.kernel or "default"])
            return 0
        if a.cmd == "run":
            return cmd_run(a)
        if a.cmd == "package":
            package.build_package(a.kernel)
            return 0
        if a.cmd == "test":
            return cmd_test(a)
        if a.cmd == "bench" and a.apps:
            return cmd_bench_apps(a)
        if a.cmd in ("bench", "demo"):
            return cmd_bench(a, demo=a.cmd == "demo")
        if a.cmd == "kstack-bench":
            return cmd_kstack_bench(a)
        if a.cmd == "soak":
            return cmd_soak(a)
        if a.cmd == "appliance":
            return cmd_appliance(a)
        if a.cmd == "patches":
            if a.pcmd == "apply":
                setup.setup(quiet=True)
                patches.create_tree()
            elif a.pcmd == "check":
                setup.setup(quiet=True)
                return patches.checkpatch(patches.ensure_tree())
            else:
                patches.export_series(tree=Path(a.tree).resolve() if a.tree else None)
            return 0
        if a.cmd == "verify":
            return cmd_verify(a)
        if a.cmd == "pathlen":
            return cmd_pathlen(a)
    except KmlError as e:
        say(f"error: {e}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    return 2
