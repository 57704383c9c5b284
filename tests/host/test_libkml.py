"""Host tests of libkml and of the guest programs that use it, in user mode
on the development machine (not a kml kernel: no __vdso_kml_syscall, so
libkml must fall back to the `syscall` instruction).  They build the guest
programs into a temporary directory; the kernel tree (for kselftest_harness.h
and nolibc) must exist: ./kml patches apply."""
import os
import re
import subprocess
from dataclasses import replace

import pytest

from conftest import ROOT
from kmltool import bench, guestrun, paths, report

KSFT = paths.TREE / "tools" / "testing" / "selftests"
NOLIBC = paths.TREE / "tools" / "include" / "nolibc"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    if not (KSFT / "kselftest_harness.h").exists() or not (NOLIBC / "nolibc.h").exists():
        pytest.skip(f"no kernel tree at {paths.TREE}: run ./kml patches apply")
    o = tmp_path_factory.mktemp("guest")
    targets = [f"{o}/libkml/libkml.a", f"{o}/tests/syscall", f"{o}/kml-bench",
               f"{o}/kml-callpath-demo", f"{o}/tests/klib", f"{o}/kml-ps", f"{o}/kml-udp"]
    p = subprocess.run(["make", "-s", "-C", str(ROOT / "guest"), f"O={o}", f"KSFT={KSFT}",
                        f"-j{os.cpu_count() or 1}", *targets],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return o


def test_libkml_archive_members(out):
    p = subprocess.run(["ar", "t", str(out / "libkml" / "libkml.a")],
                       capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["syscall.o", "vdso.o", "auxv.o", "errno.o",
                                "kfunc.o", "kfunc_call.o", "kread.o", "ksym.o",
                                "klib_err.o", "btf.o"]
    # the core must not need a C library (it goes into nolibc programs)
    for member in ("syscall.o", "vdso.o"):
        nm = subprocess.run(["nm", "-u", str(out / "libkml" / member)],
                            capture_output=True, text=True, check=True)
        undefined = set(nm.stdout.split()) - {"U"}
        assert undefined <= {"kml__resolve", "kml__entry", "kml__sysinfo_ehdr",
                             "kml_vdso_sym", "kml_kernel_mode"}, (member, undefined)
    # only the BTF member of the kernel library needs libbpf
    for member in ("kfunc.o", "kread.o", "ksym.o", "klib_err.o", "btf.o"):
        nm = subprocess.run(["nm", "-u", str(out / "libkml" / member)],
                            capture_output=True, text=True, check=True)
        bpf = {s for s in nm.stdout.split() if s.startswith(("btf", "libbpf", "bpf_"))}
        assert bool(bpf) == (member == "btf.o"), (member, bpf)


def test_kernelcall_links_without_libbpf(out, tmp_path):
    """A program that calls kernel functions by name but uses no BTF links
    with libkml.a alone, and is refused politely in user mode."""
    src = tmp_path / "kc.c"
    src.write_text('#include <stdio.h>\n#include "kml_klib.h"\n'
                   'int main(void) { int h = kml_kfunc_open("strlen");'
                   ' printf("%d %s\\n", h, kml_kfunc_strerror(h)); return 0; }\n')
    prog = tmp_path / "kc"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-static",
                    f"-I{ROOT / 'guest' / 'libkml'}", "-o", str(prog), str(src),
                    str(out / "libkml" / "libkml.a")], check=True)
    p = subprocess.run([str(prog)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    # user mode: a stock kernel says EINVAL (no such arch_prctl), kml EPERM
    assert re.fullmatch(r"-(1|22) refused: .*\n", p.stdout), p.stdout


def test_klib_tests_in_user_mode_on_the_host(out):
    """Parsers and BTF on the host's kernel; what needs a kml guest skips."""
    p = subprocess.run([str(out / "tests" / "klib")], capture_output=True, text=True,
                       timeout=240, cwd=out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "not ok" not in p.stdout
    assert re.search(r"^ok \d+ global\.kallsyms_parser_rules$", p.stdout, re.M)


def test_kernel_library_programs_refuse_user_mode(out):
    for prog in ("kml-ps", "kml-udp"):
        p = subprocess.run([str(out / prog)], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2, (prog, p.stdout, p.stderr)
        assert "not running in kernel mode" in p.stderr, (prog, p.stderr)


def test_syscall_tests_pass_in_user_mode_on_the_host(out):
    p = subprocess.run([str(out / "tests" / "syscall")], capture_output=True, text=True,
                       timeout=240, cwd=out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "not ok" not in p.stdout
    assert re.search(r"^ok \d+ global\.same_results_on_every_path$", p.stdout, re.M)
    assert re.search(r"^ok \d+ global\.registers_preserved$", p.stdout, re.M)


def test_callpath_demo_is_freestanding_and_falls_back(out):
    demo = out / "kml-callpath-demo"
    p = subprocess.run([str(demo)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert re.fullmatch(r"cpl=3 call_path=0 vdso_kml_syscall=[01]", lines[0])
    assert re.fullmatch(rf"getpid=\d+ getppid={os.getpid()} uname=Linux \S+", lines[1]), \
        lines[1]
    assert lines[2] == 'pipe: wrote 5, read 5 "hello"'
    # no C library, and one `syscall` instruction: libkml's fallback
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(demo)],
                         capture_output=True, text=True, check=True).stdout
    fn, where = None, []
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\S+)>:$", line)
        if m:
            fn = m.group(1)
        elif re.search(r"\ssyscall\s*$", line):
            where.append(fn)
    assert where == ["kml_syscall6"], where
    nm = subprocess.run(["nm", str(demo)], capture_output=True, text=True, check=True).stdout
    assert "__libc_start_main" not in nm
    # the vDSO address comes from kml_nolibc.h, not libkml's getauxval() member
    assert re.search(r"^[0-9a-f]+ W kml__sysinfo_ehdr$", nm, re.M), nm


def test_kml_bench_refuses_modes_it_cannot_measure(out):
    prog = str(out / "kml-bench")
    p = subprocess.run([prog, "--path", "call"], capture_output=True, text=True)
    assert p.returncode == 3
    assert "the call path is not available here: this process runs in user mode" in p.stderr
    p = subprocess.run([prog, "--expect-mode", "kernel"], capture_output=True, text=True)
    assert p.returncode == 3 and "runs at CPL 3" in p.stderr
    for bad in (["--path", "fast"], ["--expect-mode", "root"]):
        p = subprocess.run([prog, *bad], capture_output=True, text=True)
        assert p.returncode == 2 and "invalid" in p.stderr and bad[1] in p.stderr
    assert "getppid" in bench.bench_rows(prog)


def test_kml_bench_modes_end_to_end_on_the_host(out, tmp_path):
    """The real guest script and kml-bench, here: user mode measures, the
    two kernel modes are reported unavailable (this is no kml guest)."""
    (tmp_path / "trusted").mkdir()
    specs = [replace(s, program=str(out / "kml-bench"))
             for s in bench.specs(["--runs", "1", "--run-ms", "2",
                                   "--only", "getppid,sig_deliver,call"])]
    env = dict(os.environ, KML_TRUSTED=str(tmp_path / "trusted"),
               PATH=f"{ROOT / 'guest'}:{os.environ['PATH']}")
    p = subprocess.run(["sh", "-c", guestrun.script(specs, tmp=str(tmp_path))],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    d = bench.combine(guestrun.parse(p.stdout))
    assert [m["status"] for m in d["modes"]] == ["ok", "unavailable", "unavailable"]
    user = d["modes"][0]["result"]
    assert user["schema"] == "kml-bench/2" and user["cpl"] == 3
    assert user["path"] == "syscall" and user["call_path"] is False
    paths_ = {r["name"]: r["path"] for r in user["rows"]}
    assert paths_ == {"call": "none", "getppid": "syscall", "sig_deliver": "syscall"}
    assert [lay["title"] for lay in user["layouts"]] == [
        "KML paper Table 2 layout", "Usermode-kernel thesis Table 6.1 layout"]
    md = report.bench_markdown(d)
    assert "| Null syscall: getppid |" in md and "**unavailable**" in md
    assert bench.exit_status(d) == 0

