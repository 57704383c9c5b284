"""Unit tests: ./kml bench's three modes (host/kmltool/bench.py) and its
Markdown (report.py), with a fake kml-bench run through guest/kml-modes
here; no VM."""
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

from conftest import ROOT
from kmltool import bench, guestrun, report
from kmltool.guestrun import Run, Status
from kmltool.paths import KmlError

# A stand-in for kml-bench: --expect-mode/--path/--json/--label like the
# real one; the rows' timings depend on the mode so that the speed-ups are
# known.  FAKE_KERNEL=0 makes it a process that never gets kernel mode.
FAKE = textwrap.dedent("""\
    #!PYTHON
    import json, os, sys
    args = sys.argv[1:]
    def opt(name, default=None):
        return args[args.index(name) + 1] if name in args else default
    kernel = os.environ.get("FAKE_KERNEL", "1") == "1"
    mode, path = opt("--expect-mode"), opt("--path", "syscall")
    if "--list" in args:
        print("getppid              Null syscall: getppid")
        print("sig_deliver          Signal delivery")
        sys.exit(0)
    if mode == "kernel" and not kernel:
        print("kml-bench: expected to run in kernel mode, but this process "
              "runs at CPL 3", file=sys.stderr)
        sys.exit(3)
    cpl = 0 if mode == "kernel" else 3
    ns = {"user": 400.0, "kernel": 100.0}["kernel" if cpl == 0 else "user"]
    if path == "call":
        ns = 50.0
    print("[ 1/2] getppid ...", ns, "ns", file=sys.stderr)
    rows = [{"name": "getppid", "label": "Null syscall: getppid", "status": "ok",
             "reason": None, "ns_median": ns, "cycles_median": ns * 2.5,
             "unit": "op", "path": path}]
    if path == "call":
        rows.append({"name": "sig_deliver", "label": "Signal delivery",
                     "status": "skipped", "reason": "not available through the call path: x",
                     "ns_median": None, "cycles_median": None, "unit": "op", "path": None})
    else:
        rows.append({"name": "sig_deliver", "label": "Signal delivery", "status": "ok",
                     "reason": None, "ns_median": 1000.0, "cycles_median": 2500.0,
                     "unit": "op", "path": path})
    doc = {"schema": "kml-bench/2", "label": opt("--label"), "accel": "tcg",
           "emulated": True, "cpu": "fake", "ncpus": 2, "kernel": "6.12.0-kml",
           "cmdline": "kml.accel=tcg", "tsc_ghz": 2.5, "runs": 3, "run_ms": 20,
           "path": path, "cpl": cpl, "call_path": path == "call", "rows": rows,
           "layouts": [{"title": "KML paper Table 2 layout", "unit": "ns",
                        "ns_per_unit": 1, "rows": [["getpid", "getpid"],
                                                   ["null", "getppid"]]}]}
    with open(opt("--json"), "w") as f:
        json.dump(doc, f)
    """).replace("PYTHON", sys.executable)


@pytest.fixture
def fake(tmp_path):
    prog = tmp_path / "kml-bench"
    prog.write_text(FAKE)
    prog.chmod(0o755)
    (tmp_path / "trusted").mkdir()
    return tmp_path


def run_specs(fake, specs, env=None):
    """The guest script of specs, with the fakes in fake/ for the
    programs and fake/trusted for /trusted, run here; its output."""
    specs = [replace(s, program=str(fake / s.base)) for s in specs]
    script = guestrun.script(specs, tmp=str(fake / "res"))
    env = dict(env or os.environ, KML_TRUSTED=str(fake / "trusted"),
               PATH=f"{ROOT / 'guest'}:{os.environ['PATH']}")
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def run_script(fake, *args, env=None):
    return run_specs(fake, bench.specs(args), env)


