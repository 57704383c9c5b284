"""Unit tests: the commands' one pipeline (commands/runner.py) and its
rule for partial results; every command dispatches through func."""
import json

import pytest

from kmltool import cli, commands, configs, paths
from kmltool.commands import runner
from kmltool.guestrun import Boot, Outcome
from kmltool.paths import KmlError


class Fake(runner.Measurement):
    what, prefix = "fake", "fake-"

    def __init__(self, a, outcome, log, status=0, empty=False):
        super().__init__(a)
        self.outcome, self.log, self.status, self.empty = outcome, log, status, empty

    def configs(self):
        return [configs.PATHLEN["pti-off"]]

    def build(self):
        self.log.append(f"build {self.what}")

    def specs(self):
        return []

    def boot(self, specs):
        self.log.append(f"boot {self.what}")
        return self.outcome

    def combine(self, out):
        if self.empty:
            raise KmlError("no runs")
        return {"runs": len(out.boots)}

    def render(self, data):
        return "| table |\n"

    def exit_status(self, data):
        return self.status


class A:
    append = ""


@pytest.fixture
def saved(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BENCH_OUT", tmp_path)
    return tmp_path


def test_complete_results_are_saved_and_judged(saved):
    log = []
    assert runner.run(Fake(A(), Outcome([Boot("pti=off", [])]), log, status=3)) == 3
    (js,) = saved.glob("fake-*.json")
    assert json.loads(js.read_text()) == {"runs": 1}
    assert js.with_suffix(".md").read_text() == "| table |\n"
    assert log == ["build fake", "boot fake"]


def test_partial_results_are_saved_marked_then_the_failure_returned(saved, capsys):
    out = Outcome([Boot("pti=off", [], failure="timeout\nlog: x", code=124)])
    assert runner.run(Fake(A(), out, [], status=0)) == 124
    (js,) = saved.glob("fake-*.json")
    assert json.loads(js.read_text()) == {"runs": 1, "partial": "timeout\nlog: x"}
    assert js.with_suffix(".md").read_text() == "**Partial results**: timeout\n\n| table |\n"
    assert "fake FAILED: timeout" in capsys.readouterr().err


def test_nothing_usable_nothing_saved(saved, capsys):
    out = Outcome([Boot("pti=off", [], failure="console: Oops", code=125)])
    assert runner.run(Fake(A(), out, [], empty=True)) == 125
    assert not list(saved.iterdir())
    assert "fake: nothing to save (no runs)" in capsys.readouterr().err
    with pytest.raises(KmlError, match="no runs"):     # without a failed boot: an error
        runner.run(Fake(A(), Outcome([Boot("", [])]), [], empty=True))


def test_a_chain_checks_all_then_builds_all_and_stops_at_a_failure(saved):
    log = []
    first, second = (Fake(A(), Outcome([Boot("", [])]), log, status=1),
                     Fake(A(), Outcome([Boot("", [])]), log))
    second.what = "second"
    assert runner.run(first, second) == 1
    assert log == ["build fake", "build second", "boot fake"]
    a = A()
    a.append = "nokaslr pti=on"
    log.clear()
    with pytest.raises(KmlError, match="the pti-off boot of fake sets pti=off itself"):
        runner.run(Fake(A(), None, log), Fake(a, None, log))
    assert log == []                    # refused before anything was built


def test_every_command_dispatches_through_func():
    sub = cli.build_parser()._subparsers._group_actions[0]
    assert list(sub.choices) == ["setup", "build", "run", "package", "test", "bench", "apps",
                                 "demo", "kstack-bench", "soak", "fuzz", "patches",
                                 "verify", "cc", "appliance", "pathlen"]
    for name, p in sub.choices.items():
        if name == "patches":
            continue
        assert p.get_default("func").__module__.startswith("kmltool.commands."), name
    for action in ("apply", "export", "check"):
        a = cli.build_parser().parse_args(["patches", action])
        assert a.func.__module__ == "kmltool.commands.patches"
    assert len(commands.MODULES) == len(sub.choices)


def test_bench_apps_is_apps():
    a = cli.build_parser().parse_args(["bench", "--apps", "--quick", "--config", "pti-on"])
    b = cli.build_parser().parse_args(["apps", "--quick", "--config", "pti-on"])
    assert (a.quick, a.config, a.rounds, a.deb) == (b.quick, b.config, b.rounds, b.deb)
    assert (a.smp, b.smp) == (None, 2)      # bench's default: 2 with --apps
