"""Unit tests: ./kml fuzz (host/kmltool/fuzz.py, commands/fuzz.py): the
plan and its options, the driver's TAP, the per-configuration verdict,
the reproduce command, the JSON, and the command end to end with its
build and boots faked; no VM.  The guest programs themselves are built
and run on this host (both "modes" as ordinary processes) when gcc can
link statically."""
import json
import shutil
import subprocess

import pytest

from kmltool import cli, configs, fuzz, guestrun, qemu
from kmltool.commands import fuzz as fuzz_cmd
from kmltool.guestrun import Boot, Mode, Outcome, Run
from kmltool.paths import KmlError

from conftest import ROOT

TAP = """\
# /usr/lib/kml/kml-fuzz-case: CPL 3, /trusted/kml-fuzz-case: CPL 0
# kml-fuzz: seeds from 5, 48 operations, 20 s per case
ok 1 seed 5
not ok 2 seed 6 user: exit 0 out 3 lines #0badf00d kernel: signal 11 out 2 lines #12345678
#   line 3: user:   end sum 0x1 regs 0x2
#   line 3: kernel: (end)
ok 3 seed 7 # hang in both modes
# progress: 500 programs per mode, 1 divergences, 60 s
ok 4 seed 8
1..4
# kml-fuzz: 4 programs per mode, 1 divergences, seeds 5..8, 3 s
"""


def test_parse_tap():
    tap = fuzz.parse(TAP.splitlines())
    assert tap.results == 4 and tap.count == 4 and tap.last_seed == 8
    assert tap.summary == {"count": 4, "divergences": 1, "first": 5, "last": 8}
    (d,) = tap.divergences
    assert (d.seed, d.user, d.kernel) == (6, "exit 0 out 3 lines #0badf00d",
                                          "signal 11 out 2 lines #12345678")
    assert d.detail == ["line 3: user:   end sum 0x1 regs 0x2", "line 3: kernel: (end)"]
    assert tap.hangs_both == [7] and tap.bail is None


def test_parse_cut_short_and_bail_out():
    tap = fuzz.parse(TAP.splitlines()[:4])
    assert tap.summary is None and tap.count == 2 and tap.last_seed == 6
    assert fuzz.hang_seed(tap, 5) == 7
    assert fuzz.hang_seed(fuzz.parse([]), 5) == 5
    tap = fuzz.parse(["Bail out! /trusted/kml-fuzz-case runs at CPL 3"])
    assert tap.bail == "/trusted/kml-fuzz-case runs at CPL 3" and tap.count == 0


def test_plan_defaults_kernel_and_errors():
    p = fuzz.plan()
    assert [c.name for c in p.configs] == ["smp2-pti-off", "smp2-pti-on-dks"]
    assert (p.count, p.seed, p.ops, p.avoid, p.minutes) == (2000, 1, 48, None, None)
    p = fuzz.plan(kernel="debug")
    assert [c.name for c in p.configs] == ["debug-smp2-pti-on-dks",
                                           "debug-smp2-pti-off-dks-reclaim"]
    p = fuzz.plan(["smp1-pti-on", "smp1-pti-on"], count=7, seed=0, avoid="branch@hole")
    assert [c.name for c in p.configs] == ["smp1-pti-on"]
    assert (p.count, p.seed, p.avoid) == (7, 0, "branch@hole")
    with pytest.raises(KmlError, match="unknown configuration nope"):
        fuzz.plan(["nope"])
    with pytest.raises(KmlError, match="boot.s. another kernel"):
        fuzz.plan(["smp2-pti-off"], kernel="debug")
    with pytest.raises(KmlError, match="--avoid"):
        fuzz.plan(avoid="a;rm -rf")