def test_specs_three_modes():
    sp = bench.specs(["--quick"])
    assert [(s.name, s.mode, s.path) for s in sp] == [
        ("user", "user", "/usr/bin/kml-bench"),
        ("kernel-syscall", "kernel", "/trusted/kml-bench"),
        ("kernel-call", "kernel", "/trusted/kml-bench")]
    assert sp[1].argv() == [
        "kml-modes", "-q", "-c", "/tmp/kml-runs/kernel-syscall.out", "kernel-syscall",
        "kernel", "/usr/bin/kml-bench", "--expect-mode", "kernel", "--path", "syscall",
        "--quick", "-v", "--label", "kernel-syscall", "--json",
        "/tmp/kml-runs/kernel-syscall.out"]
    assert sp[2].args == ("--expect-mode", "kernel", "--path", "call")
    s = guestrun.script(sp)
    assert ("kml-modes '-q' '-c' '/tmp/kml-runs/user.out' 'user' 'user' "
            "'/usr/bin/kml-bench' '--expect-mode' 'user' '--path' 'syscall' '--quick'" in s)


def test_three_modes_combined(fake):
    out = run_script(fake, "--quick")
    assert "# kml-begin kernel-call kernel " in out and "--quick" in out
    runs = guestrun.parse(out)
    assert set(runs) == {"user", "kernel-syscall", "kernel-call"}
    assert all(r.exit == 0 and r.doc for r in runs.values())
    assert runs["user"].output == ["[ 1/2] getppid ... 400.0 ns"]
    d = bench.combine(runs)
    assert d["schema"] == "kml-bench-modes/1"
    assert [m["status"] for m in d["modes"]] == ["ok", "ok", "ok"]
    row = d["rows"][0]
    assert row["name"] == "getppid"
    assert row["modes"]["user"]["ns_median"] == 400.0
    assert row["modes"]["kernel-call"]["path"] == "call"
    assert row["speedup"] == {"user/kernel-syscall": 4.0, "user/kernel-call": 8.0}
    sig = d["rows"][1]
    assert sig["modes"]["kernel-call"]["status"] == "skipped"
    assert sig["speedup"]["user/kernel-call"] is None
    assert bench.exit_status(d) == 0

    md = report.bench_markdown(d)
    assert "EMULATED" in md
    assert ("| Benchmark | user ns | user cycles | kernel-syscall ns | kernel-syscall cycles "
            "| kernel-call ns | kernel-call cycles | user/kernel-syscall | user/kernel-call |"
            in md)
    assert "| Null syscall: getppid | 400 | 1000 | 100 | 250 | 50.0 | 125 | 4.00 | 8.00 |" in md
    assert "| Signal delivery | 1000 | 2500 | 1000 | 2500 | skipped [1] |  | 1.00 | – |" in md
    assert "1. kernel-call, sig_deliver: skipped: not available through the call path: x" in md
    assert "## KML paper Table 2 layout (ns)" in md
    assert "| null | 400 | 100 | 50.0 | 4.00 | 8.00 |" in md
    assert "| getpid | n/a | n/a | n/a | – | – |" in md
    json.dumps(d)       # what ./kml bench saves


def test_kernel_modes_unavailable(fake):
    env = dict(__import__("os").environ, FAKE_KERNEL="0")
    d = bench.combine(guestrun.parse(run_script(fake, env=env)))
    assert [m["status"] for m in d["modes"]] == ["ok", "unavailable", "unavailable"]
    assert "runs at CPL 3" in d["modes"][1]["reason"]
    assert d["rows"][0]["modes"]["kernel-syscall"]["status"] == "unavailable"
    md = report.bench_markdown(d)
    assert "**unavailable**: kml-bench: expected to run in kernel mode" in md
    assert "| Null syscall: getppid | 400 | 1000 | – |  | – |  | – | – |" in md
    assert bench.exit_status(d) == 0


def doc(cpl, path="syscall", call_path=False):
    return {"cpl": cpl, "path": path, "call_path": call_path,
            "rows": [{"name": "getppid", "label": "g", "status": "ok",
                      "ns_median": 10.0, "cycles_median": 25.0, "unit": "op"}]}


def R(name, exit, doc=None, out="", data=None):
    """A parsed run: exit status, JSON document (or raw data), output."""
    return Run(name, "x", exit=exit, finished=True, output=out.splitlines(),
               data=json.dumps(doc) if doc is not None else data)


