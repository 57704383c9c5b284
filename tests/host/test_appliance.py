"""Unit tests: ./kml appliance (host/kmltool/appliance.py) and its init,
kml-appinit, built and run here with --here (not PID 1: nothing is
mounted, nothing powered off); no VM."""
import gzip
import os
import shutil
import socket
import subprocess

import pytest

import guest_prog
from kmltool import appliance
from kmltool.paths import KmlError

REDIS = "/usr/bin/redis-check-rdb"      # Debian's redis-server, under another name


@pytest.fixture(scope="module")
def appinit(tmp_path_factory):
    return guest_prog.build(tmp_path_factory, "kml-appinit")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_here(appinit, conf, text, timeout=60):
    conf.write_text(text)
    return subprocess.run([appinit, "--here", str(conf)], capture_output=True, text=True,
                          timeout=timeout)


def test_appinit_waits_for_a_tcp_service_and_stops_it(appinit, tmp_path):
    port = free_port()
    server = tmp_path / "server.py"
    # listens only after a while: kml-appinit must keep polling
    server.write_text("import socket, time\ntime.sleep(0.3)\n"
                      f"s = socket.create_server(('127.0.0.1', {port}))\n"
                      "while True:\n    c, _ = s.accept()\n    c.close()\n")
    p = run_here(appinit, tmp_path / "conf",
                 f"{port} tcp\n{shutil.which('python3')}\n{server}\n")
    assert p.returncode == 0, p.stdout + p.stderr
    ready = appliance.parse_ready(p.stdout)
    assert ready and ready["service"] == "python3" and ready["port"] == port, p.stdout
    assert ready["init_ms"] >= 300 and ready["boottime_ms"] > ready["init_ms"]
    assert ready["kernelmode"] == -1 and ready["init_cpl"] == 3     # not a kml kernel
    assert "checked and stopped" in p.stdout
    with pytest.raises(ProcessLookupError):
        os.kill(ready["pid"], 0)


@pytest.mark.skipif(not os.path.exists(REDIS), reason="redis-tools is not installed")
def test_appinit_checks_redis(appinit, tmp_path):
    redis = tmp_path / "redis-server"
    redis.symlink_to(REDIS)             # redis-check-rdb runs redis-server by name
    port = free_port()
    svc = appliance.Service("redis", REDIS, str(redis),
                            ("--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--loglevel", "warning"), port, "redis")
    p = run_here(appinit, tmp_path / "conf", svc.config())
    assert p.returncode == 0, p.stdout + p.stderr
    assert appliance.parse_ready(p.stdout)["service"] == "redis-server"
    assert "checked and stopped" in p.stdout


def test_appinit_reports_a_service_that_fails(appinit, tmp_path):
    p = run_here(appinit, tmp_path / "conf", f"{free_port()} tcp\n/bin/false\n")
    assert p.returncode == 1 and "exited (status 0x100) before it answered" in p.stdout
    p = run_here(appinit, tmp_path / "conf", f"{free_port()} tcp\n/no/such/program\n")
    assert p.returncode == 1 and "exec /no/such/program" in p.stdout
    for bad in ("", "80\n/bin/true\n", "80 http\n/bin/true\n", "0 tcp\n/bin/true\n",
                "80 tcp\n"):
        p = run_here(appinit, tmp_path / "conf", bad)
        assert p.returncode == 1 and "kml-appinit: " in p.stdout, bad
    p = subprocess.run([appinit], capture_output=True, text=True)      # not PID 1
    assert p.returncode == 2 and "usage" in p.stderr


