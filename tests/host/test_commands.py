"""Unit tests: each measuring command end to end with its builds and boots
faked -- the kernel command lines it boots (configs.py and --append,
byte for byte) and the partial-results rule when its first boot fails."""
import json

import pytest

from kmltool import apps, cli, guestrun, pathlen, paths, qemu, soak
from kmltool.commands import apps as apps_cmd, bench as bench_cmd, runner
from kmltool.commands import pathlen as pathlen_cmd
from kmltool.guestrun import Boot, Outcome

LONG = pathlen.LONG_APPEND


@pytest.fixture
def booted(tmp_path, monkeypatch):
    """The command lines of the boots a command asks for; its first boot
    fails as a whole (exit status 125)."""
    lines = []

    def boot(specs, prelude=(), append="", **vm):
        groups = guestrun.group(specs)
        lines.append([guestrun.configs.merge(own, append, "test") for own, _, _ in groups])
        return Outcome([Boot(lines[-1][0], groups[0][2], failure="boot failed", code=125)])

    monkeypatch.setattr(guestrun, "boot", boot)
    monkeypatch.setattr(paths, "BENCH_OUT", tmp_path)
    for module in (runner, bench_cmd, apps_cmd, pathlen_cmd):
        monkeypatch.setattr(module, "build_all", lambda *a, **k: None)
    monkeypatch.setattr(qemu, "choose_accel", lambda: "tcg")
    monkeypatch.setattr(soak, "class_members", lambda klass: ["fork", "pipe"])
    monkeypatch.setattr(apps, "write_manifest", lambda: ["fork.c", "kernel/fork.c"])
    monkeypatch.setattr(apps, "adds", lambda: [])
    monkeypatch.setattr(pathlen, "kernel_symbols", lambda vmlinux, say: (None, None))
    return lines


CASES = [
    # argv, the boots' command lines, the results saved
    # the lead (a boot per mode) fails: no timings
    (["bench", "--quick"], [["pti=off"] * len(pathlen.MODES)], []),
    (["bench", "--no-pathlen", "--append", "quiet"], [["quiet"]], []),
    (["demo", "--no-pathlen"], [[""]], []),
    (["apps", "--quick"], [["pti=off kml=all", "pti=on kml=all"]], ["apps"]),
    (["bench", "--apps", "--config", "pti-on", "--append", "nokaslr"], [["pti=on nokaslr"]],
     ["apps"]),
    (["kstack-bench", "--append", "pti=on"],
     [["pti=on", "dynamic_kstacks=on pti=on", "dynamic_kstacks=reclaim pti=on"]], []),
    (["soak", "--short"],
     [["pti=off", "pti=on dynamic_kstacks=on", "pti=off dynamic_kstacks=reclaim"]], ["soak"]),
    (["pathlen", "--quick", "--long", "--append", "nokaslr"],
     [[f"pti=off nokaslr {LONG}", f"pti=on nokaslr {LONG}"]], []),
    (["pathlen", "--quick", "--pti", "on"], [["pti=on"]], []),
]


@pytest.mark.parametrize("argv, lines, saved", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_boots_and_partial_results(booted, argv, lines, saved, tmp_path):
    assert cli.main(argv) == 125
    assert booted == lines
    files = sorted(tmp_path.glob("*.json"))
    assert [f.name.split("-")[0] for f in files] == saved
    for f in files:     # what was measured, saved and marked
        assert json.loads(f.read_text())["partial"] == "boot failed"
        assert f.with_suffix(".md").read_text().startswith("**Partial results**: boot failed\n")