def test_mode_checks():
    user, ksys, kcall = bench.MODES
    assert bench.mode_status(user, R("user", 0, doc(3))) == ("ok", None)
    st, why = bench.mode_status(ksys, R("kernel-syscall", 0, doc(3)))
    assert st == "error" and "CPL 3, expected CPL 0" in why
    st, why = bench.mode_status(kcall, R("kernel-call", 0, doc(0)))
    assert st == "error" and "expected 'call'" in why
    st, why = bench.mode_status(kcall, R("kernel-call", 0, doc(0, "call")))
    assert st == "error" and "without the call path" in why
    assert bench.mode_status(kcall, R("kernel-call", 0, doc(0, "call", True)))[0] == "ok"
    assert bench.mode_status(user, R("user", 1, doc(3))) == \
        (Status.FAILED, "some rows failed (see the table)")
    st, why = bench.mode_status(user, R("user", 2, None, "usage: x\n"))
    assert st == "error" and "exited with 2: usage: x" in why
    st, why = bench.mode_status(user, R("user", 0, None, "", "{not json"))
    assert st == "error" and "invalid JSON" in why
    assert bench.mode_status(user, None)[0] == "error"


def marked(name, mode, exit, body="", data=None):
    """A result block as kml-modes prints it."""
    text = f"# kml-begin {name} {mode} /p\n{body}"
    if data is not None:
        text += f"# kml-data {name}\n{data}\n"
    return text + f"# kml-end {name} {mode} {exit}\n"


def test_parse_garbled_json_and_missing_modes():
    text = "noise\n" + marked("user", "user", 0, "oops\n", '{"cpl": 3,')
    runs = guestrun.parse(text)
    assert runs["user"].doc is None and runs["user"].json_error
    assert runs["user"].output == ["oops"]
    with pytest.raises(KmlError, match="no mode produced results"):
        bench.combine(runs)


def test_user_mode_failure_fails_the_bench():
    text = "".join(marked(m.name, m.mode, 0, data=json.dumps(
        doc(m.cpl, "call" if "call" in m.args else "syscall", "call" in m.args)))
        for m in bench.MODES)
    d = bench.combine(guestrun.parse(text))
    assert bench.exit_status(d) == 0
    d["modes"][0]["status"] = Status.FAILED
    assert bench.exit_status(d) == 1
    d["modes"][0]["status"] = Status.OK
    d["modes"][2]["status"] = Status.ERROR
    assert bench.exit_status(d) == 1


def test_check_only(fake):
    prog = fake / "kml-bench"
    bench.check_only("getppid,sig_deliver", prog)
    with pytest.raises(KmlError, match="unknown benchmark row.*nosuch.*valid: getppid"):
        bench.check_only("getppid,nosuch", prog)
    with pytest.raises(KmlError, match="comma-separated"):
        bench.check_only("getppid,", prog)
    bench.check_only("anything", fake / "missing")     # cannot check: the guest will


def test_fmt_num():
    assert [report.fmt_num(v) for v in (0.2721, 5.678, 56.78, 5678.9)] == \
        ["0.272", "5.68", "56.8", "5679"]


# ---- the file I/O part: a fake kml-iobench ------------------------------

