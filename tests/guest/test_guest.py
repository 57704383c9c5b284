"""Guest tests: every TEST() of guest/tests/*.c, and of the kernel
selftests the guest image installs with them (KSFT_TESTS in
guest/Makefile: tools/testing/selftests/x86/kml_NAME.c in the kernel
tree), is one pytest case per VM configuration.  Each configuration boots once and runs all guest test
programs; a test that is in the source but missing from the output fails.
"""
import json
import re
import subprocess
import sys
import time
import warnings

import pytest

from conftest import ROOT, kml_configs
from kmltool import kbuild, paths, qemu, tap
from kmltool.configs import TESTS

GUEST_TESTS = ROOT / "guest" / "tests"
# The kernel tree's selftests (there once ./kml build has made the tree;
# without it their cases are not generated, and no VM could boot anyway)
KSFT_X86 = paths.TREE / "tools" / "testing" / "selftests" / "x86"
GUEST_MEM, GUEST_DISK_MIB = "512M", 768
pytestmark = pytest.mark.vm


def dual_mode_programs():
    """Programs guest/run-tests also runs from /trusted (as NAME@kernel)."""
    m = re.search(r'^dual="([^"]*)"', (ROOT / "guest" / "run-tests").read_text(), re.M)
    return set(m.group(1).split()) if m else set()


def guest_test_sources():
    """{program: source file} of the guest test programs: guest/tests/NAME.c,
    and kml_NAME.c of the kernel tree's selftests for each NAME guest/Makefile
    installs from there (KSFT_TESTS) where the tree has it."""
    srcs = {src.stem: src for src in GUEST_TESTS.glob("*.c")}
    m = re.search(r"^KSFT_TESTS := \$\(addprefix \$\(O\)/tests/,([^)]*)\)",
                  (ROOT / "guest" / "Makefile").read_text(), re.M)
    for name in m.group(1).split() if m else []:
        src = KSFT_X86 / f"kml_{name}.c"
        if src.exists():
            srcs[name] = src
    return dict(sorted(srcs.items()))


def declared_tests():
    """(program, harness name) for every test declared in the guest test
    programs (guest_test_sources()); dual-mode programs are listed twice,
    as NAME and NAME@kernel."""
    out = []
    dual = dual_mode_programs()
    for prog, src in guest_test_sources().items():
        text = src.read_text()
        for m in re.finditer(r"^\s*(TEST|TEST_SIGNAL|TEST_F|TEST_F_SIGNAL|TEST_F_TIMEOUT)"
                             r"\(\s*(\w+)\s*,?\s*(\w*)", text, re.M):
            kind, a, b = m.groups()
            name = f"global.{a}" if kind in ("TEST", "TEST_SIGNAL") else f"{a}.{b}"
            out.append((prog, name))
            if prog in dual:
                out.append((prog + "@kernel", name))
    return out


_boots = {}
_consoles = {}


def boot_results(config):
    """Boot one VM for config, run all guest tests; cached per session."""
    if config not in _boots:
        c = TESTS[config]
        smp, append, kernel = c.smp, c.append, c.kernel
        # pytest holds the output of tests; the boot takes minutes
        t = time.monotonic()
        print(f"\nkml: {config}: one boot runs every guest test program (minutes under "
              "TCG)", file=sys.__stderr__, flush=True)
        # A disk larger than RAM for the paging test (kml_process.c)
        res = qemu.boot(["run-tests"], smp=smp, mem=GUEST_MEM, append=append,
                        timeout=1500, stream=False, disk_mib=GUEST_DISK_MIB,
                        kernel=kbuild.kernel(kernel))
        print(f"kml: {config}: the guest tests' boot took {time.monotonic() - t:.0f} s",
              file=sys.__stderr__, flush=True)
        for first in res.crashed_before:
            warnings.warn(f"{config}: {first.verdict()}; booted once more")
        _boots[config] = (res, tap.parse_runs(res.output.decode(errors="replace")))
        # build/runs keeps only the latest runs: other boots may remove it
        _consoles[config] = res.console_log.read_text(errors="replace")
    return _boots[config]


def pytest_generate_tests(metafunc):
    if "guest_test" in metafunc.fixturenames:
        cases = [(c, prog, name) for c in kml_configs(metafunc.config)
                 for prog, name in declared_tests()]
        metafunc.parametrize("config,prog,guest_test", cases,
                             ids=[f"{c}:{p}:{n}" for c, p, n in cases])
    elif "config" in metafunc.fixturenames:
        names = kml_configs(metafunc.config)
        metafunc.parametrize("config", names, ids=names)


def test_guest(config, prog, guest_test):
    res, runs = boot_results(config)
    assert prog in runs, (f"{prog} produced no output (VM verdict: {res.verdict()}); "
                          f"output: {res.output_log}")
    run = runs[prog]
    assert guest_test in run.results, (
        f"{prog}: no result for {guest_test}; output: {res.output_log}")
    verdict, detail = run.results[guest_test]
    if verdict == "skip":
        pytest.skip(detail)
    assert verdict == "pass", f"{prog}: {guest_test} failed:\n{detail}"


def test_console_clean_after_guest_tests(config):
    res, runs = boot_results(config)
    assert res.verdict() is None, res.verdict()
    assert res.status == 0, (f"run-tests exited {res.status}; failing programs: "
                             f"{[p for p, r in runs.items() if r.exit != 0]}")


# Kernel options with which every entry must do work that no thread flag
# announces: kernel-mode system calls keep the generic path there
# (kml_bypass_possible() in arch/x86/kernel/kml.c)
BYPASS_BLOCKERS = ("CONFIG_DEBUG_ENTRY", "CONFIG_LOCKDEP", "CONFIG_KMSAN", "CONFIG_DEBUG_RSEQ")


