"""Unit tests: ./kml kstack-bench (host/kmltool/kstackbench.py): its run
specs, the checks of each boot's kml-ubench run (through guest/kml-modes,
run here), the combined result and its table (report.py); no VM.  The
last tests build the real kml-ubench and run it on this machine (very
short runs; the figures are not checked)."""
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import guest_prog
import pytest

from conftest import ROOT
from kmltool import cli, guestrun, kstackbench, report
from kmltool.commands import runner
from kmltool.commands.kstack_bench import KstackBench
from kmltool.guestrun import Run
from kmltool.paths import KmlError

TESTS = [("syscall", "System Call Overhead", "loops"),
         ("pipe", "Pipe Throughput", "loops"),
         ("context1", "Pipe-based Context Switching", "round trips"),
         ("spawn", "Process Creation", "processes"),
         ("execl", "Execl Throughput", "execs")]


def wake(status, median=None, mx=None, reason=None):
    """One kind of kml-ubench's wake-up latency."""
    return {"status": status, "reason": reason, "median_ns": median, "max_ns": mx,
            "asleep_kernel_stack_kib": 8 if median else None}


def ubench_doc(on=False, ops=1000.0, kstack=(600, 16600, 600), dyn=None, emulated=True,
               accel="tcg", threads=1000, failed=None, reclaim=False):
    """A kml-ubench JSON document: each test's median is ops x its index
    (min/max 10% around it); kstack: KernelStack before, blocked, after;
    dyn: dynamic_kstack_pages before, blocked, after (None: absent);
    failed: the name of a failed test."""
    mode = "on" if on else "reclaim" if reclaim else None
    cmdline = "console=ttyS0 kml.accel=tcg" + (f" dynamic_kstacks={mode}" if mode else "")
    tests = []
    for i, (name, label, unit) in enumerate(TESTS, 1):
        ok = name != failed
        med = ops * i
        tests.append({"name": name, "label": label, "unit": unit,
                      "status": "ok" if ok else "failed",
                      "reason": None if ok else "run 1: wrong sequence: sent 0, got 7 back",
                      "ops_s_median": med if ok else None,
                      "ops_s_min": med * 0.95 if ok else None,
                      "ops_s_max": med * 1.05 if ok else None,
                      "ops_s": [med * 0.95, med, med * 1.05] if ok else None})
    b, bl, a = kstack
    d0, d1, d2 = dyn or (None, None, None)
    idle = {"status": "ok", "reason": None, "threads": threads, "created": threads,
            "stack_kib": 64, "page_kib": 4, "settle_ms": 20.0, "return_ms": 30.0,
            "reclaim_ms": 2600.0 if reclaim else None, "release_ms": 40.0,
            "before": {"kernel_stack_kib": b, "dynamic_kstack_pages": d0},
            "blocked": {"kernel_stack_kib": bl, "dynamic_kstack_pages": d1},
            "after": {"kernel_stack_kib": a, "dynamic_kstack_pages": d2},
            "dynamic_stack_counter": dyn is not None,
            "kernel_stack_delta_kib": bl - b, "kernel_stack_per_thread_kib": (bl - b) / threads,
            "kernel_stack_returned_kib": bl - a,
            "dynamic_stack_pages_delta": d1 - d0 if dyn else None,
            "dynamic_stack_pages_returned": d1 - d2 if dyn else None,
            "wake_latency": {"trials": 15, "stack_kib": 12,
                             "warm": wake("ok", 50e3, 90e3),
                             "reclaimed": wake("ok", 70e3, 120e3) if reclaim else
                             wake("skipped", reason="only with dynamic_kstacks=reclaim"),
                             "deferred": wake("ok", 400e3, 900e3) if reclaim else
                             wake("skipped", reason="only with dynamic_kstacks=reclaim")}}
    return {"schema": "kml-ubench/1", "label": "ubench", "accel": accel,
            "emulated": emulated, "cpu": "fake", "ncpus": 2, "kernel": "6.12.117-kml",
            "cmdline": cmdline, "dynamic_kstacks": mode,
            "dynamic_kstacks_on": on, "runs": 3, "duration_ms": 300,
            "exe": "/usr/bin/kml-ubench", "tests": tests, "idle_threads": idle}