def test_image_holds_init_the_service_and_its_libraries(appinit, tmp_path):
    svc = appliance.Service("x", "/bin/sleep", "/usr/bin/sleepy", ("100",), 1234, "tcp")
    arc = appliance.image_archive(svc, appinit)
    for name in ("init", "usr/bin/sleepy", "etc/appliance", "dev/console", "dev/null",
                 "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6"):
        assert name in arc, name
    assert "bin/sh" not in arc and "bin/busybox" not in arc
    assert svc.config() == "1234 tcp\n/usr/bin/sleepy\n100\n"
    data = arc.to_bytes()
    assert b"1234 tcp\n/usr/bin/sleepy\n100\n" in data
    assert data.startswith(b"070701")           # newc, as the kernel reads it
    with pytest.raises(KmlError, match="run ./kml build"):
        appliance.image_archive(svc, tmp_path / "missing")


def test_build_image_is_gzip_of_the_archive(appinit, tmp_path, monkeypatch):
    monkeypatch.setattr(appliance.paths, "BUILD", tmp_path)
    monkeypatch.setattr(appliance.paths, "GUEST_OUT", appinit.parent)
    svc = appliance.Service("x", "/bin/sleep", "/usr/bin/sleepy", (), 1, "tcp")
    path, raw = appliance.build_image(svc)
    assert path == tmp_path / "appliance" / "x.cpio.gz"
    assert len(gzip.decompress(path.read_bytes())) == raw
    assert raw == len(appliance.image_archive(svc, appinit).to_bytes())


def boot(kind, rnd, ms=None, wall=None, km=1, cpl=0, error=None):
    ready = None if ms is None else {"service": "redis-server", "pid": 9, "port": 6379,
                                     "boottime_ms": ms, "init_ms": 5.0,
                                     "kernelmode": km, "init_cpl": cpl}
    return {"image": kind, "round": rnd, "ready": ready, "wall_ms": wall, "error": error,
            "rundir": "/tmp/x", "status": 0, "problems": [], "timed_out": False}


def data(boots):
    return {"schema": appliance.SCHEMA, "service": "redis", "kernel": "default",
            "rounds": 2, "append": "", "accel": "tcg", "emulated": True,
            "sizes": {"bzimage": 4 << 20, "appliance": 7 << 20,
                      "appliance_uncompressed": 18 << 20, "normal": 29 << 20},
            "boots": boots, "image": "x"}


def test_summary_medians_and_exit_status():
    d = data([boot("appliance", 1, 100.0, 900.0), boot("normal", 1, 300.0, 1200.0, 0, 3),
              boot("normal", 2, 500.0, 1000.0, 0, 3), boot("appliance", 2, 200.0, 700.0)])
    s = appliance.summary(d)
    assert s["appliance"]["boottime_ms"] == 150.0 and s["appliance"]["wall_ms"] == 800.0
    assert s["normal"]["boottime_ms"] == 400.0 and s["normal"]["kernelmode"] == [0]
    assert appliance.exit_status(d) == 0
    md = appliance.markdown(d)
    assert "| 7.0 MiB | 11.0 MiB | 150 | 800 | 1 | 0 | 2/2 |" in md, md
    assert "| 29.0 MiB | 33.0 MiB | 400 | 1100 | 0 | 3 | 2/2 |" in md, md
    assert "emulated" in md and "18.0 MiB unpacked" in md
    # a failed boot, or an appliance service outside kernel mode, fails
    d["boots"].append(boot("appliance", 3, error="no ready line from kml-appinit"))
    assert appliance.exit_status(d) == 1
    assert "FAILED: appliance boot of round 3: no ready line" in appliance.markdown(d)
    d = data([boot("appliance", 1, 100.0, 900.0, km=0), boot("normal", 1, 300.0, 1200.0)])
    assert appliance.exit_status(d) == 1


def test_parse_ready():
    line = ("kml-appinit: ready service=redis-server pid=12 port=6379 boottime_ms=1850.3 "
            "init_ms=41.0 kernelmode=1 init_cpl=0\n")
    assert appliance.parse_ready("noise\n" + line) == {
        "service": "redis-server", "pid": 12, "port": 6379, "boottime_ms": 1850.3,
        "init_ms": 41.0, "kernelmode": 1, "init_cpl": 0}
    assert appliance.parse_ready(line.replace("pid=12", "pid=x")) is None
