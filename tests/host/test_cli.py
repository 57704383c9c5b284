"""Unit tests: ./kml argument handling and errors that must not boot a VM."""
import subprocess
import sys

import pytest

from conftest import ROOT
from kmltool import cli, initramfs, qemu
from kmltool.commands.run import kernel_mode_argv
from kmltool.paths import KmlError


def parse(*argv):
    return cli.build_parser().parse_args(list(argv))


def kml(*args):
    return subprocess.run([str(ROOT / "kml"), *args],
                          capture_output=True, text=True, timeout=60)


def test_run_options_and_command():
    a = parse("run", "--smp", "1", "--mem", "512M", "--append", "pti=off",
              "--add", "/bin/true", "--add", "/bin/false:/x/y", "--timeout", "9",
              "--", "sh", "-c", "exit 7")
    assert (a.smp, a.mem, a.append, a.timeout) == (1, "512M", "pti=off", 9)
    assert a.add == ["/bin/true", "/bin/false:/x/y"]
    assert a.argv == ["--", "sh", "-c", "exit 7"]


def test_run_command_may_start_with_dashes():
    a = parse("run", "--", "ls", "--all")
    assert a.argv == ["--", "ls", "--all"]


@pytest.mark.parametrize("argv", [
    ["run", "--smp", "0", "--", "true"],
    ["run", "--smp", "9", "--", "true"],
    ["run", "--smp", "two", "--", "true"],
    ["run", "--mem", "lots", "--", "true"],
    ["run", "--mem", "64M", "--", "true"],
    ["run", "--timeout", "-1", "--", "true"],
    ["bench", "--accel", "hvf"],
    ["run", "--disk", "8", "--disk-fs", "xfs", "--", "true"],
    ["test", "--config", "smp3"],
    ["bench", "--apps", "--config", "pti-maybe"],
    ["bench", "--apps", "--rounds", "0"],
    ["demo", "--apps"],
    ["apps", "--config", "pti-maybe"],
    ["apps", "--only", "getppid"],
    ["frobnicate"],
])
def test_bad_arguments_are_usage_errors(argv):
    p = kml(*argv)
    assert p.returncode == 2
    assert "error:" in p.stderr


@pytest.mark.parametrize("argv, why", [
    (["bench", "--apps", "--only", "getppid"], "--only: options of the latency benchmark"),
    (["bench", "--apps", "--no-io", "--no-pathlen"], "--no-io, --no-pathlen: options of"),
    (["bench", "--rounds", "2"], "--rounds: options of --apps"),
    (["bench", "--config", "pti-on", "--no-pathlen"], "--config: options of --apps"),
    (["apps", "--deb", "x.deb"], "--deb: the kernel package of the Debian system's"),
    (["apps", "--config", "pti-on", "--config", "debian-pti-off"],
     "run it on its own (--config debian-pti-off)"),
    (["apps", "--append", "kml=off"], "the pti-off-appliance boot of apps sets kml=all"),
])
def test_bench_apps_options_are_checked_before_anything_runs(argv, why):
    p = kml(*argv)
    assert p.returncode == 1 and why in p.stderr, p.stderr


def test_run_without_command_is_an_error():
    p = kml("run", "--")
    assert p.returncode == 1
    assert "no command given" in p.stderr


def test_run_add_missing_file_fails_before_boot():
    p = kml("run", "--add", "/nonexistent/file", "--", "true")
    assert p.returncode == 1
    assert "/nonexistent/file" in p.stderr


def test_parse_add():
    assert initramfs.parse_add("/a/b") == ("/a/b", "/root/b")
    assert initramfs.parse_add("/a/b:/usr/bin/") == ("/a/b", "/usr/bin/b")
    assert initramfs.parse_add("/a/b:/opt/c") == ("/a/b", "/opt/c")
    with pytest.raises(KmlError):
        initramfs.parse_add("/a/b:rel/path")
    with pytest.raises(KmlError):
        initramfs.parse_add(":/x")


