"""Unit tests: ./kml bench's three modes (host/kmltool/bench.py), with a
fake kml-bench; no VM."""
import io
import json
import subprocess
import sys
import textwrap

import pytest

from kmltool import bench
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


def run_script(fake, *args, env=None):
    script = bench.guest_script(str(fake / "kml-bench"), str(fake / "trusted"), str(fake))
    p = subprocess.run(["sh", "-c", script, "sh", *args], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_guest_script_runs_three_modes():
    s = bench.guest_script()
    assert "cp '/usr/bin/kml-bench' '/trusted/kml-bench'" in s
    assert ("mode user '/usr/bin/kml-bench' '--expect-mode' 'user' '--path' 'syscall' \"$@\""
            in s)
    assert ("mode kernel-syscall '/trusted/kml-bench' '--expect-mode' 'kernel' "
            "'--path' 'syscall' \"$@\"" in s)
    assert ("mode kernel-call '/trusted/kml-bench' '--expect-mode' 'kernel' "
            "'--path' 'call' \"$@\"" in s)


def test_three_modes_combined(fake):
    out = run_script(fake, "--quick")
    assert "== kml-bench, mode kernel-call:" in out and "--quick" in out
    runs = bench.parse_output(out)
    assert set(runs) == {"user", "kernel-syscall", "kernel-call"}
    assert all(r.exit == 0 and r.doc for r in runs.values())
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

    md = bench.markdown(d)
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
    json.dumps(d)       # what cmd_bench saves


def test_kernel_modes_unavailable(fake):
    env = dict(__import__("os").environ, FAKE_KERNEL="0")
    d = bench.combine(bench.parse_output(run_script(fake, env=env)))
    assert [m["status"] for m in d["modes"]] == ["ok", "unavailable", "unavailable"]
    assert "runs at CPL 3" in d["modes"][1]["reason"]
    assert d["rows"][0]["modes"]["kernel-syscall"]["status"] == "unavailable"
    md = bench.markdown(d)
    assert "**unavailable**: kml-bench: expected to run in kernel mode" in md
    assert "| Null syscall: getppid | 400 | 1000 | – |  | – |  | – | – |" in md
    assert bench.exit_status(d) == 0


def doc(cpl, path="syscall", call_path=False):
    return {"cpl": cpl, "path": path, "call_path": call_path,
            "rows": [{"name": "getppid", "label": "g", "status": "ok",
                      "ns_median": 10.0, "cycles_median": 25.0, "unit": "op"}]}


def test_mode_checks():
    user, ksys, kcall = bench.MODES
    assert bench.mode_status(user, bench.ModeRun("user", 0, doc(3))) == ("ok", None)
    st, why = bench.mode_status(ksys, bench.ModeRun("kernel-syscall", 0, doc(3)))
    assert st == "error" and "CPL 3, expected CPL 0" in why
    st, why = bench.mode_status(kcall, bench.ModeRun("kernel-call", 0, doc(0)))
    assert st == "error" and "expected 'call'" in why
    st, why = bench.mode_status(kcall, bench.ModeRun("kernel-call", 0, doc(0, "call")))
    assert st == "error" and "without the call path" in why
    assert bench.mode_status(kcall, bench.ModeRun("kernel-call", 0,
                                                  doc(0, "call", True)))[0] == "ok"
    assert bench.mode_status(user, bench.ModeRun("user", 1, doc(3)))[0] == "rows failed"
    st, why = bench.mode_status(user, bench.ModeRun("user", 2, None, "usage: x\n"))
    assert st == "error" and "exited with 2: usage: x" in why
    st, why = bench.mode_status(user, bench.ModeRun("user", 0, None, "", "Expecting value"))
    assert st == "error" and "invalid JSON" in why
    assert bench.mode_status(user, None)[0] == "error"


def test_parse_output_garbled_json_and_missing_modes():
    M = bench.MARK
    text = (f"noise\n{M} begin user 0\n{M} json user\n{{\"cpl\": 3,\n{M} stderr user\n"
            f"oops\n{M} end user\n")
    runs = bench.parse_output(text)
    assert runs["user"].doc is None and runs["user"].json_error
    assert runs["user"].stderr == "oops\n"
    with pytest.raises(KmlError, match="no mode produced results"):
        bench.combine(runs)


def test_user_mode_failure_fails_the_bench():
    M = bench.MARK
    text = "".join(f"{M} begin {m.name} 0\n{M} json {m.name}\n"
                   + json.dumps(doc(m.cpl, "call" if "call" in m.args else "syscall",
                                    "call" in m.args))
                   + f"\n{M} end {m.name}\n" for m in bench.MODES)
    d = bench.combine(bench.parse_output(text))
    assert bench.exit_status(d) == 0
    d["modes"][0]["status"] = "rows failed"
    assert bench.exit_status(d) == 1
    d["modes"][0]["status"] = "ok"
    d["modes"][2]["status"] = "error"
    assert bench.exit_status(d) == 1


def test_stream_until_hides_everything_after_the_marker():
    out = io.BytesIO()
    s = bench.StreamUntil(out=out)
    data = b"progress 1\nprogress 2\n" + bench.MARK.encode() + b" begin user 0\n{json}\n"
    for i in range(0, len(data), 3):
        s(data[i:i + 3])
    assert out.getvalue() == b"progress 1\nprogress 2\n"


def test_check_only(fake):
    prog = fake / "kml-bench"
    bench.check_only("getppid,sig_deliver", prog)
    with pytest.raises(KmlError, match="unknown benchmark row.*nosuch.*valid: getppid"):
        bench.check_only("getppid,nosuch", prog)
    with pytest.raises(KmlError, match="comma-separated"):
        bench.check_only("getppid,", prog)
    bench.check_only("anything", fake / "missing")     # cannot check: the guest will


def test_fmt_num():
    assert [bench.fmt_num(v) for v in (0.2721, 5.678, 56.78, 5678.9)] == \
        ["0.272", "5.68", "56.8", "5679"]
