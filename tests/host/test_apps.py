"""Unit tests: ./kml bench --apps (host/kmltool/apps.py, report.apps_markdown)
and its guest helper kml-apps, built and run here; no VM."""
import os
import socket
import subprocess

import pytest

import guest_prog
from kmltool import apps, configs, report
from kmltool.guestrun import Mode, Run, Status


@pytest.fixture(scope="module")
def apps_prog(tmp_path_factory):
    return guest_prog.build(tmp_path_factory, "kml-apps")


def test_kml_apps_now_and_usage(apps_prog):
    a = subprocess.run([apps_prog, "now"], capture_output=True, text=True)
    b = subprocess.run([apps_prog, "now"], capture_output=True, text=True)
    assert a.returncode == b.returncode == 0
    assert 0 < int(a.stdout) <= int(b.stdout)
    for argv in ([], ["now", "x"], ["wait-port"], ["wait-port", "0"], ["wait-port", "x"],
                 ["mktree", "m"], ["frob"]):
        p = subprocess.run([apps_prog, *argv], capture_output=True, text=True)
        assert p.returncode == 2, argv


def test_kml_apps_waits_for_a_listening_port(apps_prog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        # bound, not listening: nothing to find
        p = subprocess.run([apps_prog, "wait-port", str(port), "1"], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 1 and f"nothing listens on port {port} after 1 s" in p.stderr
        s.listen()
        p = subprocess.run([apps_prog, "wait-port", str(port), "5"], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 0, p.stderr


def test_kml_apps_makes_the_tree(apps_prog, tmp_path):
    m = tmp_path / "manifest"
    m.write_text("a/\na/b/\na/b/c.txt\nd/e/f.c\ntop\nempty/\n\n")
    p = subprocess.run([apps_prog, "mktree", m, tmp_path / "t"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith(": 6 directories, 3 files")
    made = sorted(str(x.relative_to(tmp_path / "t")) + ("/" if x.is_dir() else "")
                  for x in (tmp_path / "t").rglob("*"))
    assert made == ["a/", "a/b/", "a/b/c.txt", "d/", "d/e/", "d/e/f.c", "empty/", "top"]
    for bad in ("../x", "a/../../x", "/etc/x", "x/.."):
        m.write_text(f"ok\n{bad}\n")
        p = subprocess.run([apps_prog, "mktree", m, tmp_path / "u"], capture_output=True,
                           text=True)
        assert p.returncode == 1 and "manifest:2: bad path" in p.stderr, bad
    m.write_text("a..b/c\n")                   # a name with dots is a name
    assert subprocess.run([apps_prog, "mktree", m, tmp_path / "v"]).returncode == 0
    assert (tmp_path / "v" / "a..b" / "c").is_file()


# ---- specs, parsing, combining ------------------------------------------

SIZES = apps.Sizes(100, "set,get", 1, 1, 2)
CFG = (configs.APPS["pti-off"],)
FIND = ("kernel/fork.c", "tools/fork.c")

REDIS = ['"test","rps","avg_latency_ms","min_latency_ms"',
         '"SET","4000.00","2.0","0.1"', '"GET","9000.00","1.0","0.1"']
WRK = ["Running 1s test @ http://127.0.0.1:8080/", "  4815 requests in 3.02s, 1.17MB read",
       "Requests/sec:   1592.05", "Transfer/sec:    396.46KB"]
WRK_BAD = WRK[:2] + ["  Non-2xx or 3xx responses: 12"] + WRK[2:]
IPERF = ["[  5]   0.00-3.00   sec   600 MBytes  1676 Mbits/sec    0             sender",
         "[  5]   0.00-3.00   sec   600 MBytes  1674 Mbits/sec                  receiver",
         "iperf Done."]
FOUND = [f"{apps.TREE}/{p}" for p in FIND]


def app(name):
    return next(a for a in apps.apps(SIZES, FIND) if a.name == name)


def done(output, exit=0, elapsed=None):
    return Run("x", "user", exit=exit, finished=True, output=list(output),
               elapsed_ns=elapsed)


def test_specs_pair_the_modes_and_alternate():
    sp = apps.specs(CFG, 2, SIZES, FIND)
    assert sp[0].name == "pti-off.system"
    redis = [s for s in sp if ".redis." in s.name]
    assert [s.name for s in redis] == [
        "pti-off.redis.user.1-1", "pti-off.redis.kernel.1-1",
        "pti-off.redis.kernel.1-2", "pti-off.redis.user.1-2",
        "pti-off.redis.user.2-1", "pti-off.redis.kernel.2-1",
        "pti-off.redis.kernel.2-2", "pti-off.redis.user.2-2"]
    assert all(s.append == "pti=off" for s in sp)
    r = redis[1]
    assert r.mode is Mode.KERNEL and r.quiet and not r.timed
    assert r.client.startswith(f"kml-apps wait-port {apps.REDIS_PORT} && redis-benchmark")
    assert "-n 100 -t set,get --csv" in r.client
    f = next(s for s in sp if ".find." in s.name)
    assert f.timed and f.client is None and f.args == (apps.TREE, "-name", apps.FIND_NAME)
    assert len({s.name for s in sp}) == len(sp)


def test_parsers():
    v, d = apps.parse_redis(done(REDIS), None)
    assert d == {"tests": {"SET": 4000.0, "GET": 9000.0}} and v == pytest.approx(6000.0)
    assert apps.parse_wrk(done(WRK), None) == (1592.05, {})
    assert apps.parse_iperf(done(IPERF), None) == (1674.0, {})
    assert apps.parse_find(done(FOUND, elapsed=1_500_000), app("find")) == (1.5, {})
    for parse, out, why in ((apps.parse_redis, ["OK"], "no redis-benchmark CSV"),
                            (apps.parse_wrk, WRK_BAD, "Non-2xx or 3xx responses: 12"),
                            (apps.parse_wrk, WRK[:2], "no 'Requests/sec:'"),
                            (apps.parse_iperf, IPERF[:1], "no receiver summary")):
        with pytest.raises(apps.NoResult, match=why):
            parse(done(out), None)
    with pytest.raises(apps.NoResult, match="find printed 1 path"):
        apps.parse_find(done(FOUND[:1], elapsed=1), app("find"))
    with pytest.raises(apps.NoResult, match="no time"):
        apps.parse_find(done(FOUND), app("find"))


def fake_runs(speed):
    """Every run of CFG: ordinary values 100 (find: 100 ms), kernel mode
    speed times better."""
    runs = {"pti-off.system": done(["6.12.0-kml", "2", "QEMU", "pti=off"])}
    for s in apps.specs(CFG, 1, SIZES, FIND):
        if s.name.endswith(".system"):
            continue
        k = s.mode is Mode.KERNEL
        name = s.name.split(".")[1]
        if name == "find":
            runs[s.name] = done(FOUND, elapsed=int(1e8 / (speed if k else 1)))
            continue
        v = 100 * (speed if k else 1)
        out = {"redis": [f'"SET","{v}"', f'"GET","{v}"'],
               "nginx": [f"Requests/sec: {v}"],
               "iperf3": [f"[  5] 0.00-1.00 sec 1 MBytes {v} Mbits/sec  receiver"]}[name]
        runs[s.name] = done(out)
    return runs


def test_combine_medians_speedups_and_markdown():
    runs = fake_runs(1.25)
    d = apps.combine(CFG, 1, SIZES, FIND, runs, "tcg")
    assert d["schema"] == apps.SCHEMA and d["pairs"] == 2 and d["emulated"]
    rows = {r["name"]: r for r in d["configs"][0]["apps"]}
    assert set(rows) == set(apps.APP_NAMES)
    for r in rows.values():
        assert r["speedup"] == pytest.approx(1.25), r["name"]
        assert r["pair_median"] == pytest.approx(1.25)
        assert r["user"]["status"] == r["kernel"]["status"] == Status.OK
    assert rows["find"]["user"]["median"] == pytest.approx(100.0)
    assert rows["find"]["kernel"]["median"] == pytest.approx(80.0)
    assert apps.exit_status(d) == 0
    md = report.apps_markdown(d)
    assert "| redis | requests/s, geometric mean of set get (req/s) | pti-off | 100 | 125 |" \
        " – | 1.25 | 1.25 (1.25–1.25) | – | – |" in md, md
    assert "| find, pti-off | 100 | 80.0 | 20 | +20.0 |" in md
    assert "| TCP Throughput, pti-off | 0.100 | 0.125 | 0.025 | +25.0 |" in md
    assert "EMULATED" in md and "kernel 6.12.0-kml, 2 CPUs (QEMU)" in md


def test_combine_reports_runs_without_a_result():
    runs = fake_runs(1.0)
    runs["pti-off.nginx.kernel.1-2"] = done(WRK_BAD)
    runs["pti-off.iperf3.kernel.1-1"] = done(["kml-modes: x: the server ended"], exit=124)
    del runs["pti-off.find.user.1-1"]
    d = apps.combine(CFG, 1, SIZES, FIND, runs, "tcg")
    rows = {r["name"]: r for r in d["configs"][0]["apps"]}
    assert rows["nginx"]["kernel"]["status"] == Status.ERROR
    assert "Non-2xx" in rows["nginx"]["kernel"]["reason"]
    assert rows["nginx"]["kernel"]["median"] is None and rows["nginx"]["speedup"] is None
    assert rows["nginx"]["pair_speedups"][0] == pytest.approx(1.0)
    assert "exited with 124" in rows["iperf3"]["kernel"]["reason"]
    assert rows["find"]["user"]["reason"].startswith("pti-off.find.user.1-1: no output")
    assert apps.exit_status(d) == 1
    md = report.apps_markdown(d)
    assert "- pti-off nginx kernel: **error**: pti-off.nginx.kernel.1-2: wrk saw" in md
    assert "Table 6.3" not in md and "Table 6.2" not in md


def test_write_manifest(tmp_path, monkeypatch):
    tree = tmp_path / "linux"
    (tree / "kernel").mkdir(parents=True)
    (tree / "kernel" / "fork.c").write_text("x")
    (tree / "Makefile").write_text("x")
    (tree / "fork.c").write_text("x")

    def git(*a):
        subprocess.run(["git", "-C", tree, "-c", "user.name=t", "-c", "user.email=t@t", *a],
                       check=True, capture_output=True)
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "base")
    monkeypatch.setattr(apps.paths, "BUILD", tmp_path / "build")
    with pytest.raises(apps.KmlError, match="no kml-base"):
        apps.write_manifest(tree)
    git("tag", "kml-base")
    assert apps.write_manifest(tree) == ["fork.c", "kernel/fork.c"]
    assert apps.manifest_path().read_text() == "Makefile\nfork.c\nkernel/\nkernel/fork.c\n"


APPL = (configs.APPS["pti-off-appliance"],)


def test_appliance_config_rotates_three_modes():
    assert configs.APPS_DEFAULT == ("pti-off-appliance", "pti-on-appliance")
    assert apps.modes(APPL[0]) == apps.APPLIANCE_MODES
    assert APPL[0].append == "pti=off kml=all"
    sp = apps.specs(APPL, 1, SIZES, FIND)
    redis = [s.name for s in sp if ".redis." in s.name]
    assert redis == ["pti-off-appliance.redis.user.1-1", "pti-off-appliance.redis.kernel.1-1",
                     "pti-off-appliance.redis.all.1-1", "pti-off-appliance.redis.kernel.1-2",
                     "pti-off-appliance.redis.all.1-2", "pti-off-appliance.redis.user.1-2"]
    s = next(x for x in sp if x.name == "pti-off-appliance.redis.all.1-1")
    assert s.mode is Mode.ALL and s.cpl == 0 and s.path == "/usr/bin/redis-server"
    assert s.argv()[-len(s.args) - 3:-len(s.args)] == [s.name, "all", "/usr/bin/redis-server"]


def test_combine_appliance_column():
    runs = {"pti-off-appliance.system": done(["6.12.0-kml", "2", "QEMU", "pti=off kml=all"])}
    for s in apps.specs(APPL, 1, SIZES, FIND):
        if s.name.endswith(".system"):
            continue
        f = {Mode.USER: 1, Mode.KERNEL: 1.25, Mode.ALL: 1.5}[s.mode]
        name = s.name.split(".")[1]
        if name == "find":
            runs[s.name] = done(FOUND, elapsed=int(1e8 / f))
            continue
        v = 100 * f
        runs[s.name] = done({"redis": [f'"SET","{v}"', f'"GET","{v}"'],
                             "nginx": [f"Requests/sec: {v}"],
                             "iperf3": [f"[  5] 0.00-1.00 sec 1 MBytes {v} Mbits/sec  "
                                        "receiver"]}[name])
    d = apps.combine(APPL, 1, SIZES, FIND, runs, "tcg")
    assert d["configs"][0]["modes"] == ["user", "kernel", "all"]
    rows = {r["name"]: r for r in d["configs"][0]["apps"]}
    for r in rows.values():
        assert r["speedup"] == pytest.approx(1.25) and r["speedup_all"] == pytest.approx(1.5)
        assert r["pair_median_all"] == pytest.approx(1.5)
    assert apps.exit_status(d) == 0
    md = report.apps_markdown(d)
    assert "| redis | requests/s, geometric mean of set get (req/s) | pti-off-appliance | " \
        "100 | 125 | 150 | 1.25 | 1.25 (1.25–1.25) | 1.50 | 1.50 (1.50–1.50) |" in md, md
    del runs["pti-off-appliance.nginx.all.1-1"]
    d = apps.combine(APPL, 1, SIZES, FIND, runs, "tcg")
    assert apps.exit_status(d) == 1
    md = report.apps_markdown(d)
    assert "- pti-off-appliance nginx all: **error**: pti-off-appliance.nginx.all.1-1: no " \
        "output" in md, md


def test_the_debian_systems_adds_name_files_of_the_checkout(monkeypatch):
    """--system debian's --add list: every file of the checkout it names
    exists (nginx.conf moved once and only the Debian system's boot said so)."""
    from kmltool import paths
    monkeypatch.setattr(apps, "manifest_path", lambda: "/nonexistent/manifest")
    srcs = [a.split(":", 1)[0] for a in apps.system_adds()]
    ours = [s for s in srcs if s.startswith(str(paths.GUEST_SRC))]
    assert ours and all(os.path.exists(s) for s in ours), ours