def test_spec_runs_the_driver_through_kml_modes():
    c = configs.TESTS["smp2-pti-on-dks"]
    s = fuzz.spec(c, 100, 9)
    assert s.mode is Mode.USER and s.append == "pti=on dynamic_kstacks=on"
    assert s.argv() == [guestrun.HELPER, "smp2-pti-on-dks.fuzz", "user", "kml-fuzz",
                        "-n", "100", "-s", "9"]
    s = fuzz.spec(c, 10, 3, ops=16, avoid="int", seconds=120.7, batch=2)
    assert s.name == "smp2-pti-on-dks.fuzz.2"
    assert s.args == ("-n", "10", "-s", "3", "-o", "16", "-a", "int", "-T", "120")


def test_reproduce_command():
    c = configs.TESTS["smp2-pti-off"]
    assert fuzz.reproduce(c, 42) == \
        "./kml run --smp 2 --append pti=off -- kml-fuzz -n 1 -s 42"
    d = configs.TESTS["debug-smp2-pti-on-dks"]
    assert fuzz.reproduce(d, 7, ops=16, avoid="branch@hole", user_append="nokaslr") == (
        "./kml run --kernel debug --smp 2 --append 'pti=on dynamic_kstacks=on nokaslr' "
        "-- kml-fuzz -n 1 -s 7 -o 16 -a branch@hole")


def test_result_clean_divergent_and_hung(tmp_path):
    r = fuzz.ConfigResult("smp2-pti-off", "pti=off", "default", 48)
    r.add_batch(fuzz.parse(["ok 1 seed 1", "ok 2 seed 2",
                            "# kml-fuzz: 2 programs per mode, 0 divergences, seeds 1..2"]), 1)
    assert r.clean and r.count == 2 and r.seeds == [[1, 2]]
    assert fuzz.report(r) == ["smp2-pti-off: 2 programs per mode clean"]
    r.add_batch(fuzz.parse(TAP.splitlines()), 5, elapsed=12.34)
    assert not r.clean and r.count == 6 and r.seeds == [[1, 2], [5, 8]]
    assert r.divergences[0]["reproduce"].endswith("-- kml-fuzz -n 1 -s 6")
    lines = fuzz.report(r)
    assert lines[0] == "smp2-pti-off: 1 divergence(s) in 6 programs per mode"
    assert "  seed 6: user: exit 0 out 3 lines #0badf00d; kernel: signal 11 out 2 lines " \
           "#12345678" in lines
    # the VM hangs during the seed after the last result
    r.add_batch(fuzz.parse(["ok 1 seed 20"]), 20, failure="timeout: the VM did not finish "
                "in time\nfull console log: /x/console.log")
    assert any("the VM hung at seed 21" in p and "-s 21" in p for p in r.problems)
    path = fuzz.save(r, tmp_path)
    doc = json.loads(path.read_text())
    assert path.name == "smp2-pti-off.json"
    assert (doc["count"], doc["clean"], doc["schema"]) == (7, False, "kml-fuzz/1")
    assert doc["divergences"][0]["seed"] == 6 and doc["elapsed_s"] == 12.3


def test_result_without_summary_is_a_problem():
    r = fuzz.ConfigResult("smp2-pti-off", "pti=off", "default", 48)
    r.add_batch(fuzz.parse(["ok 1 seed 1"]), 1)
    assert not r.clean and "no summary" in r.problems[0]
    r = fuzz.ConfigResult("smp2-pti-off", "pti=off", "default", 48)
    r.add_batch(fuzz.parse(["Bail out! CPL 3"]), 1)
    assert r.problems == ["kml-fuzz stopped: CPL 3"]


def test_filter_shows_divergences_and_progress_only(capsys):
    f = fuzz_cmd.Filter()
    text = "# kml-begin x user kml-fuzz\n" + TAP + "# kml-end x user 1\n"
    f(text[:50].encode())
    f(text[50:].encode())
    out = capsys.readouterr().out
    assert "not ok 2 seed 6" in out and "# progress: 500" in out and "#   line 3" in out
    assert "ok 1 seed 5" not in out and "kml-begin" not in out and "kml-end" not in out