# A stand-in for kml-iobench: --dir/--json/--label/--expect-mode like the
# real one.  The file system it reports is the first line of DIR/.fs (the
# test's "mount" writes it); throughput depends on the mode (kernel mode
# twice as fast) so that the ratios are known.  FAKE_KERNEL=0: never kernel
# mode; FAKE_IO_FAIL=1: a data mismatch in the 32 KiB read (exit 1).
FAKE_IO = textwrap.dedent("""\
    #!PYTHON
    import json, os, sys
    args = sys.argv[1:]
    def opt(name, default=None):
        return args[args.index(name) + 1] if name in args else default
    kernel = os.environ.get("FAKE_KERNEL", "1") == "1"
    mode, d = opt("--expect-mode"), opt("--dir")
    if mode == "kernel" and not kernel:
        print("kml-iobench: expected to run in kernel mode, but this process "
              "runs at CPL 3", file=sys.stderr)
        sys.exit(3)
    cpl = 0 if mode == "kernel" else 3
    fs = open(os.path.join(d, ".fs")).read().strip()
    fail = os.environ.get("FAKE_IO_FAIL") == "1"
    results = []
    for size in (16, 32):
        for i, op in enumerate(("write", "re-write", "read", "re-read")):
            kib_s = (1000.0 * size + 100 * i) * (2 if cpl == 0 else 1)
            r = {"size_kib": size, "op": op, "status": "ok", "reason": None,
                 "records": size // 16, "iters": 10, "kib_s_best": kib_s,
                 "kib_s_median": kib_s / 2, "kib_s_worst": kib_s / 4,
                 "ns_best": size * 1e9 / kib_s, "ns_median": 0, "ns_worst": 0}
            if fail and size == 32:
                r.update(status="failed", kib_s_best=None, ns_best=None,
                         reason="data mismatch at offset 8192 (record 0, expected "
                                "generation 1)" if op == "read" else
                                "not measured: read failed in run 1")
            results.append(r)
    print("[1/2] 16 KiB ... fake", file=sys.stderr)
    doc = {"schema": "kml-iobench/1", "label": opt("--label"), "accel": "tcg",
           "emulated": True, "cpu": "fake", "ncpus": 2, "kernel": "6.12.0-kml",
           "cmdline": "kml.accel=tcg", "dir": d, "fs": fs,
           "mount": {"source": fs, "point": d, "options": "rw,relatime"},
           "cpl": cpl, "mode": "kernel" if cpl == 0 else "user", "runs": 3,
           "run_ms": 20, "record_kib": 16, "fsync": False,
           "best": "highest throughput", "timed": "open() to close()",
           "verified": not fail, "results": results}
    with open(opt("--json"), "w") as f:
        json.dump(doc, f)
    if fail:
        print("kml-iobench: data mismatch: what was read is not what was written",
              file=sys.stderr)
    sys.exit(1 if fail else 0)
    """).replace("PYTHON", sys.executable)


def io_fs(root, ext4_setup=None):
    """The guest's two file systems, as directories under root whose .fs
    names the type (what the fake reports)."""
    t, e = root / "tmpfs-dir", root / "ext4-dir"
    return (bench.IoFs("tmpfs", str(t), f"mkdir -p '{t}' && echo tmpfs >'{t}/.fs'"),
            bench.IoFs("ext4", str(e), ext4_setup or
                       f"mkdir -p '{e}' && echo ext4 >'{e}/.fs'", disk=True))


@pytest.fixture
def fake_io(fake):
    prog = fake / "kml-iobench"
    prog.write_text(FAKE_IO)
    prog.chmod(0o755)
    return fake


def run_io_script(fake, fss, io_args=("--quick",), env=None):
    return run_specs(fake, bench.specs(["--quick"], list(io_args), io_fs=fss), env)


def test_specs_io_part():
    sp = {s.name: s for s in bench.specs(["--quick"], ["--quick"])}
    assert list(sp) == ["user", "kernel-syscall", "kernel-call", "io-tmpfs-user",
                        "io-tmpfs-kernel", "io-ext4-user", "io-ext4-kernel"]
    e = sp["io-ext4-kernel"]
    assert (e.mode, e.path, e.disk) == ("kernel", "/trusted/kml-iobench", (64, "ext4"))
    assert e.setup == "mkdir -p /mnt/ext4 && mount -t ext4 /dev/vda /mnt/ext4"
    assert e.argv()[5:] == ["kernel", "/usr/bin/kml-iobench", "--expect-mode", "kernel",
                            "--quick", "--dir", "/mnt/ext4", "-v", "--label", "io-ext4-kernel",
                            "--json", "/tmp/kml-runs/io-ext4-kernel.out"]
    assert sp["io-tmpfs-user"].disk is None
    s = guestrun.script(list(sp.values()))
    assert ("if { mkdir -p /mnt/ext4 && mount -t ext4 /dev/vda /mnt/ext4; } "
            "2>'/tmp/kml-runs/setup-2.err'; then" in s)
    # the latency options (e.g. --only) are not kml-iobench's
    only = bench.specs(["--only", "getppid"], [])
    assert all("--only" not in s.options for s in only[3:])
    assert "--only" in only[0].options
    # --no-io: no file I/O part
    assert [s.name for s in bench.specs()] == ["user", "kernel-syscall", "kernel-call"]