def test_bypass_offered_unless_the_configuration_needs_the_generic_path(config):
    """Debian's configuration (X86_DEBUG_FPU, context tracking built in,
    random stack offsets, IBRS_ENTRY) offers the bypass; only the entry
    debugging options and a boot with nohz_full= refuse it, and then the
    boot log says why."""
    c = TESTS[config]
    smp, append, kernel = c.smp, c.append, c.kernel
    cfg = kbuild.parse_config(kbuild.kernel(kernel).obj / ".config")
    blocked = [o for o in BYPASS_BLOCKERS if cfg.get(o) == "y"]
    if re.search(r"(^|\s)nohz_full=", append):
        blocked.append("nohz_full=")
    res, runs = boot_results(config)
    log = _consoles[config]
    refused = re.search(r"kml: system call bypass not available: (.*)", log)
    if blocked:
        assert refused, f"{config}: {blocked} set, but the boot log does not refuse the bypass"
        return
    assert not refused, f"{config}: bypass refused: {refused.group(1)}"
    run = runs.get("syscall@kernel")
    assert run, f"syscall@kernel produced no output: {res.output_log}"
    verdict, detail = run.results["fast.bypass_leaves_out_what_it_must"]
    assert verdict == "pass", f"{config}: {verdict}: {detail}"


_nohz_booted = set()


def test_nohz_full_keeps_kernel_mode_system_calls_on_the_generic_path(config):
    """With context tracking on (a nohz_full= CPU), every entry must tell
    RCU and the tick: the bypass is refused, the sysctl stops at 1, and a
    kernel-mode program still runs on the tickless CPU.  Once per kernel
    that has NO_HZ_FULL (Debian's)."""
    c = TESTS[config]
    smp, append, kernel = c.smp, c.append, c.kernel
    k = kbuild.kernel(kernel)
    if kbuild.parse_config(k.obj / ".config").get("CONFIG_NO_HZ_FULL") != "y":
        pytest.skip(f"the {kernel} kernel is built without NO_HZ_FULL")
    if kernel in _nohz_booted:
        pytest.skip(f"booted once for the {kernel} kernel")
    _nohz_booted.add(kernel)
    script = ("echo nohz_full=$(cat /sys/devices/system/cpu/nohz_full); "
              "echo path=$(cat /proc/sys/kernel/kml_syscall_path); "
              "(echo bypass > /proc/sys/kernel/kml_syscall_path) 2>/dev/null || echo refused; "
              "taskset -c 1 kml-modes probe kernel /usr/lib/kml/kml-probe info")
    res = qemu.boot(["sh", "-c", script], smp=2, append=f"{append} nohz_full=1",
                    timeout=300, stream=False, kernel=k)
    out = res.output.decode(errors="replace")
    console = res.console_log.read_text(errors="replace")
    assert res.verdict() is None, res.verdict()
    assert "kml: system call bypass not available: context tracking (nohz_full) is on" in console
    assert "nohz_full=1" in out and "path=generic" in out and "refused" in out, out[-2000:]
    assert "cpl=0 secure=1 kernelmode=1" in out, out[-2000:]


