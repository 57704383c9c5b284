"""The Debian system (./kml run --system debian): Debian 12 with systemd
as PID 1, installed on an NVMe disk with root on LVM and booted through
UEFI firmware and GRUB, the kml kernel package installed with apt.
Selected by ./kml test --system debian (conftest: --kml-system), which
builds the package first; docs/debian-system.md.

One boot runs guest/system/system-tests, which checks the boot, runs the
administrator's path (guest/system/admin-redis.sh, the script README and
docs/kernel-mode.md quote) and starts transient units with and without
the settings that keep a service in user mode; every test below reads
its "== kml-check NAME: VALUE" lines.
"""
import re
import subprocess

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.vm, pytest.mark.debian_system]
SYSTEM = ROOT / "guest" / "system"
RELEASE = re.compile(r"6\.12\.\d+-kml-cloud")


def kml(*args, timeout=900):
    return subprocess.run([str(ROOT / "kml"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


_boot = {}


def boot():
    """The one boot running system-tests: (CompletedProcess, {check: value})."""
    if not _boot:
        p = kml("run", "--system", "debian", "--timeout", "800",
                "--add", f"{SYSTEM / 'admin-redis.sh'}:/root/",
                "--add", f"{SYSTEM / 'system-tests'}:/root/",
                "--", "sh", "/root/system-tests", "/root/admin-redis.sh")
        checks = dict(m.groups() for m in
                      re.finditer(r"^== kml-check (\S+): ?(.*)$", p.stdout, re.M))
        _boot.update(p=p, checks=checks)
    return _boot["p"], _boot["checks"]


def check(name):
    p, checks = boot()
    assert name in checks, (f"no check {name} (exit status {p.returncode}); "
                            f"output:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return checks[name]


def test_system_boot_is_clean():
    p, checks = boot()
    assert p.returncode == 0, f"{p.stderr[-3000:]}\n{p.stdout[-3000:]}"
    assert "run FAILED" not in p.stderr, p.stderr


def test_package_installed_and_booted():
    kernel = check("kernel")
    assert RELEASE.fullmatch(kernel), kernel
    pkg = check("package").split()
    assert pkg[0] == f"linux-image-{kernel}" and pkg[-1] == "ii", pkg
    assert "+kml." in pkg[1], pkg


def test_debian_tools_made_an_initramfs_and_it_boots():
    assert check("initramfs") == f"/boot/initrd.img-{check('kernel')}"


def test_booted_like_an_installed_machine():
    """OVMF, GRUB from the EFI system partition, root on LVM on NVMe,
    /boot and /boot/efi as Debian's installer makes them."""
    assert check("firmware") == "uefi"
    assert check("boot-image") == f"/vmlinuz-{check('kernel')}"     # GRUB's entry
    assert check("root-source") == "/dev/mapper/kml--vg-root"
    assert check("root-pv") == "/dev/nvme0n1p3"
    assert check("boot-fs") == "ext4 vfat"


def test_storage_modules_came_from_the_initramfs():
    """device-mapper is a module of the cloud flavour: the initramfs
    carried it and loaded it before the root file system was mounted."""
    assert int(check("initramfs-dm")) == 1
    assert "dm_mod" in check("modules").split()


def test_grub_keeps_debians_kernel_as_fallback():
    kernels = check("grub-kernels").split()
    assert f"vmlinuz-{check('kernel')}" in kernels
    assert any(re.fullmatch(r"vmlinuz-6\.1\.0-\d+-cloud-amd64", k) for k in kernels), kernels


def test_network_on_virtio_net():
    assert "virtio_net" in check("modules").split()
    assert re.fullmatch(r"en\w+ 10\.0\.2\.15/24", check("network")), check("network")


def test_multi_user_reached_with_no_failed_unit():
    assert check("default-target-active") == "active"
    assert check("failed-units").strip() == ""
    assert check("system-state") == "running"


def test_journal_shows_kmls_boot_lines():
    p, _ = boot()
    assert int(check("kml-boot-lines")) >= 2
    lines = re.findall(r"^== kml-boot-line: (.*)$", p.stdout, re.M)
    assert "kml: kernel-mode IDT ready" in lines, lines
    assert any(x.startswith("kml: kernel-mode processes enabled for /trusted") for x in lines)


def test_redis_runs_in_user_mode_before_the_administrator_acts():
    assert check("redis-before") == "0"


def test_admin_path_runs_redis_in_kernel_mode():
    assert check("admin-exit") == "0"
    assert check("redis-admin") == "1"
    assert check("redis-ping") == "PONG"
    assert check("redis-benchmark") == "2"      # SET and GET answered


def test_redis_survives_restart_in_kernel_mode():
    assert check("redis-restarted") == "new-pid"
    assert check("redis-restart") == "1"
    assert check("redis-restart-benchmark") == "2"
    assert check("redis-active") == "active"


# transient units running /trusted/sleep: KernelMode expected
UNITS = {
    "plain": "1",                   # root: CAP_SYS_RAWIO
    "private-mounts": "1",          # PrivateTmp, ProtectSystem=strict, ...: a copy
    "group-member": "1",            # User=redis, in kernel.kml_group's group
    "not-member": "0",              # User=nobody
    "other-binary-bound": "0",      # BindReadOnlyPaths=/usr/bin/sleep:/trusted/sleep
    "other-dir-bound": "0",         # BindReadOnlyPaths=/usr/bin:/trusted
    "no-new-privileges": "0",       # NoNewPrivileges=yes
    "seccomp": "0",                 # SystemCallFilter=@system-service
    "private-users": "0",           # PrivateUsers=yes: not the initial user namespace
}


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_unit_namespaces_and_confinement(unit):
    assert check("units-done") == "yes"
    assert check(f"unit-{unit}") == UNITS[unit]


def test_run_system_passes_exit_status_and_streams_output():
    p = kml("run", "--system", "debian", "--smp", "1", "--", "sh", "-c",
            "echo out; echo err >&2; exit 7", timeout=600)
    assert p.returncode == 7, p.stderr
    assert p.stdout == "out\nerr\n"


def test_bench_apps_runs_on_the_debian_system():
    """./kml bench --apps --config debian-pti-off: Debian's programs of the
    image, under systemd, as ordinary processes and from /trusted (kml-modes
    checks each server's KernelMode)."""
    p = kml("bench", "--apps", "--quick", "--config", "debian-pti-off", timeout=900)
    assert p.returncode == 0, f"{p.stderr[-3000:]}\n{p.stdout[-3000:]}"
    for app in ("redis", "nginx", "iperf3", "find"):
        row = re.search(rf"^\| {app} \|.*\| debian-pti-off \| ([0-9.]+) \| ([0-9.]+) \|",
                        p.stdout, re.M)
        assert row, f"{app}: no result in both modes:\n{p.stdout[-3000:]}"
    assert "kernel 6.12." in p.stdout and "-kml-cloud" in p.stdout