@pytest.fixture
def fake_boots(tmp_path, monkeypatch):
    """./kml fuzz with the build faked and every boot answered by
    answer(spec) -> (output lines, failure)."""
    booted = []
    answers = {}

    def boot(specs, prelude=(), append="", runner=None, **vm):
        (s,) = specs
        full = configs.merge(s.append, append, "test")
        booted.append((s, full, vm))
        lines, failure = answers.get("fn", lambda s: (TAP.splitlines(), None))(s)
        b = Boot(full, specs, failure=failure, code=124 if failure else 0)
        b.runs = {s.name: Run(s.name, "user", "kml-fuzz", exit=0, finished=True,
                              output=list(lines))}
        return Outcome([b])

    monkeypatch.setattr(guestrun, "boot", boot)
    monkeypatch.setattr(fuzz_cmd, "build_all", lambda *a, **k: booted.append("build"))
    monkeypatch.setattr(fuzz, "OUT", tmp_path)
    monkeypatch.setattr(qemu, "choose_accel", lambda: "tcg")
    return booted, answers


def test_command_default_two_configurations(fake_boots, tmp_path, capsys):
    booted, _ = fake_boots
    assert cli.main(["fuzz", "--count", "4", "--seed", "5", "--append", "nokaslr"]) == 1
    assert booted[0] == "build"
    runs = booted[1:]
    assert [(s.name, full) for s, full, _ in runs] == [
        ("smp2-pti-off.fuzz", "pti=off nokaslr"),
        ("smp2-pti-on-dks.fuzz", "pti=on dynamic_kstacks=on nokaslr")]
    s, _, vm = runs[0]
    assert s.args == ("-n", "4", "-s", "5") and vm["smp"] == 2
    assert vm["kernel"].name == "default" and vm["timeout"] == 3600
    out = capsys.readouterr().out
    assert "smp2-pti-off: 1 divergence(s) in 4 programs per mode" in out
    assert "reproduce: ./kml run --smp 2 --append 'pti=off nokaslr' -- kml-fuzz -n 1 -s 6" in out
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [
        "smp2-pti-off.json", "smp2-pti-on-dks.json"]


def test_command_clean_run_exits_zero(fake_boots, capsys):
    booted, answers = fake_boots
    answers["fn"] = lambda s: ([f"ok 1 seed {s.args[3]}",
                                "# kml-fuzz: 1 programs per mode, 0 divergences, seeds 1..1"],
                               None)
    assert cli.main(["fuzz", "--no-build", "--count", "1", "--config", "smp1-pti-on"]) == 0
    assert "build" not in booted
    (s, full, vm), = booted
    assert (s.name, full, vm["smp"]) == ("smp1-pti-on.fuzz", "pti=on", 1)
    assert "smp1-pti-on: 1 programs per mode clean" in capsys.readouterr().out


def test_command_vm_hang_fails(fake_boots, capsys):
    _, answers = fake_boots
    answers["fn"] = lambda s: (["ok 1 seed 1", "ok 2 seed 2"], "timeout: the VM did not "
                               "finish in time\nfull console log: /c.log")
    assert cli.main(["fuzz", "--no-build", "--config", "smp2-pti-off"]) == 1
    out = capsys.readouterr().out
    assert "the VM hung at seed 3" in out and "-- kml-fuzz -n 1 -s 3" in out


def test_command_minutes_boots_batches_with_fresh_seeds(fake_boots, monkeypatch, capsys):
    booted, answers = fake_boots
    clock = [0.0]
    monkeypatch.setattr(fuzz_cmd.time, "monotonic", lambda: clock[0])

    def answer(s):
        clock[0] += 200             # each boot uses 200 s
        return (["ok 1 seed 1", "# kml-fuzz: 1 programs per mode, 0 divergences, "
                 "seeds 1..1"], None)
    answers["fn"] = answer
    seeds = iter([111, 222, 333, 444])
    monkeypatch.setattr(fuzz_cmd, "fresh_seed", lambda: next(seeds))
    assert cli.main(["fuzz", "--no-build", "--minutes", "10", "--config",
                     "smp2-pti-off"]) == 0
    firsts = [s.args[3] for s, _, _ in booted]
    assert firsts == ["111", "222", "333"]          # 600 s: three boots of 200 s
    s, _, vm = booted[0]
    assert s.args[:2] == ("-n", str(fuzz_cmd.BATCH_MAX)) and "-T" in s.args
    assert vm["timeout"] == int(s.args[s.args.index("-T") + 1]) + 600
    assert "first seed 111" in capsys.readouterr().err