def kml(*args, timeout=600):
    return subprocess.run([str(ROOT / "kml"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_run_uname_prints_kml_release():
    p = kml("run", "--", "uname", "-r")
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"6\.12\.\d+-kml\n", p.stdout), p.stdout


def test_run_passes_exit_status():
    p = kml("run", "--smp", "1", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert p.returncode == 7, p.stderr
    assert p.stdout == "out\nerr\n"


def test_run_add_copies_dynamic_program_and_libraries(tmp_path):
    prog = tmp_path / "hello-added"
    src = tmp_path / "h.c"
    src.write_text('#include <stdio.h>\nint main(int c, char **v)'
                   '{ printf("added %s\\n", v[1]); return 3; }\n')
    subprocess.run(["gcc", "-O2", "-o", str(prog), str(src)], check=True)
    p = kml("run", "--add", f"{prog}:/usr/bin/", "--", "hello-added", "x y")
    assert p.returncode == 3, p.stderr
    assert p.stdout == "added x y\n"


def test_run_reports_kernel_warning_even_if_command_succeeds():
    # /proc/sysrq-trigger 'l' is harmless; but a WARNING needs a real one:
    # the kernel's own log line is what matters, so write it via /dev/kmsg.
    p = kml("run", "--smp", "1", "--", "sh", "-c",
            "echo 'WARNING: CPU: 0 PID: 1 at fake/test.c:1 injected' > /dev/kmsg; exit 0")
    assert p.returncode == qemu.EXIT_VM_FAILURE, p.stderr
    assert "WARNING" in p.stderr and "console.log" in p.stderr


def test_run_timeout_kills_vm():
    p = kml("run", "--smp", "1", "--timeout", "20", "--", "sleep", "1000")
    assert p.returncode == qemu.EXIT_TIMEOUT, p.stderr
    assert "timeout" in p.stderr


def test_run_kernel_mode_guest_program():
    p = kml("run", "--kernel-mode", "--", "kml-probe", "info")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "cpl=0 secure=1 kernelmode=1\n"


def test_run_kernel_mode_host_program(tmp_path):
    src = tmp_path / "cpl.c"
    src.write_text('#include <stdio.h>\nint main(int c, char **v) { unsigned short cs;'
                   ' asm("mov %%cs,%0" : "=r"(cs)); printf("%s cpl=%d\\n", v[1], cs & 3);'
                   ' return 0; }\n')
    prog = tmp_path / "cpl"
    subprocess.run(["gcc", "-O2", "-static", "-o", str(prog), str(src)], check=True)
    p = kml("run", "--kernel-mode", "--", str(prog), "hello")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hello cpl=0\n"
    p = kml("run", "--add", f"{prog}:/usr/bin/", "--", "cpl", "hello")
    assert p.stdout == "hello cpl=3\n"


PERF_SPIN = r"""
#include <stdio.h>
static volatile unsigned long sink;
__attribute__((noinline)) void kml_perf_hot(void)
{
	for (unsigned long i = 0; i < 100000000UL; i++)
		sink += i;
}
/* not a tail call: the caller keeps its frame in the chain */
__attribute__((noinline)) void kml_perf_caller(void) { kml_perf_hot(); sink++; }
int main(void)
{
	unsigned short cs;
	asm("mov %%cs,%0" : "=r"(cs));
	kml_perf_caller();
	printf("perf-spin cpl=%d\n", cs & 3);
	return 0;
}
"""


def test_perf_profiles_a_kernel_mode_program(tmp_path):
    """Debian's perf records a program running from /trusted at CPL 0
    (software clock events: TCG has no PMU): its samples are user-space
    samples ([.]) of its own function, resolved through its symbols, and
    the frame-pointer call chain walks back through its caller to main."""
    src, prog = tmp_path / "spin.c", tmp_path / "kml-perf-spin"
    src.write_text(PERF_SPIN)
    # -O0: every function, the leaf included, sets up its frame pointer
    subprocess.run(["gcc", "-O0", "-g", "-fno-omit-frame-pointer", "-static", "-o",
                    str(prog), str(src)], check=True)
    script = ("cp /root/kml-perf-spin /trusted/ && "
              "perf record -q -e cpu-clock -F 499 -g -o /tmp/p.data "
              "/trusted/kml-perf-spin && "
              "echo '== report' && perf --no-pager report -i /tmp/p.data --stdio "
              "--stdio-color never --no-children "
              "--sort dso,sym -q -g none 2>/dev/null && "
              "echo '== script' && perf --no-pager script -i /tmp/p.data -F ip,sym 2>/dev/null "
              "| grep -A3 kml_perf_hot | head -100")
    p = kml("run", "--add", "/usr/bin/perf:/usr/bin/", "--add", f"{prog}:/root/", "--",
            "sh", "-c", script, timeout=900)
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    assert "perf-spin cpl=0" in p.stdout, p.stdout[-3000:]
    out = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", p.stdout)     # terminal codes, if any
    report = out.split("== report", 1)[1].split("== script", 1)[0]
    top = [line.split() for line in report.splitlines() if "%" in line][0]
    # e.g. ['97.30%', 'kml-perf-spin', '[.]', 'kml_perf_hot']
    assert top[1:] == ["kml-perf-spin", "[.]", "kml_perf_hot"], report
    assert float(top[0].rstrip("%")) > 50, report
    chains = out.split("== script", 1)[1]
    assert re.search(r"kml_perf_hot\s+\S+\s+kml_perf_caller\s+\S+\s+main", chains), \
        chains[:3000]


def test_bench_prints_every_row():
    p = kml("run", "--", "sh", "-c", "kml-bench --quick --json /tmp/b.json >/dev/null "
            "&& cat /tmp/b.json", timeout=900)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    rows = data["rows"]
    names = {r["name"] for r in rows}
    for must in ("getppid", "getpid", "read", "write", "stat", "fstat", "open_close",
                 "select_file_10", "select_file_500", "sigaction", "sig_deliver",
                 "pipe_rtt", "unix_rtt", "fork_exit", "fork_exec", "page_fault",
                 "call", "vdso_clock_gettime"):
        assert must in names
    for r in rows:
        assert r["status"] == "ok", r
        assert r["ns_median"] > 0
        assert r["path"] == ("none" if r["name"] in ("call", "vdso_clock_gettime")
                             else "syscall"), r
    assert data["accel"] in ("tcg", "kvm")
    assert data["schema"] == "kml-bench/2"
    assert (data["path"], data["cpl"], data["call_path"]) == ("syscall", 3, False)
    assert data["vdso_kml_syscall"] is True


def test_bench_three_modes_in_one_boot():
    rows = "getppid,read,sig_deliver,call"
    before = set(paths.BENCH_OUT.glob("*.json"))
    p = kml("bench", "--quick", "--only", rows, "--no-pathlen", timeout=900)
    assert p.returncode == 0, p.stderr
    for mode, where in (("user", "user mode): /usr/bin/kml-bench"),
                        ("kernel-syscall", "kernel mode): /trusted/kml-bench"),
                        ("kernel-call", "kernel mode): /trusted/kml-bench")):
        assert f"== {mode} ({where} --expect-mode" in p.stdout
    assert ("| Benchmark | user ns | user cycles | kernel-syscall ns | kernel-syscall cycles "
            "| kernel-call ns | kernel-call cycles | user/kernel-syscall | user/kernel-call |"
            in p.stdout)
    assert "## KML paper Table 2 layout (ns)" in p.stdout
    assert "## Usermode-kernel thesis Table 6.1 layout" in p.stdout
    new = sorted(set(paths.BENCH_OUT.glob("*.json")) - before)
    assert new, p.stderr
    data = json.loads(new[-1].read_text())
    assert new[-1].with_suffix(".md").read_text() in p.stdout
    assert data["schema"] == "kml-bench-modes/1"
    if data["accel"] == "tcg":
        assert data["emulated"] and "EMULATED" in p.stdout
    modes = {m["name"]: m for m in data["modes"]}
    assert list(modes) == ["user", "kernel-syscall", "kernel-call"]
    for name, cpl, path in (("user", 3, "syscall"), ("kernel-syscall", 0, "syscall"),
                            ("kernel-call", 0, "call")):
        m = modes[name]
        assert m["status"] == "ok", m
        assert (m["result"]["cpl"], m["result"]["path"]) == (cpl, path)
    assert modes["kernel-call"]["result"]["call_path"] is True
    by = {r["name"]: r for r in data["rows"]}
    assert set(by) == set(rows.split(","))
    for name in ("getppid", "read"):
        cells = by[name]["modes"]
        assert all(cells[m]["status"] == "ok" and cells[m]["ns_median"] > 0 for m in modes)
        assert cells["kernel-call"]["path"] == "call"
        assert by[name]["speedup"]["user/kernel-call"] > 0
        assert by[name]["speedup"]["user/kernel-syscall"] > 0
    assert by["call"]["modes"]["kernel-call"]["path"] == "none"
    sig = by["sig_deliver"]["modes"]
    assert sig["kernel-syscall"]["status"] == "ok"
    assert sig["kernel-call"]["status"] == "skipped"
    assert "rt_sigreturn" in sig["kernel-call"]["reason"]
    # the file I/O part (--only does not restrict it; --quick shortens it)
    for name in ("io-tmpfs-user", "io-tmpfs-kernel", "io-ext4-user", "io-ext4-kernel"):
        assert f"== {name} ({name.rsplit('-', 1)[1]} mode): " in p.stdout
    for marker in ("# kml-begin ", "# kml-data ", "# kml-end "):
        assert marker not in p.stdout       # the markers and JSON are for the host
    assert ("| File system | File size (KiB) | Operation | user KiB/s | kernel KiB/s "
            "| kernel/user |" in p.stdout)
    io = data["io"]
    assert [(x["name"], x["status"]) for x in io["modes"]] == [
        ("io-tmpfs-user", "ok"), ("io-tmpfs-kernel", "ok"),
        ("io-ext4-user", "ok"), ("io-ext4-kernel", "ok")], io["modes"]
    for x in io["modes"]:
        assert (x["result"]["cpl"], x["result"]["fs"]) == (x["cpl"], x["fs"])
        assert x["result"]["verified"] is True and x["result"]["runs"] == 3
    assert x["result"]["mount"]["source"] == "/dev/vda"
    assert [(r["fs"], r["size_kib"], r["op"]) for r in io["rows"]] == [
        (fs, size, op) for fs in ("tmpfs", "ext4") for size in (16, 32, 64, 128, 256, 512)
        for op in ("write", "re-write", "read", "re-read")]
    for r in io["rows"]:
        assert all(r["modes"][m]["status"] == "ok" and r["modes"][m]["kib_s_best"] > 0
                   for m in ("user", "kernel")), r
        assert r["ratio"] > 0


def test_bench_apps_in_both_modes():
    """Debian's redis-server, nginx, iperf3 and find as ordinary processes
    and in kernel mode (bench --apps --quick: one pair each, pti=off)."""
    before = set(paths.BENCH_OUT.glob("apps-*.json"))
    p = kml("bench", "--apps", "--quick", "--config", "pti-off", timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    new = sorted(set(paths.BENCH_OUT.glob("apps-*.json")) - before)
    assert new, p.stderr
    data = json.loads(new[-1].read_text())
    assert data["schema"] == "kml-apps/1" and data["pairs"] == 1
    (cfg,) = data["configs"]
    assert "pti=off" in cfg["system"]["cmdline"]
    rows = {r["name"]: r for r in cfg["apps"]}
    assert list(rows) == ["redis", "nginx", "iperf3", "find"]
    for name, r in rows.items():
        for mode in ("user", "kernel"):
            assert r[mode]["status"] == "ok" and r[mode]["median"] > 0, (name, r[mode])
        assert r["speedup"] > 0
    for server, prog in (("redis", "redis-server"), ("nginx", "nginx"), ("iperf3", "iperf3")):
        assert f"== pti-off.{server}.kernel.1-1 (kernel mode): /trusted/{prog}" in p.stdout
        assert re.search(rf"kml-modes: pti-off\.{server}\.kernel\.1-1: server pid \d+, "
                         r"KernelMode: 1\n", p.stdout)
        assert re.search(rf"kml-modes: pti-off\.{server}\.user\.1-1: server pid \d+, "
                         r"KernelMode: 0\n", p.stdout)
    assert "== pti-off.find.kernel.1-1 (kernel mode): /trusted/find /tmp/linux" in p.stdout
    assert "/tmp/linux/kernel/fork.c" in p.stdout
    assert "Table 6.2: find application benchmark" in p.stdout
    assert "# kml-time" not in p.stdout


def test_iobench_user_and_kernel_mode_on_tmpfs_and_ext4():
    """kml-iobench as an ordinary process and from /trusted, on tmpfs and on
    an ext4 image (./kml run --disk-fs ext4): the JSON and the data checks,
    not the timings; a corruption is found in kernel mode too."""
    script = (
        "mkdir -p /mnt/ext4 && mount -t ext4 /dev/vda /mnt/ext4 || exit 9; "
        "cp /usr/lib/kml/kml-iobench /trusted/ || exit 9; "
        "for d in /tmp /mnt/ext4; do for p in /usr/bin/kml-iobench /trusted/kml-iobench; do "
        "echo ====; $p --quick --sizes 16,512 --dir $d --json - 2>/tmp/err || "
        "{ cat /tmp/err; exit 8; }; done; done; echo ====; "
        "/trusted/kml-iobench --quick --sizes 64 --dir /mnt/ext4 --inject-corruption write "
        "--json /dev/null >/dev/null 2>/tmp/err; echo \"inject $?\"; tail -n 1 /tmp/err")
    p = kml("run", "--disk", "64", "--disk-fs", "ext4", "--", "sh", "-c", script, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    parts = p.stdout.split("====\n")
    assert len(parts) == 6 and parts[0] == "", p.stdout
    docs = [json.loads(x) for x in parts[1:5]]
    for doc, (fs, cpl) in zip(docs, [("tmpfs", 3), ("tmpfs", 0), ("ext4", 3), ("ext4", 0)]):
        assert doc["schema"] == "kml-iobench/1"
        assert (doc["fs"], doc["cpl"], doc["mode"]) == (fs, cpl, "user" if cpl else "kernel")
        assert doc["verified"] is True and doc["emulated"] == (doc["accel"] == "tcg")
        assert [(r["size_kib"], r["op"], r["status"]) for r in doc["results"]] == [
            (size, op, "ok") for size in (16, 512)
            for op in ("write", "re-write", "read", "re-read")]
        assert all(r["kib_s_best"] > 0 and r["iters"] >= 1 for r in doc["results"])
    assert docs[2]["mount"]["source"] == "/dev/vda"
    assert parts[5] == ("inject 1\nkml-iobench: data mismatch: what was read is not what "
                        "was written\n"), parts[5]


def test_callpath_demo_user_and_kernel_mode():
    p = kml("run", "--", "kml-callpath-demo")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "cpl=3 call_path=0 vdso_kml_syscall=1"
    assert re.fullmatch(r"getpid=\d+ getppid=\d+ uname=Linux 6\.12\.\d+-kml", lines[1])
    assert lines[2] == 'pipe: wrote 5, read 5 "hello"'
    assert lines[3] == "direct_returns: +0 over 100 getppid calls"
    p = kml("run", "--kernel-mode", "--", "kml-callpath-demo")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "cpl=0 call_path=1 vdso_kml_syscall=1"
    assert lines[2] == 'pipe: wrote 5, read 5 "hello"'
    m = re.fullmatch(r"direct_returns: \+(\d+) over 100 getppid calls", lines[3])
    assert m and int(m.group(1)) >= 100, lines[3]


def test_kernel_library_programs_print_their_tables():
    """./kml run -- /trusted/kml-ps, kml-top and kml-udp, as a user runs them."""
    p = kml("run", "--", "sh", "-c",
            "cat /proc/cmdline; /trusted/kml-ps; echo \"== kml-ps $?\"; "
            "/trusted/kml-top -b -n 1 -d 0.2 -m 5; echo \"== kml-top $?\"; "
            "/trusted/kml-udp -r 5 -t 0.3; echo \"== kml-udp $?\"", timeout=900)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "== kml-ps 0\n" in out and "== kml-udp 0\n" in out, out
    assert "== kml-top 0\n" in out, out
    top = out[out.index("kml-top: refresh 1"):out.index("== kml-top")].splitlines()
    assert top[1].split() == ["PID", "COMMAND", "S", "CPU%", "KSTACK", "MAPPED", "WCHAN"], top
    assert len(top) == 2 + 5 and all(
        re.fullmatch(r"\s*\d+ .{16} [RSDTI?] +\d+\.\d +(\d+|-) +(\d+/\d+K|-)  \S+", ln)
        for ln in top[2:]), top
    ps = out[out.index("kml-ps: "):out.index("== kml-ps")]
    lines = ps.splitlines()
    assert re.fullmatch(r"kml-ps: \d+ tasks \(\d+ idle, \d+ processes, \d+ other threads\) "
                        r"from init_task at 0xffffffff[0-9a-f]{8}; kernel stacks of \d+ bytes "
                        r"\(THREAD_SIZE = __end_init_stack - __start_init_stack\)", lines[0])
    assert lines[1].split() == ["PID", "TGID", "S", "STACK", "COMM"]
    rows = [re.fullmatch(r"\s*(\d+)\s+(\d+) ([RSDTtXZPI]) +(\d+|-|\?)[ !](.*)", ln)
            for ln in lines[2:] if not ln.startswith("!")]
    assert rows and all(rows), lines
    assert ("0", "0", "swapper/0") in {(m[1], m[2], m[5]) for m in rows}
    assert ("1", "1", "init") in {(m[1], m[2], m[5]) for m in rows}
    me = [m for m in rows if m[5] == "kml-ps"]
    assert len(me) == 1 and me[0][3] == "R" and 0 < int(me[0][4]) <= 16384 * 4
    udp = out[out.index("kml-udp: "):]
    assert ("| Delay for sending 100, 5120-byte packets (ns, median of 5 runs) |" in udp), udp
    assert re.search(r"^\| Datagrams per second \(0\.3 s per way\) \| \d+ \| \d+ \| \d+ \| "
                     r"-?\d+\.\d \|$", udp, re.M), udp
    for way in ("sendto()", "sendto() call path", "kernel_sendmsg()",
                "driver (__dev_queue_xmit)"):
        assert re.search(rf"^\| {re.escape(way)} \| \d+ \| \d+ \| \d+ \| \d+ \| \d+ \| \d+ \| "
                         r"\d+\.\d\dx \|$", udp, re.M), udp
    assert re.search(r"^receiver: .* datagrams verified; 0 bad, 0 duplicate, 0 missing$",
                     udp, re.M), udp
    assert re.search(r"^kml-udp: kernel-library/sendto = \d+\.\d\d$", udp, re.M), udp
    assert ("EMULATED" in udp) == ("kml.accel=tcg" in out.splitlines()[0])


def test_appliance_boots_its_service_at_cpl0():
    """./kml appliance: the appliance image boots redis with init and the
    service in kernel mode; the normal image's redis is ordinary."""
    p = kml("appliance", "--rounds", "1", timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^\| appliance \(kml=all.*\| [0-9.]+ MiB \| [0-9.]+ MiB \| \d+ \| "
                     r"\d+ \| 1 \| 0 \| 1/1 \|$", p.stdout, re.M), p.stdout
    assert re.search(r"^\| normal image .*\| 0 \| 3 \| 1/1 \|$", p.stdout, re.M), p.stdout


def test_run_appliance_puts_init_and_the_command_in_kernel_mode():
    p = kml("run", "--appliance", "--", "sh", "-c",
            "grep '^KernelMode:' /proc/1/status /proc/self/status")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["/proc/1/status:KernelMode:\t1",
                                        "/proc/self/status:KernelMode:\t1"], p.stdout
    p = kml("run", "--appliance", "--append", "kml=on", "--", "true")
    assert p.returncode == 1 and "--appliance sets kml=all" in p.stderr, p.stderr
    p = kml("appliance", "--append", "kml=off")
    assert p.returncode == 1 and "appliance sets kml=all" in p.stderr, p.stderr


def test_kml_modes_keeps_ordinary_processes_in_user_mode_under_kml_all():
    """In a kml=all boot kml-modes runs mode user's server and the clients
    of user and kernel with no_new_privs (CPL 3); mode all runs both at
    CPL 0; outside kml=all, mode all is not run."""
    client = "grep '^KernelMode:' /proc/self/status"
    script = "; ".join(
        f"kml-modes -s \"{client}\" {m} {m} /bin/sleep 30" for m in ("user", "kernel", "all"))
    p = kml("run", "--appliance", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stdout + p.stderr
    blocks = {m: p.stdout[p.stdout.index(f"# kml-begin {m} "):
                          p.stdout.index(f"# kml-end {m} ")] for m in ("user", "kernel", "all")}
    for mode, server, cl in (("user", 0, 0), ("kernel", 1, 0), ("all", 1, 1)):
        b = blocks[mode]
        assert f"KernelMode:\t{cl}" in b, b
        assert f"server pid" in b and f"KernelMode: {server}" in b.split("server pid")[1], b
    assert "# kml-end all all 0" in p.stdout
    p = kml("run", "--", "kml-modes", "x", "all", "/bin/true")
    assert p.returncode == 3 and "mode all needs a kml=all boot" in p.stdout, p.stdout


DKS_CONSUME = "/sys/kernel/debug/dynamic_kstacks/consume"
DKS_STARVE = "/sys/kernel/debug/dynamic_kstacks/starve"


def test_dynamic_kstack_overflow_kills_only_the_task():
    """Growing a dynamic kernel stack past its end kills that task with a
    report on the console, and so does growing it in process context of a
    user task when the pools are empty (the driver's "starve"): that task
    grows from the reserve and dies at its return to user mode, so a
    mutex it held in the kernel is released (a second writer that needs
    it gets it; before, the task died holding it and the second writer
    hung); the machine, and the other tasks, carry on."""
    script = (
        "grep dynamic_kstack_kills /proc/vmstat; "
        # a thread of a shell in the background keeps running throughout
        "(while :; do sleep 0.05; done) & bg=$!; "
        f"sh -c 'echo 12 > {DKS_CONSUME} && echo grew-to-full'; "
        f"sh -c 'echo 20 > {DKS_CONSUME}; echo not-reached'; echo rc=$?; "
        f"sh -c 'echo 20 > {DKS_CONSUME}'; echo rc=$?; "
        "kill -0 $bg && echo background-alive; kill $bg; "
        f"sh -c 'echo 8 > {DKS_CONSUME} && echo still-works'; "
        # the pools look empty to a user task in process context: killed
        # (a few tries: a task may get a cached stack that grew before)
        "for i in 1 2 3 4 5 6; do "
        f"sh -c 'echo task 12 > {DKS_STARVE}' 2>/dev/null; r=$?; "
        "[ $r = 137 ] && echo starved-task-killed && break; done; "
        "grep dynamic_kstack_kills /proc/vmstat; "
        # the same with a mutex held across the growth, twice (more tries:
        # the first holder's grown stack goes to the stack cache, and the
        # next shells may get it and not grow at all)
        "for n in 1 2; do for i in $(seq 1 16); do "
        f"sh -c 'echo mutex 12 > {DKS_STARVE}' 2>/dev/null; r=$?; "
        "[ $r = 137 ] && echo mutex-holder-killed && break; done; done; "
        "grep dynamic_kstack_kills /proc/vmstat")
    # the debug kernel too, where it is built (./kml test builds it for
    # the default configurations): lockdep reports a task that exits
    # holding a lock
    runs = [("default", "on"), ("default", "off")]
    if kbuild.kernel("debug").bzimage.exists():
        runs.append(("debug", "on"))
    for kernel, pti in runs:
        res = qemu.boot(["sh", "-c", script], smp=2, mem=GUEST_MEM,
                        append=f"pti={pti} dynamic_kstacks=on", timeout=300, stream=False,
                        kernel=kbuild.kernel(kernel))
        out = res.output.decode(errors="replace")
        console = res.console_log.read_text(errors="replace")
        assert res.verdict() is None, f"{kernel} pti={pti}: {res.verdict()}"
        assert res.status == 0, out
        lines = out.split()
        assert "dynamic_kstack_kills" in lines and "grew-to-full" in out, out
        assert "not-reached" not in out and out.count("rc=137") == 2, out
        assert "background-alive" in out and "still-works" in out, out
        assert "starved-task-killed" in out, out
        kills = [int(lines[i + 1]) for i, w in enumerate(lines) if w == "dynamic_kstack_kills"]
        assert kills[1] - kills[0] == 3, out
        assert out.count("mutex-holder-killed") == 2, out
        assert kills[2] - kills[1] == 2, out
        reports = re.findall(r"dynamic_kstacks: kernel stack overflow in sh\[\d+\] at "
                             r"consume(\.\w+)*\+0x\w+/0x\w+ \(\d+ bytes below the 16 KiB stack\): "
                             r"killing the task", console)
        assert len(reports) == 2, console[-3000:]
        starved = re.findall(r"dynamic_kstacks: no free page to grow the kernel stack of "
                             r"sh\[\d+\] at consume(\.\w+)*\+0x\w+/0x\w+: killing the task "
                             r"at its return to user mode", console)
        assert len(starved) == 3, console[-3000:]



def test_kernel_stack_overflow_is_the_same_double_fault_in_both_modes():
    """A kernel stack (not dynamic) that overflows into its guard page is
    the kernel's fatal double fault, reported and ended alike whichever
    mode the task that overflowed it runs in -- the ordinary process is
    the oracle.  With the kernel-mode IDT loaded the CPU delivers that
    page fault on an IST stack; kml_entry_fixup() must report it as the
    double fault, in place, rather than copy its frame below the
    overflowed stack pointer (a second fault on the same IST stack, over
    the first one's frame: a wild return or a triple fault)."""
    for mode in ("user", "kernel"):
        script = (f"kml-modes ovf {mode} /bin/sh -c "
                  f"\"grep KernelMode /proc/self/status; echo overflow > {DKS_CONSUME}\"; "
                  "echo survived")
        res = qemu.boot(["sh", "-c", script], smp=2, mem=GUEST_MEM,
                        append="pti=on", timeout=120, stream=False)
        out = res.output.decode(errors="replace")
        console = res.console_log.read_text(errors="replace")
        assert not res.timed_out, f"{mode}: the VM hung\n{console[-3000:]}"
        assert res.status is None and "survived" not in out, out
        want = "1" if mode == "kernel" else "0"
        assert re.search(rf"KernelMode:\s+{want}", out), out
        guard = re.search(r"BUG: TASK stack guard page was hit at \S+ "
                          r"\(stack is \S+\)", console)
        assert guard, f"{mode}: no guard-page report\n{console[-3000:]}"
        # exc_double_fault() runs as an NMI-like entry: the oops panics,
        # as it does for an ordinary process (a page fault's oops would
        # only have killed the task)
        assert "Kernel panic - not syncing: Fatal exception in interrupt" in console, \
            console[-3000:]


def test_dynamic_kstack_boot_parameter_errors():
    """A bad value is reported and stacks stay as they are."""
    res = qemu.boot(["sh", "-c", "grep -c . /proc/vmstat >/dev/null; "
                     f"cat {DKS_CONSUME}"], smp=1, mem=GUEST_MEM,
                    append="dynamic_kstacks=maybe", timeout=120, stream=False)
    assert res.verdict() is None, res.verdict()
    console = res.console_log.read_text(errors="replace")
    assert "dynamic_kstacks=maybe: expected on, off or reclaim" in console
    assert "dynamic off" in res.output.decode(errors="replace")


def test_dynamic_kstacks_without_kernel_mode_processes():
    """dynamic_kstacks=on uses the kernel-mode IDT's stubs, but not
    kernel-mode processes: it also works with kml=off."""
    res = qemu.boot(["sh", "-c", f"echo 12 > {DKS_CONSUME} && "
                     "grep dynamic_kstack_faults /proc/vmstat"], smp=2, mem=GUEST_MEM,
                    append="kml=off pti=on dynamic_kstacks=on", timeout=120, stream=False)
    assert res.verdict() is None, res.verdict()
    assert res.status == 0, res.output
    faults = int(res.output.decode().split()[-1])
    assert faults > 0


PROCESS_TESTS = sum(prog == "process" for prog, _ in declared_tests())


SYSCTL = "/proc/sys/kernel/"
SELF_MODE = "sh -c \"grep '^KernelMode:' /proc/self/status\""


@pytest.mark.parametrize("pti", ["pti=on", "pti=off"])
def test_kml_all_runs_every_process_in_kernel_mode(pti):
    """kml=all (appliance mode): init, the shell, both ends of a pipeline,
    forked children and programs exec'd from anywhere -- static and
    dynamically linked -- run at CPL 0; the process tests pass there
    (their faults kill only the faulting child, and a child that set
    no_new_privs execs in user mode); the console warns that processes
    are not protected.  kernel.kml_enabled=0 and kml_require_mark=1
    (busybox has no mark) still send an exec to user mode."""
    script = ("grep '^KernelMode:' /proc/1/status; "
              "grep '^KernelMode:' /proc/self/status | cat; "
              "kml-probe info; kml-probe fork-info; "
              "kml-probe exec /usr/bin/kml-probe info; "
              "kml-hello-dyn appliance; "
              "/usr/lib/kml/tests/process > /tmp/process.tap 2>&1; "
              "echo process-exit=$?; grep -c '^ok ' /tmp/process.tap; "
              "grep '^not ok' /tmp/process.tap; "
              # what still applies: the switch, and marks when required
              f"echo 0 > {SYSCTL}kml_enabled; {SELF_MODE} | sed s/^/disabled-/; "
              f"echo 1 > {SYSCTL}kml_enabled; echo 1 > {SYSCTL}kml_require_mark; "
              f"{SELF_MODE} | sed s/^/unmarked-/; echo 0 > {SYSCTL}kml_require_mark; "
              f"{SELF_MODE} | sed s/^/again-/; "
              "dmesg | grep 'kml'")
    res = qemu.boot(["sh", "-c", script], smp=2, mem=GUEST_MEM,
                    append=f"kml=all {pti}", timeout=600, stream=False,
                    disk_mib=GUEST_DISK_MIB)
    assert res.verdict() is None, res.verdict()
    out = res.output.decode(errors="replace")
    lines = out.splitlines()
    assert lines[:2] == ["KernelMode:\t1", "KernelMode:\t1"], out
    probes = [line for line in lines if line.startswith("cpl=")]
    assert len(probes) == 3 and all(p.startswith("cpl=0 ") and p.endswith("kernelmode=1")
                                    for p in probes), out
    assert re.search(r"^hello from glibc \S+ appliance$", out, re.M), out
    # no secure exec: the caller already runs at CPL 0
    assert all(" secure=0 " in p for p in probes), out
    assert "process-exit=0" in out and "not ok" not in out, out
    # every test ran: the paging test too (the disk), none skipped
    assert int(out.split("process-exit=0", 1)[1].split()[0]) == PROCESS_TESTS, out
    assert "# SKIP" not in out, out
    assert ("kml=all: every user process runs at CPL 0; processes are not "
            "protected from each other or from the kernel") in out, out
    assert "kernel-mode processes enabled for every program" in out, out
    for line in ("disabled-KernelMode:\t0", "unmarked-KernelMode:\t0",
                 "again-KernelMode:\t1"):
        assert line in lines, out
    assert "/bin/busybox runs in user mode: it carries no verification mark" in out, out


@pytest.mark.parametrize("off", [True, False])
def test_kml_disabled_at_boot_admits_nobody(off):
    """Where kml is disabled at boot -- kml=off here; FRED event delivery,
    a Xen PV guest or an SEV-ES/SNP or TDX guest take the same path
    (kml_early_init(), patch 0031), but none of them runs under TCG --
    the console says so, kernel.kml_enabled reads 0 and refuses to be
    set, and a program in /trusted runs as an ordinary process.  The
    boot without kml=off is the control (where writing 1 changes nothing)."""
    script = ("cat /proc/sys/kernel/kml_enabled; "
              "if (echo 1 > /proc/sys/kernel/kml_enabled) 2>/dev/null; then echo write-ok; "
              "else echo write-refused; fi; "
              "mkdir -p /trusted && cp /usr/bin/kml-probe /trusted/ && "
              "/trusted/kml-probe info; dmesg | grep 'kml: '")
    res = qemu.boot(["sh", "-c", script], smp=2, mem=GUEST_MEM,
                    append="kml=off" if off else "", timeout=120, stream=False)
    assert res.verdict() is None, res.verdict()
    out = res.output.decode(errors="replace")
    lines = out.split()
    if off:
        assert lines[:2] == ["0", "write-refused"], out
        assert "cpl=3" in out and "kernelmode=0" in out, out
        assert "kml: disabled on the command line" in out, out
        assert "kernel-mode processes enabled" not in out, out
    else:
        assert lines[:2] == ["1", "write-ok"], out
        assert "cpl=0" in out and "kernelmode=1" in out, out
        assert "kml: disabled" not in out, out


@pytest.mark.parametrize("bug", ["retbleed=force", None])
def test_dynamic_kstacks_refused_where_entry_barriers_come_first(bug):
    """On a CPU affected by Retbleed (forced here), the IST stubs' RETs
    would run before the entry's return-predictor barrier: the option is
    ignored with a warning and a stack use maps nothing.  The same boot
    without the forced bug is the control."""
    res = qemu.boot(["sh", "-c", f"echo 12 > {DKS_CONSUME}; dmesg; "
                     "grep dynamic_kstack_faults /proc/vmstat"], smp=2, mem=GUEST_MEM,
                    append=" ".join(x for x in ("pti=on dynamic_kstacks=on", bug) if x),
                    timeout=120, stream=False)
    assert res.verdict() is None, res.verdict()
    out = res.output.decode()
    faults = int(out.split()[-1])
    refused = ("dynamic_kstacks=on ignored: the CPU is affected by Retbleed, whose entry "
               "barriers must come before the first RET")
    if bug:
        assert refused in out and "dynamic_kstacks: on:" not in out
        assert faults == 0
    else:
        assert refused not in out and "dynamic_kstacks: on:" in out
        assert faults > 0


def test_soak_short_is_clean():
    """./kml soak --short: Debian's stress-ng and trinity in kernel mode, in
    three boots (part of the suite so that CI runs it)."""
    p = kml("soak", "--short", timeout=1800)
    assert p.returncode == 0, (p.stdout[-4000:], p.stderr[-4000:])
    rows = [line for line in p.stdout.splitlines() if line.startswith("| pti-")]
    assert len(rows) == 3 and all(r.endswith("| clean |") for r in rows), rows


def _text_ranges(vmlinux):
    """{symbol: (start, end)} of the text symbols of vmlinux, from nm -S."""
    out = subprocess.run(["nm", "-S", str(vmlinux)], check=True, capture_output=True,
                         text=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tT":
            syms.setdefault(f[3], (int(f[0], 16), int(f[0], 16) + int(f[1], 16)))
        elif len(f) == 3 and f[1] in "tT":
            syms.setdefault(f[2], (int(f[0], 16), int(f[0], 16)))
    return syms


def test_stack_fault_entry_calls_only_entry_code():
    """The IST fault path of dynamic stacks, kml_entry_fixup() and every
    function it reaches, runs where RCU may not be watching and where a
    breakpoint (ftrace, kprobes) would reuse its stack: it may only call
    noinstr or entry text (issue 15: it used to queue irq_work there)."""
    vmlinux = paths.OBJ / "vmlinux"
    syms = _text_ranges(vmlinux)
    allowed = [(syms[f"__{s}_text_start"][0], syms[f"__{s}_text_end"][0])
               for s in ("noinstr", "entry")]

    def ok(addr):
        return any(lo <= addr < hi for lo, hi in allowed)

    todo, seen, bad = ["kml_entry_fixup"], set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        lo, hi = syms[name]
        assert hi > lo, name
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--start-address={lo}",
                              f"--stop-address={hi}", str(vmlinux)], check=True,
                             capture_output=True, text=True).stdout
        for m in re.finditer(r"\scall\s+([0-9a-f]+) <([\w.]+)(\+0x[0-9a-f]+)?>", dis):
            target, callee = int(m.group(1), 16), m.group(2)
            if not ok(target):
                bad.append(f"{name} calls {callee}")
            elif callee in syms and not m.group(3):
                todo.append(callee)
    assert "dynamic_kstack_populate" in seen, sorted(seen)
    assert not bad, bad