# A stand-in for kml-ubench: writes FAKE_DOC (JSON) to --json, with
# --label; exits with FAKE_EXIT.
FAKE = textwrap.dedent("""\
    #!PYTHON
    import json, os, sys
    args = sys.argv[1:]
    doc = json.loads(os.environ["FAKE_DOC"]) if os.environ.get("FAKE_DOC") else None
    print("syscall (ops/s): 1 2 3; median 2", file=sys.stderr)
    print("args:", *args, file=sys.stderr)
    if doc is not None:
        doc["label"] = args[args.index("--label") + 1]
        doc["args"] = args
        with open(args[args.index("--json") + 1], "w") as f:
            json.dump(doc, f)
    sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
    """).replace("PYTHON", sys.executable)


@pytest.fixture
def fake(tmp_path):
    guest_prog.fake_program(tmp_path / "kml-ubench", FAKE)
    return tmp_path


def run_boot(fake, boot, doc=None, exit=0, args=("--quick",)):
    """The boot's spec with the fake program, run here; (run_status's
    answer, the JSON document), and the output."""
    env = dict(os.environ, FAKE_EXIT=str(exit), FAKE_DOC=json.dumps(doc) if doc else "",
               PATH=f"{ROOT / 'guest'}:{os.environ['PATH']}")
    spec = next(s for s in kstackbench.specs() if s.name == boot.name)
    spec = replace(spec, program=str(fake / "kml-ubench"), options=tuple(args) + spec.options)
    script = guestrun.script([spec], tmp=str(fake / "res"))
    p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    run = guestrun.parse(p.stdout).get(boot.name)
    why = kstackbench.run_status(boot, run)
    return (None if why else run.doc, why), p.stdout


OFF, ON, RECLAIM = kstackbench.BOOTS


def test_boots_and_specs():
    assert [b.name for b in kstackbench.BOOTS] == ["off", "on", "reclaim"]
    assert OFF.append == "" and ON.append == "dynamic_kstacks=on"
    assert RECLAIM.append == "dynamic_kstacks=reclaim"
    off, on, rec = kstackbench.specs(True, 50)
    assert off.options == ("--quick", "--threads", "50", "-v", "--label", "off")
    assert (on.program, on.mode, on.collect, on.append) == (
        "/usr/bin/kml-ubench", "user", "--json", "dynamic_kstacks=on")
    # one boot each; the user's --append goes to both, after the boot's own
    assert [(a, [s.name for s in m]) for a, _, m in guestrun.group([off, on, rec])] == \
        [("", ["off"]), ("dynamic_kstacks=on", ["on"]),
         ("dynamic_kstacks=reclaim", ["reclaim"])]
    # the user's --append may not decide dynamic_kstacks (configs.merge)
    a = cli.build_parser().parse_args(["kstack-bench"])
    for ok in ("pti=off nokaslr", 'foo="a b'):      # unbalanced quotes: words
        a.append = ok
        assert runner.check_append(KstackBench(a)) is None
    for bad in ("dynamic_kstacks=off", "pti=on dynamic_kstacks", "dynamic_kstacks=on"):
        a.append = bad
        with pytest.raises(KmlError, match="kstack-bench sets dynamic_kstacks=on itself"):
            runner.check_append(KstackBench(a))


def test_ubench_args_and_parser():
    assert kstackbench.ubench_args() == []
    assert kstackbench.ubench_args(True, 50) == ["--quick", "--threads", "50"]
    a = cli.build_parser().parse_args(["kstack-bench", "--quick", "--threads", "10",
                                       "--append", "pti=off", "--smp", "1"])
    assert (a.cmd, a.quick, a.threads, a.append, a.smp) == ("kstack-bench", True, 10,
                                                            "pti=off", 1)
    a = cli.build_parser().parse_args(["kstack-bench"])
    assert (a.quick, a.threads) == (False, kstackbench.DEFAULT_THREADS)
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["kstack-bench", "--threads", "0"])


