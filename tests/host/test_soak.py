"""Unit tests: ./kml soak (host/kmltool/soak.py): its plan and run specs,
the reading of stress-ng's output and YAML file and trinity's, the
verdict and the table; no VM."""
import shutil

import pytest

from kmltool import guestrun, soak
from kmltool.guestrun import Boot, Mode, Outcome, Run, Status
from kmltool.paths import KmlError

MEMBERS = {"os": ["fork", "sigsegv", "opcode", "pipe"], "cpu": ["cpu", "priv-instr", "tsc"],
           "vm": ["mmap", "fork"], "memory": ["pipe", "stream"], "interrupt": ["sigsegv", "timer"],
           "scheduler": ["fork", "futex"], "pipe": ["pipe", "splice"]}


def test_plan_defaults_and_unknown_config():
    p = soak.plan(short=True)
    assert [c.name for c in p.configs] == ["pti-off", "pti-on-dks", "pti-off-dks-reclaim"]
    assert (p.stressor_timeout, p.calls) == (2, 20000)
    assert soak.plan().stressor_timeout == 2
    p = soak.plan()
    assert len(p.configs) == 5 and p.calls == 100000
    assert soak.plan(names=["pti-on"], calls=7).calls == 7
    with pytest.raises(KmlError, match="unknown soak configuration nope"):
        soak.plan(names=["nope"])


def test_each_stressor_runs_once_in_its_first_class_and_excluded_never():
    plan = soak.stress_ng_plan(MEMBERS)
    ran = [s for _, run, _ in plan for s in run]
    assert len(ran) == len(set(ran))
    assert set(ran) == {"fork", "sigsegv", "pipe", "cpu", "tsc", "mmap", "stream",
                        "timer", "futex", "splice"}
    byclass = {k: (run, excl) for k, run, excl in plan}
    assert byclass["os"] == (["fork", "sigsegv", "pipe"], ["opcode"])
    assert byclass["vm"] == (["mmap"], ["fork"])            # fork ran in os
    assert "priv-instr" in byclass["cpu"][1]
    short = soak.stress_ng_plan(MEMBERS, short=True)
    assert {s for _, run, _ in short for s in run} <= set(soak.SHORT)


def test_specs_user_then_kernel_per_class_and_trinity_in_kernel_mode():
    p = soak.plan(names=["pti-on"], stressor_timeout=5, calls=300)
    specs = soak.specs(p, MEMBERS)
    names = [s.name for s in specs]
    assert names[:2] == ["pti-on.os.user", "pti-on.os.kernel"]
    assert names[-1] == "pti-on.trinity.kernel"
    os_k = specs[1]
    assert os_k.mode is Mode.KERNEL and os_k.append == "pti=on" and os_k.collect == "--yaml"
    assert os_k.args[os_k.args.index("--exclude") + 1] == "opcode"
    assert os_k.args[os_k.args.index("--timeout") + 1] == "5"
    t = specs[-1]
    assert t.mode is Mode.KERNEL and t.user == "nobody" and t.args[-1] == "300"
    assert t.argv()[1:3] == ["-u", "nobody"]
    assert t.args[t.args.index("-s") + 1] == str(soak.TRINITY_SEED)
    assert "-s 7 " in " ".join(soak.specs(soak.plan(names=["pti-on"], seed=7), MEMBERS)[-1].args)
    # every spec goes through kml-modes, the one guest-run layer
    assert all(s.argv()[0] == guestrun.HELPER for s in specs)


YAML = """\
---
system-info:
      stress-ng-version: 0.15.06
metrics:
    - stressor: fork
      bogo-ops: 1000
      bogo-ops-per-second-usr-sys-time: 90.0
      bogo-ops-per-second-real-time: 100.0

    - stressor: pipe
      bogo-ops: 50
      bogo-ops-per-second-real-time: 25.5
"""


def stress_run(name, mode, data=YAML, out=(), exit=0):
    r = Run(name, mode, "stress-ng", exit=exit, finished=True, output=list(out), data=data)
    return r


def test_stress_ng_results_per_stressor():
    out = ["stress-ng: fail:  [77] sigsegv: expected SIGSEGV, got none",
           "stress-ng: info:  [70] pipe: something"]
    res = soak.stressors(stress_run("x", "kernel", out=out), ["fork", "sigsegv", "pipe", "zzz"])
    assert res["fork"]["status"] is Status.OK and res["fork"]["rate"] == 100.0
    assert res["sigsegv"]["status"] is Status.FAILED
    assert res["sigsegv"]["reason"] == "expected SIGSEGV, got none"
    assert res["pipe"]["bogo_ops"] == 50
    assert res["zzz"]["status"] is Status.SKIPPED