def test_io_part_combined(fake_io, tmp_path):
    out = run_io_script(fake_io, io_fs(tmp_path))
    assert "# kml-begin io-ext4-kernel kernel " in out and "--quick --dir" in out
    runs = guestrun.parse(out)
    assert set(runs) == {"user", "kernel-syscall", "kernel-call", "io-tmpfs-user",
                         "io-tmpfs-kernel", "io-ext4-user", "io-ext4-kernel"}
    d = bench.combine(runs, io_fs=io_fs(tmp_path))
    io = d["io"]
    assert [(p["name"], p["status"]) for p in io["modes"]] == [
        ("io-tmpfs-user", "ok"), ("io-tmpfs-kernel", "ok"),
        ("io-ext4-user", "ok"), ("io-ext4-kernel", "ok")]
    assert io["modes"][1]["result"]["cpl"] == 0
    assert [(r["fs"], r["size_kib"], r["op"]) for r in io["rows"][:5]] == [
        ("tmpfs", 16, "write"), ("tmpfs", 16, "re-write"), ("tmpfs", 16, "read"),
        ("tmpfs", 16, "re-read"), ("tmpfs", 32, "write")]
    assert len(io["rows"]) == 16
    row = io["rows"][9]
    assert (row["fs"], row["size_kib"], row["op"]) == ("ext4", 16, "re-write")
    assert row["modes"]["user"]["kib_s_best"] == 16100.0
    assert row["modes"]["kernel"]["kib_s_best"] == 32200.0
    assert row["ratio"] == 2.0
    assert (io["record_kib"], io["runs"], io["run_ms"]) == (16, 3, 20)
    assert bench.exit_status(d) == 0

    md = report.bench_markdown(d)
    assert "# kml-bench: system call latency in three modes, file I/O — EMULATED" in md
    assert ("## File I/O throughput (kml-iobench): ordinary vs kernel-mode process — "
            "EMULATED" in md)
    assert ("| File system | File size (KiB) | Operation | user KiB/s | kernel KiB/s "
            "| kernel/user |" in md)
    assert "| tmpfs | 16 | write | 16000 | 32000 | 2.00 |" in md
    assert "| ext4 | 32 | re-read | 32300 | 64600 | 2.00 |" in md
    assert "- ext4: `" + str(tmp_path / "ext4-dir") + "`, a 64 MiB image made on the host " \
        "with `mkfs.ext4 -F -q" in md
    assert "- method: IOzone-style" in md and "best of 3 runs" in md
    json.dumps(d)


def test_io_mount_failure_and_unavailable_kernel_mode(fake_io, tmp_path):
    env = dict(__import__("os").environ, FAKE_KERNEL="0")
    fss = io_fs(tmp_path, ext4_setup="echo 'mount: mounting /dev/vda failed: "
                "No such device' >&2; false")
    d = bench.combine(guestrun.parse(run_io_script(fake_io, fss, env=env)), io_fs=fss)
    st = {p["name"]: (p["status"], p["reason"]) for p in d["io"]["modes"]}
    assert st["io-tmpfs-user"] == ("ok", None)
    assert st["io-tmpfs-kernel"][0] == "unavailable"
    assert "runs at CPL 3" in st["io-tmpfs-kernel"][1]
    for name in ("io-ext4-user", "io-ext4-kernel"):
        assert st[name][0] == "error"
        assert st[name][1].startswith("not run: echo 'mount: mounting /dev/vda failed: ")
        assert "failed: mount: mounting /dev/vda failed: No such device" in st[name][1]
    # no ext4 rows: nothing to show; tmpfs rows have no kernel numbers
    assert {r["fs"] for r in d["io"]["rows"]} == {"tmpfs"}
    assert d["io"]["rows"][0]["modes"]["kernel"]["status"] == "unavailable"
    assert d["io"]["rows"][0]["ratio"] is None
    md = report.bench_markdown(d)
    assert "| tmpfs | 16 | write | 16000 | – | – |" in md
    assert "io-ext4-user: ordinary process, `/usr/bin/kml-iobench --expect-mode user` " \
        "— **error**: not run: " in md
    assert bench.exit_status(d) == 1        # the ordinary process failed on ext4