def test_guest_script_passes_options_and_reports(fake):
    (doc, why), out = run_boot(fake, OFF, ubench_doc(), args=("--quick", "--threads", "7"))
    assert why is None, why
    assert doc["label"] == "off"
    assert doc["args"][:3] == ["--quick", "--threads", "7"]
    assert "-v" in doc["args"] and "--json" in doc["args"]
    # progress streams in the block; the JSON follows it
    assert out.index("syscall (ops/s)") < out.index("# kml-data off")


def test_boot_checks(fake):
    (doc, why), _ = run_boot(fake, ON, ubench_doc(on=True))
    assert why is None and doc["dynamic_kstacks_on"] is True
    # the parameter must be on the command line in the on boot, and only there
    (doc, why), _ = run_boot(fake, ON, ubench_doc(on=False))
    assert doc is None and "lacks dynamic_kstacks=on" in why
    (doc, why), _ = run_boot(fake, OFF, ubench_doc(on=True))
    assert doc is None and "has dynamic_kstacks=on" in why
    # and reclaim in the reclaim boot, and only there
    (doc, why), _ = run_boot(fake, RECLAIM, ubench_doc(reclaim=True))
    assert why is None and doc["dynamic_kstacks"] == "reclaim"
    (doc, why), _ = run_boot(fake, RECLAIM, ubench_doc(on=True))
    assert doc is None and "has dynamic_kstacks=on" in why
    (doc, why), _ = run_boot(fake, ON, ubench_doc(reclaim=True))
    assert doc is None and "lacks dynamic_kstacks=on" in why
    (doc, why), _ = run_boot(fake, OFF, ubench_doc(reclaim=True))
    assert doc is None and "has dynamic_kstacks=reclaim" in why
    # a failed test: exit status 1, its name and reason in the message
    (doc, why), _ = run_boot(fake, OFF, ubench_doc(failed="context1"), exit=1)
    assert doc is None
    assert why == "kml-ubench failed: context1: run 1: wrong sequence: sent 0, got 7 back"
    (doc, why), _ = run_boot(fake, OFF, ubench_doc(failed="spawn"), exit=0)
    assert "exited with 0 but reports failed tests: spawn" in why
    # a crash, a usage error, no JSON
    (doc, why), _ = run_boot(fake, OFF, None, exit=139)
    assert why.startswith("kml-ubench exited with 139: args: --quick")
    (doc, why), _ = run_boot(fake, OFF, None, exit=1)
    assert why.startswith("kml-ubench exited with 1: ")
    (doc, why), _ = run_boot(fake, OFF, None, exit=0)
    assert why == "kml-ubench exited with 0 but wrote no JSON"
    d = ubench_doc()
    d["schema"] = "kml-bench/2"
    (doc, why), _ = run_boot(fake, OFF, d)
    assert "schema 'kml-bench/2'" in why
    d = ubench_doc()
    d["idle_threads"] = None
    (doc, why), _ = run_boot(fake, OFF, d)
    assert "no idle-threads" in why
    d = ubench_doc()
    d["idle_threads"].update(status="failed", reason="pthread_create (thread 9 of 10): x")
    (doc, why), _ = run_boot(fake, OFF, d, exit=1)
    assert why == "kml-ubench failed: idle-threads: pthread_create (thread 9 of 10): x"