def test_verdicts(tmp_path):
    r = qemu.Result(tmp_path)
    assert r.exit_code() == qemu.EXIT_VM_FAILURE and "no exit status" in r.verdict()
    r.status = 7
    assert r.exit_code() == 7 and r.verdict() is None
    r.problems = [("Oops", 3, "Oops: 0002 [#1] SMP")]
    assert r.exit_code() == qemu.EXIT_VM_FAILURE
    assert "Oops" in r.verdict() and str(tmp_path / "console.log") in r.verdict()
    r.timed_out = True
    assert r.exit_code() == qemu.EXIT_TIMEOUT and "timeout" in r.verdict()


def test_kernel_mode_argv_guest_program():
    argv, adds = kernel_mode_argv(["kml-probe", "info"])
    assert adds == [] and argv == ["kml-modes", "kml-probe", "kernel", "kml-probe", "info"]


def test_kernel_mode_argv_host_file(tmp_path):
    prog = tmp_path / "my tool"
    prog.write_text("x")
    argv, adds = kernel_mode_argv([str(prog), "-v"])
    assert argv == ["kml-modes", "my_tool", "kernel", "/root/my tool", "-v"]
    assert adds == [f"{prog}:/root/my tool"]


def test_kernel_mode_argv_missing_relative_host_file():
    with pytest.raises(KmlError, match="no such host file"):
        kernel_mode_argv(["./nonexistent/tool"])


def test_run_disk_fs_needs_disk():
    p = kml("run", "--disk-fs", "ext4", "--", "true")
    assert p.returncode == 1
    assert "--disk-fs ext4 needs --disk MIB" in p.stderr


def test_bench_io_options():
    a = parse("bench", "--quick", "--only", "getppid", "--no-io")
    assert (a.quick, a.only, a.no_io) == (True, "getppid", True)
    assert parse("demo").no_io is False


def test_bench_and_demo_lead_with_pathlen():
    assert parse("demo").no_pathlen is False
    assert parse("bench", "--no-pathlen").no_pathlen is True
    assert (parse("soak").mem, parse("bench").mem) == ("2G", "1G")
    # pathlen boots with pti=off and pti=on itself: refused before building
    p = kml("bench", "--append", "pti=on")
    assert p.returncode == 1
    assert "sets pti=off itself" in p.stderr and "--no-pathlen" in p.stderr


def test_make_disk_ext4_and_empty(tmp_path):
    img = qemu.make_disk(tmp_path / "ext4.img", 8, "ext4")
    assert img.stat().st_size == 8 << 20
    with open(img, "rb") as f:
        f.seek(1024 + 56)               # the superblock's s_magic
        assert f.read(2) == b"\x53\xef"
        f.seek(1024 + 120)              # s_volume_name
        assert f.read(4) == b"kml\0"
    empty = qemu.make_disk(tmp_path / "empty.img", 1)
    assert empty.read_bytes() == bytes(1 << 20)


def test_mkfs_errors(tmp_path, monkeypatch):
    with pytest.raises(KmlError, match="disk file system 'xfs': only ext4"):
        qemu.find_mkfs("xfs")
    monkeypatch.setattr(qemu.shutil, "which", lambda *a, **k: None)
    with pytest.raises(KmlError, match=r"mkfs.ext4 not found: run ./kml setup \(installs "
                                       "e2fsprogs\\)"):
        qemu.make_disk(tmp_path / "x.img", 8, "ext4")
    assert not (tmp_path / "x.img").exists()


def test_mkfs_failure_is_reported_and_cleans_up(tmp_path, monkeypatch):
    monkeypatch.setattr(qemu, "find_mkfs", lambda fs: "/bin/false")
    with pytest.raises(KmlError, match="failed \\(exit status 1\\)"):
        qemu.make_disk(tmp_path / "x.img", 8, "ext4")
    assert not (tmp_path / "x.img").exists()