def test_io_data_mismatch_fails_the_bench(fake_io, tmp_path):
    env = dict(__import__("os").environ, FAKE_IO_FAIL="1")
    fss = io_fs(tmp_path)
    d = bench.combine(guestrun.parse(run_io_script(fake_io, fss, env=env)), io_fs=fss)
    p = d["io"]["modes"][0]
    assert p["status"] == "failed"
    assert p["reason"] == ("32 KiB read: data mismatch at offset 8192 (record 0, expected "
                           "generation 1) (and 3 more failed results)")
    assert p["result"] is not None             # the sizes that worked are shown
    by = {(r["fs"], r["size_kib"], r["op"]): r for r in d["io"]["rows"]}
    assert by[("tmpfs", 16, "read")]["ratio"] == 2.0
    assert by[("tmpfs", 32, "read")]["modes"]["user"]["status"] == "failed"
    assert by[("tmpfs", 32, "read")]["ratio"] is None
    md = report.bench_markdown(d)
    assert "| tmpfs | 32 | write | FAILED [1] | FAILED [2] | – |" in md
    assert "| tmpfs | 32 | read | FAILED [3] | FAILED [4] | – |" in md
    assert "| tmpfs | 32 | re-read | FAILED [1] | FAILED [2] | – |" in md
    assert "1. user, tmpfs 32 KiB: not measured: read failed in run 1\n" in md
    assert ("3. user, tmpfs 32 KiB: data mismatch at offset 8192 (record 0, expected "
            "generation 1)\n") in md
    assert bench.exit_status(d) == 1


def iodoc(cpl=3, fs="tmpfs", **kw):
    doc = {"schema": "kml-iobench/1", "cpl": cpl, "fs": fs, "dir": "/d", "verified": True,
           "results": [{"size_kib": 16, "op": "write", "status": "ok",
                        "kib_s_best": 10.0}]}
    doc.update(kw)
    return doc


def test_io_status_checks():
    tmpfs = bench.IO_FS[0]
    user, kernel = bench.IO_MODES
    assert bench.io_status(tmpfs, user, R("x", 0, iodoc())) == ("ok", None)
    st, why = bench.io_status(tmpfs, kernel, R("x", 0, iodoc(3)))
    assert st == "error" and "CPL 3, expected CPL 0" in why
    st, why = bench.io_status(tmpfs, user, R("x", 0, iodoc(fs="rootfs")))
    assert st == "error" and "wrote on 'rootfs' in /d, expected tmpfs" in why
    st, why = bench.io_status(tmpfs, user, R("x", 0, iodoc(schema="kml-bench/2")))
    assert st == "error" and "schema" in why
    st, why = bench.io_status(tmpfs, user, R("x", 0, iodoc(verified=False)))
    assert st == "error" and "did not verify" in why
    st, why = bench.io_status(tmpfs, user, R("x", 0, iodoc(results=[])))
    assert st == "error" and "no results" in why
    st, why = bench.io_status(tmpfs, user, R("x", 1, iodoc()))
    assert st == "error" and "reports no failed result" in why
    bad = iodoc(results=[{"size_kib": 16, "op": "write", "status": "failed",
                          "reason": "write: No space left on device"}])
    assert bench.io_status(tmpfs, user, R("x", 0, bad))[0] == "error"
    assert bench.io_status(tmpfs, user, R("x", 1, bad)) == (
        "failed", "16 KiB write: write: No space left on device")
    st, why = bench.io_status(tmpfs, user, R("x", 2, None, "kml-iobench: --dir /x: No such "
                                                         "file or directory\nTry it\n"))
    assert st == "error" and why == "kml-iobench exited with 2: Try it"
    st, why = bench.io_status(tmpfs, kernel, R("x", 127, None, "sh: /trusted/kml-iobench: "
                                                             "not found\n"))
    assert st == "error" and "exited with 127: sh: /trusted/kml-iobench: not found" in why
    assert bench.io_status(tmpfs, user, R("x", 0, None, "", "{"))[0] == "error"
    assert bench.io_status(tmpfs, user, None)[0] == "error"


def test_combine_without_io_part(fake):
    d = bench.combine(guestrun.parse(run_script(fake)))
    assert d["io"] is None
    assert "File I/O" not in report.bench_markdown(d)
    assert ("# kml-bench: system call latency in three modes — EMULATED"
            in report.bench_markdown(d))