def test_boot_docs_names_the_failed_boot():
    good = Run("off", "user", exit=0, finished=True, data=json.dumps(ubench_doc()))
    bad = Run("on", "user", exit=0, finished=True, data="{bad")
    with pytest.raises(KmlError, match="FAILED in the on boot: kml-ubench exited with 0 but "
                                       "wrote invalid JSON"):
        kstackbench.boot_docs({"off": good, "on": bad})
    with pytest.raises(KmlError, match="in the off boot: no output from this run"):
        kstackbench.boot_docs({})
    on = Run("on", "user", exit=0, finished=True, data=json.dumps(ubench_doc(on=True)))
    with pytest.raises(KmlError, match="in the reclaim boot: no output from this run"):
        kstackbench.boot_docs({"off": good, "on": on})
    rec = Run("reclaim", "user", exit=0, finished=True,
              data=json.dumps(ubench_doc(reclaim=True)))
    docs = kstackbench.boot_docs({"off": good, "on": on, "reclaim": rec})
    assert docs["on"]["dynamic_kstacks_on"] is True
    assert docs["reclaim"]["dynamic_kstacks"] == "reclaim"


def test_combine_without_kernel_support():
    """The kernel ignores dynamic_kstacks=on: ratios of about 1, no counter."""
    d = kstackbench.combine({"off": ubench_doc(), "on": ubench_doc(on=True, ops=1010.0,
                                                                   kstack=(600, 16608, 600))})
    assert d["schema"] == "kml-kstack-bench/1" and d["emulated"] is True
    assert [b["name"] for b in d["boots"]] == ["off", "on"]
    assert [b["append"] for b in d["boots"]] == ["", "dynamic_kstacks=on"]
    assert d["boots"][1]["dynamic_kstacks"] == "on"
    assert [r["name"] for r in d["rows"]] == [t[0] for t in TESTS]
    r = d["rows"][1]
    assert r["off"]["median"] == 2000.0 and r["on"]["median"] == 2020.0
    assert r["ratio"] == 1.01
    assert r["off"]["spread"] == 0.1
    m = d["memory"]
    assert (m["threads"], m["stack_kib"]) == (1000, 64)
    assert m["off"]["kernel_stack_delta_kib"] == 16000
    assert m["on"]["kernel_stack_delta_kib"] == 16008
    assert m["saving_pct"] == -0.05 and m["delta_ratio"] == 1.0005
    assert m["on"]["dynamic_stack_counter"] is False
    assert m["on"]["dynamic_stack_delta_kib"] is None
    assert len(d["notes"]) == 1 and "no dynamic_kstack_pages" in d["notes"][0]
    json.dumps(d)


def test_combine_with_dynamic_stacks():
    off = ubench_doc(kstack=(600, 16600, 600))
    on = ubench_doc(on=True, ops=900.0, kstack=(200, 4200, 200), dyn=(50, 1050, 50))
    d = kstackbench.combine({"off": off, "on": on}, {"off": "pti=off",
                                                      "on": "dynamic_kstacks=on pti=off"})
    assert d["boots"][0]["append"] == "pti=off"
    assert d["rows"][0]["ratio"] == 0.9
    m = d["memory"]
    assert m["saving_pct"] == 75.0 and m["delta_ratio"] == 0.25
    assert m["on"]["kernel_stack_per_thread_kib"] == 4.0
    assert m["on"]["dynamic_stack_pages_delta"] == 1000
    assert m["on"]["dynamic_stack_delta_kib"] == 4000
    assert d["notes"] == []