def test_command_options_refused():
    assert cli.main(["fuzz", "--fresh", "--seed", "3"]) == 1
    assert cli.main(["fuzz", "--config", "smp2-pti-off", "--append", "pti=on"]) == 1
    with pytest.raises(SystemExit):
        cli.main(["fuzz", "--config", "nope"])


# ---- the guest programs, on this host ---------------------------------

@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("no gcc")
    out = tmp_path_factory.mktemp("fuzz")
    built = {}
    for name in ("kml-fuzz", "kml-fuzz-case"):
        p = subprocess.run([gcc, "-O2", "-Wall", "-Wextra", "-Werror", "-static", "-o",
                            str(out / name), str(ROOT / "guest" / "fuzz" / f"{name}.c")],
                           capture_output=True, text=True)
        if p.returncode != 0 and "cannot find -lc" in p.stderr:
            pytest.skip("no static C library")
        assert p.returncode == 0, p.stderr
        built[name] = str(out / name)
    return built


def case(progs, *args):
    return subprocess.run([progs["kml-fuzz-case"], *args], capture_output=True, text=True,
                          timeout=30)


def test_case_is_deterministic_and_ends(progs):
    ends = 0
    for seed in range(1, 40):
        a, b = case(progs, str(seed)), case(progs, str(seed))
        assert (a.returncode, a.stdout) == (b.returncode, b.stdout), seed
        ends += a.stdout.endswith("\n") and a.stdout.splitlines()[-1].startswith("end ")
    assert ends > 0
    assert case(progs, "--cpl").stdout == "cpl 3\n"


def test_case_avoid_and_usage(progs):
    p = case(progs, "3", "32", "--avoid", "branch,stack,int,trap,div,x87,sse,load,store,"
             "syscall,int80")
    assert p.returncode == 0 and p.stdout.startswith("end sum "), p.stdout
    p = case(progs, "3", "--avoid", "nope")
    assert p.returncode == 2 and "not a kind, a class or KIND@CLASS" in p.stderr
    assert case(progs, "3", "0").returncode == 2


def test_driver_same_program_in_both_modes_is_clean(progs):
    p = subprocess.run([progs["kml-fuzz"], "-C", "-U", progs["kml-fuzz-case"], "-K",
                        progs["kml-fuzz-case"], "-n", "30", "-s", "100"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout
    tap = fuzz.parse(p.stdout.splitlines())
    assert tap.summary == {"count": 30, "divergences": 0, "first": 100, "last": 129}
    assert tap.results == 30


def test_driver_reports_a_divergence_and_a_hang(progs, tmp_path):
    other = tmp_path / "other"
    other.write_text("#!/bin/sh\n[ \"$1\" = 2 ] && exec sleep 100\necho different\n")
    other.chmod(0o755)
    p = subprocess.run([progs["kml-fuzz"], "-C", "-U", progs["kml-fuzz-case"], "-K",
                        str(other), "-n", "2", "-s", "1", "-t", "2"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    tap = fuzz.parse(p.stdout.splitlines())
    assert [d.seed for d in tap.divergences] == [1, 2]
    assert tap.divergences[0].kernel.startswith("exit 0 out 1 lines")
    assert tap.divergences[0].detail[:2] == ["line 1: user:   (end)", "line 1: kernel: different"]
    assert tap.divergences[1].kernel.startswith("hang")


def test_driver_bails_out_without_kernel_mode(progs):
    p = subprocess.run([progs["kml-fuzz"], "-U", progs["kml-fuzz-case"], "-K",
                        progs["kml-fuzz-case"], "-n", "1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert fuzz.parse(p.stdout.splitlines()).bail.startswith(progs["kml-fuzz-case"])