def test_out_of_resources_is_stress_ngs_verdict_not_a_failure():
    out = ["stress-ng: fail:  [17345] mutex: could not create any pthreads",
           "stress-ng: warn:  [12462] process [17345] (mutex) aborted early, out of system "
           "resources",
           "stress-ng: fail:  [77] sigsegv: expected SIGSEGV, got none"]
    res = soak.stressors(stress_run("x", "kernel", out=out), ["mutex", "sigsegv"])
    assert res["mutex"]["status"] is Status.SKIPPED
    assert res["mutex"]["reason"] == soak.NO_RESOURCE + ": could not create any pthreads"
    assert res["sigsegv"]["status"] is Status.FAILED


def outcome(p, runs, failure=None):
    specs = soak.specs(p, MEMBERS)
    boots = []
    for c in p.configs:
        b = Boot(c.append, [s for s in specs if s.append == c.append], failure=failure)
        b.runs = {k: v for k, v in runs.items() if k.startswith(c.name + ".")}
        boots.append(b)
    return Outcome(boots)


def all_runs(p, kernel_out=(), kernel_yaml=YAML, trinity="[main] Ran 300 syscalls. Successes: 1"):
    runs = {}
    for s in soak.specs(p, MEMBERS):
        if s.program == soak.TRINITY:
            runs[s.name] = Run(s.name, "kernel", exit=0, finished=True, output=[trinity])
        else:
            k = s.mode is Mode.KERNEL
            runs[s.name] = stress_run(s.name, s.mode.value, kernel_yaml if k else YAML,
                                      kernel_out if k else ())
    return runs


def test_combine_clean_soak():
    p = soak.plan(names=["pti-on"], calls=300)
    data = soak.combine(p, MEMBERS, outcome(p, all_runs(p)))
    assert data["status"] is Status.OK, data["configs"][0]["problems"]
    c = data["configs"][0]
    assert c["stressors"]["fork"]["ratio"] == 1.0
    assert c["trinity"]["calls"] == 300
    md = soak.markdown(data)
    assert "| pti-on (`pti=on`) |" in md and "clean" in md and "EMULATED" in md


def test_kernel_only_failure_fails_the_soak_but_both_modes_does_not():
    p = soak.plan(names=["pti-on"], calls=300)
    runs = all_runs(p, kernel_out=["stress-ng: fail: [9] fork: fork failed: ENOMEM"])
    data = soak.combine(p, MEMBERS, outcome(p, runs))
    assert data["status"] is Status.FAILED
    assert any("fork fails in kernel mode only" in x for x in data["configs"][0]["problems"])
    # the same failure in user mode too: the environment's, reported only
    for name, r in runs.items():
        if name.endswith(".user"):
            r.output = ["stress-ng: fail: [9] fork: fork failed: ENOMEM"]
    data = soak.combine(p, MEMBERS, outcome(p, runs))
    assert data["status"] is Status.OK
    assert "failed in both modes" in soak.markdown(data)


def test_trinity_short_of_its_calls_or_a_bad_exit_fails():
    p = soak.plan(names=["pti-on"], calls=300)
    data = soak.combine(p, MEMBERS, outcome(p, all_runs(p, trinity="Ran 12 syscalls")))
    assert data["configs"][0]["trinity"]["status"] is Status.FAILED
    runs = all_runs(p)
    runs["pti-on.trinity.kernel"].exit = 139
    data = soak.combine(p, MEMBERS, outcome(p, runs))
    assert data["configs"][0]["trinity"]["status"] is Status.ERROR
    runs = all_runs(p)
    runs["pti-on.os.kernel"].exit = 139          # not one of stress-ng's own
    data = soak.combine(p, MEMBERS, outcome(p, runs))
    assert any("exited with 139" in x for x in data["configs"][0]["problems"])


def test_failed_boot_fails_every_part():
    p = soak.plan(names=["pti-on"], calls=300)
    data = soak.combine(p, MEMBERS, outcome(p, {}, failure="the kernel console shows 1 problem"))
    c = data["configs"][0]
    assert c["status"] is Status.FAILED and c["problems"][0].startswith("boot: ")
    assert "FAILED" in soak.markdown(data)


@pytest.mark.skipif(not shutil.which("stress-ng"), reason="stress-ng not installed (./kml setup)")
def test_class_members_from_the_real_stress_ng():
    os_ = soak.class_members("os")
    assert "fork" in os_ and "sigsegv" in os_
    with pytest.raises(KmlError):
        soak.class_members("no-such-class")


def test_skip_reasons_in_both_of_stress_ngs_forms():
    out = ["stress-ng: info:  [58] exec stressor must not run as root, skipping the stressor",
           "stress-ng: info:  [58] tsc stressor will be skipped, not a recognised Intel CPU",
           "stress-ng: info:  [58] mmap: using 2 instances"]
    res = soak.stressors(stress_run("x", "user", data="", out=out), ["exec", "tsc", "mmap"])
    assert res["exec"]["reason"] == "must not run as root, skipping the stressor"
    assert res["tsc"]["reason"].startswith("will be skipped")
    assert res["mmap"]["reason"] == "stress-ng did not run it"