def test_combine_with_reclaim():
    off = ubench_doc(kstack=(600, 16600, 600))
    on = ubench_doc(on=True, ops=900.0, kstack=(200, 4200, 200), dyn=(50, 1050, 50))
    rec = ubench_doc(reclaim=True, ops=990.0, kstack=(600, 8600, 600),
                     dyn=(150, 2150, 150))
    d = kstackbench.combine({"off": off, "on": on, "reclaim": rec})
    assert [b["name"] for b in d["boots"]] == ["off", "on", "reclaim"]
    assert d["rows"][0]["ratio_reclaim"] == 0.99
    m = d["memory"]
    assert m["saving_reclaim_pct"] == 50.0 and m["delta_ratio_reclaim"] == 0.5
    assert m["reclaim"]["reclaim_ms"] == 2600.0 and m["reclaim"]["release_ms"] == 40.0
    md = report.kstack_markdown(d)
    assert ("| syscall: System Call Overhead (loops/s) | 1000 | 900 | 990 | 0.90 | 0.99 "
            "| 10.0% |") in md
    assert ("| KernelStack growth, 1000 idle threads (KiB) | 16000 | 4000 | 8000 | 0.25 "
            "| 0.50 | saving 75.0% / 50.0% |") in md
    assert "| waking and joining the 1000 idle threads (ms) | 40 | 40 | 40 | | | |" in md
    assert m["reclaim"]["wake"]["deferred"]["max_ns"] == 900e3
    assert m["on"]["wake"]["reclaimed"]["status"] == "skipped"
    assert ("| wake-up of a sleeper that just ran, median / max of 15 wake-ups (µs) "
            "| 50 / 90 | 50 / 90 | 50 / 90 | | | |") in md
    assert ("| wake-up of a sleeper whose stack pages were reclaimed (refill from the "
            "per-CPU pool), median / max of 15 wake-ups (µs) | – | – | 70 / 120 | | | |") in md
    assert ("| wake-up of such a sleeper when the pools are empty (refill left to kstackd), "
            "median / max of 15 wake-ups (µs) | – | – | 400 / 900 | | | |") in md


def test_combine_notes_and_missing_boot():
    d = kstackbench.combine({"off": ubench_doc(accel="kvm", emulated=False),
                             "on": ubench_doc(on=True, dyn=(0, 10, 0))})
    assert d["emulated"] is True            # one emulated boot labels all
    assert any("different accelerators" in n for n in d["notes"])
    with pytest.raises(KmlError, match="no results from the on boot"):
        kstackbench.combine({"off": ubench_doc()})


def test_markdown_table():
    on = ubench_doc(on=True, ops=900.0, kstack=(200, 4200, 200), dyn=(50, 1050, 50))
    md = report.kstack_markdown(kstackbench.combine({"off": ubench_doc(), "on": on}))
    lines = md.splitlines()
    assert lines[0].startswith("# kml kstack-bench: dynamic kernel stacks off vs on vs "
                               "reclaim — emulated (TCG)")
    assert "- on boot: kernel command line `console=ttyS0 kml.accel=tcg " \
           "dynamic_kstacks=on`" in lines
    i = lines.index("| Test | off, emulated (TCG) | on, emulated (TCG) | reclaim, emulated "
                    "(TCG) | on/off | reclaim/off | spread / saving |")
    assert lines[i + 1] == "|---|---:|---:|---:|---:|---:|---:|"
    # no reclaim boot: its cells are dashes
    assert lines[i + 2] == ("| syscall: System Call Overhead (loops/s) | 1000 | 900 | – "
                            "| 0.90 | – | 10.0% |")
    assert lines[i + 4] == ("| context1: Pipe-based Context Switching (round trips/s) "
                            "| 3000 | 2700 | – | 0.90 | – | 10.0% |")
    assert lines[i + 7] == ("| KernelStack growth, 1000 idle threads (KiB) | 16000 | 4000 "
                            "| – | 0.25 | – | saving 75.0% / – |")
    assert lines[i + 8] == "| KernelStack per idle thread (KiB) | 16.00 | 4.00 | – | | | |"
    assert lines[i + 9] == ("| KernelStack returned after the join (KiB) | 16000 | 4000 "
                            "| – | | | |")
    assert lines[i + 10] == ("| dynamic_kstack_pages growth, 1000 idle threads (KiB) "
                             "| absent | 4000 | – | | | |")
    assert "Notes:" not in md
    # not emulated: no label; a failed figure: a dash
    off = ubench_doc(emulated=False, accel="kvm")
    off["tests"][0]["ops_s_median"] = None
    md = report.kstack_markdown(kstackbench.combine(
        {"off": off, "on": ubench_doc(on=True, emulated=False, accel="kvm")}))
    assert "emulated" not in md.lower()
    assert "| syscall: System Call Overhead (loops/s) | – | 1000 | – | – | – | 10.0% |" in md
    assert ("| dynamic_kstack_pages growth, 1000 idle threads (KiB) | absent | absent | – "
            "| | | |") in md
    assert "Notes:\n\n1. the on boot's /proc/vmstat has no dynamic_kstack_pages" in md


