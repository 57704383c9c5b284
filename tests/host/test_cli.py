"""Unit tests: ./kml argument handling and errors that must not boot a VM."""
import subprocess
import sys

import pytest

from conftest import ROOT
from kmltool import cli, initramfs, qemu
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
    ["test", "--config", "smp3"],
    ["frobnicate"],
])
def test_bad_arguments_are_usage_errors(argv):
    p = kml(*argv)
    assert p.returncode == 2
    assert "error:" in p.stderr


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
    argv, adds = cli.kernel_mode_argv(["kml-probe", "info"])
    assert adds == [] and argv[:2] == ["sh", "-c"] and argv[3:] == ["kml-probe", "info"]


def test_kernel_mode_argv_host_file(tmp_path):
    prog = tmp_path / "tool"
    prog.write_text("x")
    argv, adds = cli.kernel_mode_argv([str(prog), "-v"])
    assert argv == ["/trusted/tool", "-v"]
    assert adds == [f"{prog}:/trusted/tool"]


def test_kernel_mode_argv_missing_relative_host_file():
    with pytest.raises(KmlError, match="no such host file"):
        cli.kernel_mode_argv(["./nonexistent/tool"])