def test_save(tmp_path, monkeypatch):
    monkeypatch.setattr(report.paths, "BENCH_OUT", tmp_path / "bench")
    d = kstackbench.combine({"off": ubench_doc(), "on": ubench_doc(on=True)})
    stem = report.save(d, "table\n", prefix="kstack-")
    assert stem.name.startswith("kstack-")
    assert json.loads(stem.with_suffix(".json").read_text())["schema"] == kstackbench.SCHEMA
    assert stem.with_suffix(".md").read_text() == "table\n"


# ---- the real kml-ubench, run on this machine ------------------------

@pytest.fixture(scope="module")
def ubench(tmp_path_factory):
    return guest_prog.build(tmp_path_factory, "kml-ubench")


FAST = ("--runs", "2", "--duration-ms", "20", "--threads", "20")


def test_real_ubench_json_and_table(ubench, tmp_path):
    j = tmp_path / "u.json"
    p = subprocess.run([str(ubench), *FAST, "--label", "t", "--json", str(j)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(j.read_text())
    assert (doc["schema"], doc["label"], doc["runs"], doc["duration_ms"]) == \
        ("kml-ubench/1", "t", 2, 20)
    assert [t["name"] for t in doc["tests"]] == [t[0] for t in TESTS]
    for t in doc["tests"]:
        assert t["status"] == "ok", t
        assert t["ops_s_max"] >= t["ops_s_median"] >= t["ops_s_min"] > 0
        assert len(t["ops_s"]) == 2
    idle = doc["idle_threads"]
    assert (idle["status"], idle["threads"], idle["created"], idle["stack_kib"]) == \
        ("ok", 20, 20, 64)
    assert idle["before"]["kernel_stack_kib"] is not None
    assert isinstance(doc["dynamic_kstacks_on"], bool)
    assert doc["dynamic_kstacks_reclaim"] is False
    assert idle["reclaim_ms"] is None and idle["release_ms"] >= 0
    w = idle["wake_latency"]
    assert (w["trials"], w["stack_kib"]) == (15, 12)
    assert w["warm"]["status"] == "ok", w
    assert w["warm"]["max_ns"] >= w["warm"]["median_ns"] > 0
    for kind in ("reclaimed", "deferred"):     # not a reclaim boot
        assert w[kind]["status"] == "skipped" and "reclaim" in w[kind]["reason"]
        assert w[kind]["median_ns"] is None
    assert "## Wake-up latency of a sleeper (12 KiB of kernel stack used" in p.stdout
    assert "| Test | UnixBench | op | ops/s (median) | min | max |" in p.stdout
    assert "## Kernel stack memory: 20 idle threads" in p.stdout
    # what the host makes of it
    run = Run("off", "user", exit=0, finished=True, data=j.read_text())
    assert kstackbench.run_status(ON if doc["dynamic_kstacks_on"] else OFF, run) is None


def test_real_ubench_failures(ubench):
    p = subprocess.run([str(ubench), "--only", "context1,syscall", "--runs", "1",
                        "--duration-ms", "20", "--inject-context1-error", "--json", "-"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "kml-ubench: context1: run 1: wrong sequence: sent 0, got 7 back" in p.stderr
    doc = json.loads(p.stdout)
    assert [(t["name"], t["status"]) for t in doc["tests"]] == \
        [("syscall", "ok"), ("context1", "failed")]
    assert doc["idle_threads"] is None
    p = subprocess.run([str(ubench), "--only", "nosuch"], capture_output=True, text=True)
    assert p.returncode == 2 and "unknown test 'nosuch'" in p.stderr
    p = subprocess.run([str(ubench), "--execl-child", "2"], capture_output=True, text=True)
    assert p.returncode == 0
    p = subprocess.run([str(ubench), "--json", "/nonexistent/x.json"], capture_output=True,
                       text=True)
    assert p.returncode == 1 and "/nonexistent/x.json" in p.stderr
