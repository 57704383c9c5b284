"""Unit tests: the guest-run layer (host/kmltool/guestrun.py) and its guest
side, guest/kml-modes, run here with /bin/sh and a directory standing in
for /trusted; no VM."""
import io
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT
from kmltool import guestrun
from kmltool.guestrun import Mode, Spec, Status

# A stand-in program: prints its arguments (stdout) and a line on stderr,
# writes {"cpl": CPL} to the file after --json, exits with $FAKE_EXIT.
# CPL is 0 when it runs from the trusted directory.
FAKE = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
print("args:", *args)
print("progress", file=sys.stderr, flush=True)
cpl = 0 if os.path.dirname(sys.argv[0]) == os.environ["KML_TRUSTED"] else 3
if "--json" in args:
    with open(args[args.index("--json") + 1], "w") as f:
        json.dump({{"cpl": cpl, "schema": "fake/1"}}, f)
sys.stdout.write(os.environ.get("FAKE_TAIL", ""))
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
"""


@pytest.fixture
def guest(tmp_path):
    """(run(script or argv, **env) -> CompletedProcess, fake program path)."""
    (tmp_path / "trusted").mkdir()
    prog = tmp_path / "bin" / "fake"
    prog.parent.mkdir()
    prog.write_text(FAKE)
    prog.chmod(0o755)

    def run(cmd, **env):
        e = dict(os.environ, KML_TRUSTED=str(tmp_path / "trusted"),
                 PATH=f"{ROOT / 'guest'}:{prog.parent}:{os.environ['PATH']}")
        e.update(env)
        argv = ["sh", "-c", cmd] if isinstance(cmd, str) else cmd
        return subprocess.run(argv, capture_output=True, text=True, env=e, timeout=60)
    return run, prog


def test_kml_modes_user_and_kernel(guest, tmp_path):
    run, prog = guest
    p = run(["kml-modes", "a", "user", "fake", "x y"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == (f"# kml-begin a user {prog} x y\nargs: x y\nprogress\n"
                        "# kml-end a user 0\n")
    p = run(["kml-modes", "-q", "b", "kernel", str(prog), "z"], FAKE_EXIT="7")
    trusted = tmp_path / "trusted"
    assert p.returncode == 7
    assert p.stdout == (f"# kml-begin b kernel {trusted}/fake z\nprogress\n"
                        "# kml-end b kernel 7\n")
    assert list(trusted.iterdir()) == []        # the copy is gone


def test_kml_modes_keeps_a_program_already_trusted(guest, tmp_path):
    run, prog = guest
    installed = tmp_path / "trusted" / "fake"
    installed.write_bytes(prog.read_bytes())
    installed.chmod(0o755)
    assert run(["kml-modes", "a", "kernel", str(prog)]).returncode == 0
    assert installed.exists()                   # identical: used, not removed
    p = run(["kml-modes", "a", "kernel", str(installed)])
    assert p.returncode == 0 and installed.exists()
    assert p.stdout.startswith(f"# kml-begin a kernel {installed}\n")


def test_kml_modes_collects_a_file(guest, tmp_path):
    run, _ = guest
    out = tmp_path / "r.json"
    p = run(["kml-modes", "-q", "-c", str(out), "a", "user", "fake", "--json", str(out)],
            FAKE_TAIL="no newline", FAKE_EXIT="1")
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[1:] == ["progress", "# kml-data a", '{"cpl": 3, "schema": "fake/1"}',
                         "# kml-end a user 1"]


def test_kml_modes_not_run_and_errors(guest):
    run, _ = guest
    p = run(["kml-modes", "a", "kernel", "nosuch", "-v"])
    assert p.returncode == 127
    assert p.stdout == ("# kml-begin a kernel nosuch -v\nkml-modes: a: not run: nosuch: "
                        "not found\n# kml-end a kernel not-run\n")
    p = run(["kml-modes", "-n", "no disk", "a", "user", "fake"])
    assert p.returncode == 125 and "kml-modes: a: not run: no disk\n" in p.stdout
    p = run(["kml-modes", "a", "kernel", "fake"], KML_TRUSTED="/nonexistent")
    assert p.returncode == 126 and "not run: cannot copy" in p.stdout
    for argv in (["kml-modes", "a", "user"], ["kml-modes", "a", "root", "fake"],
                 ["kml-modes", "-x", "a", "user", "fake"]):
        p = run(argv)
        assert p.returncode == 2 and p.stdout == "" and "kml-modes" in p.stderr


def specs():
    return [Spec("u", Mode.USER, "fake", ("a",), options=("--quick",), collect="--json",
                 quiet=True),
            Spec("k", Mode.KERNEL, "fake", collect="--json"),
            Spec("m1", Mode.USER, "fake", setup="echo mount failed >&2; false"),
            Spec("m2", Mode.KERNEL, "fake", setup="echo mount failed >&2; false"),
            Spec("t", Mode.USER, "fake", setup="true")]


def test_script_runs_parse_and_check(guest, tmp_path):
    run, _ = guest
    sp = specs()
    text = guestrun.script(sp, prelude=["echo hello"], tmp=str(tmp_path / "res"))
    assert text.startswith("echo hello\nmkdir -p ")
    assert (f"kml-modes '-q' '-c' '{tmp_path}/res/u.out' 'u' 'user' 'fake' 'a' '--quick' "
            f"'--json' '{tmp_path}/res/u.out'\n") in text
    assert text.count("if {") == 2 and text.endswith("fi\nexit 0\n")
    p = run(text)
    assert p.returncode == 0, p.stderr
    runs = guestrun.parse(p.stdout)
    assert list(runs) == ["u", "k", "m1", "m2", "t"]
    u, k = runs["u"], runs["k"]
    assert (u.mode, u.exit, u.finished, u.output) == ("user", 0, True, ["progress"])
    assert u.doc == {"cpl": 3, "schema": "fake/1"}
    assert k.output[0].startswith("args: --json ") and k.doc["cpl"] == 0
    assert [guestrun.check(s, runs[s.name], schema="fake/1") for s in sp[:2]] == \
        [(Status.OK, None), (Status.OK, None)]
    assert runs["m1"].not_run and runs["m2"].not_run and runs["m1"].exit is None
    assert guestrun.check(sp[2], runs["m1"]) == (
        Status.ERROR, "not run: echo mount failed >&2; false failed: mount failed")
    assert guestrun.check(sp[4], runs["t"]) == (Status.OK, None)


def test_check_verdicts():
    spec = Spec("k", Mode.KERNEL, "/usr/bin/prog", collect="--json")

    def run(exit, data=None, out=(), finished=True):
        return guestrun.Run("k", "kernel", exit=exit, data=data, output=list(out),
                            finished=finished)
    assert guestrun.check(spec, None)[0] == Status.ERROR
    assert guestrun.check(spec, run(3, None, ["no kernel mode here"])) == \
        (Status.UNAVAILABLE, "no kernel mode here")
    assert guestrun.check(spec, run(139, None, ["x", ""])) == \
        (Status.ERROR, "prog exited with 139: x")
    assert guestrun.check(spec, run(None, None, ["half"], finished=False)) == \
        (Status.ERROR, "prog did not finish: half")
    assert guestrun.check(spec, run(0, "{bad")) [1].startswith(
        "prog exited with 0 but wrote invalid JSON")
    assert guestrun.check(spec, run(0)) == (Status.ERROR, "prog exited with 0 but wrote no JSON")
    assert guestrun.check(spec, run(1, None, ["usage"])) == \
        (Status.ERROR, "prog exited with 1: usage")
    assert guestrun.check(spec, run(0, '{"cpl": 3}'))[1].startswith(
        "ran at CPL 3, expected CPL 0")
    assert guestrun.check(spec, run(0, '{"cpl": 0}'), schema="s/1") == \
        (Status.ERROR, "JSON schema None, expected 's/1'")
    assert guestrun.check(spec, run(1, '{"cpl": 0}', ["2 rows failed"])) == \
        (Status.FAILED, "2 rows failed")


def test_parse_marker_after_unterminated_output():
    text = ("noise\n# kml-begin a user /p\nout\npartial# kml-data a\n{}\n"
            "# kml-end a user 0\n# kml-begin b kernel /trusted/p\nlast")
    runs = guestrun.parse(text)
    assert runs["a"].output == ["out", "partial"] and runs["a"].data == "{}\n"
    assert runs["a"].doc == {}
    assert (runs["b"].finished, runs["b"].exit, runs["b"].output) == (False, None, ["last"])


def test_stream_shows_headers_and_hides_data():
    text = (b"pre\n# kml-begin a user /p -x\nprogress 1\npartial# kml-data a\n"
            b"{\"secret\": 1}\n# kml-end a user 0\n# kml-begin b kernel /trusted/p\n"
            b"prompt> ")
    for headers, want in ((True, b"pre\n== a (user mode): /p -x\nprogress 1\npartial\n"
                                 b"== b (kernel mode): /trusted/p\nprompt> "),
                          (False, b"pre\nprogress 1\npartial\nprompt> ")):
        out = io.BytesIO()
        s = guestrun.Stream(out=out, headers=headers)
        for i in range(0, len(text), 3):            # markers split across reads
            s(text[i:i + 3])
        assert out.getvalue() == want


def test_spec_paths_argv_and_names():
    s = Spec("k", "kernel", "/usr/bin/kml-bench", ("--x",), options=("--quick",),
             collect="--json", quiet=True)
    assert s.mode is Mode.KERNEL and s.cpl == 0 and s.path == "/trusted/kml-bench"
    assert s.argv("/t") == ["kml-modes", "-q", "-c", "/t/k.out", "k", "kernel",
                            "/usr/bin/kml-bench", "--x", "--quick", "--json", "/t/k.out"]
    assert Spec("u", Mode.USER, "/usr/bin/kml-bench").path == "/usr/bin/kml-bench"
    assert Spec("t", Mode.KERNEL, "/trusted/kml-ps").path == "/trusted/kml-ps"
    assert s.with_options("-v").options == ("--quick", "-v")
    for bad in ("", "a b", "-x", "a/b"):
        with pytest.raises(ValueError):
            Spec(bad, Mode.USER, "p")
    with pytest.raises(ValueError):
        Spec("a", "root", "p")


def test_group_boots_by_append():
    a = Spec("a", Mode.USER, "p")
    b = Spec("b", Mode.USER, "p", append="x=1", disk=(64, "ext4"))
    c = Spec("c", Mode.USER, "p", disk=(8, None))
    d = Spec("d", Mode.USER, "p", append="x=1")
    assert guestrun.group([a, b, c, d]) == [("", (8, None), [a, c]),
                                             ("x=1", (64, "ext4"), [b, d])]
    e = Spec("e", Mode.KERNEL, "p", append="x=1", boot="fresh")
    assert guestrun.group([b, e, d]) == [("x=1", (64, "ext4"), [b, d]), ("x=1", None, [e])]


def test_status_is_its_value():
    assert f"{Status.OK}" == "ok" and str(Status.NOT_RUN) == "not run"
    assert json.dumps({"s": Status.FAILED, "m": Mode.KERNEL}) == '{"s": "failed", "m": "kernel"}'
    assert Status.OK == "ok" and Status("skipped") is Status.SKIPPED


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("su"), reason="needs root and su")
def test_kml_modes_runs_as_another_user(guest):
    run, _ = guest
    p = run(["kml-modes", "-u", "nobody", "a", "user", "/bin/sh", "-c", "id -u; echo \"$0\"", "it's"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[1:] == ["65534", "it's", "# kml-end a user 0"]


# ---- servers and timed runs (kml-modes -s, -t) -----------------------

# A stand-in server: writes its pid, then waits for SIGTERM (FAKE_SERVER
# =early: exits at once; =stubborn: ignores SIGTERM; =crash: dies of
# SIGSEGV on SIGTERM).
SERVER = """#!/bin/sh
case $FAKE_SERVER in
early) echo "server exits"; exit 3 ;;
stubborn) trap '' TERM ;;
crash) trap 'kill -SEGV $$' TERM ;;
slow) trap 'sleep 1; echo "server stops"; exit 0' TERM ;;
*) trap 'echo "server stops"; exit 0' TERM ;;
esac
echo "server up"
while :; do sleep 0.05; done
"""
# kml-apps now, as the guest has it: nanoseconds
CLOCK = f"""#!{sys.executable}
import sys, time
assert sys.argv[1:] == ["now"], sys.argv
print(time.monotonic_ns())
"""


@pytest.fixture
def server(guest, tmp_path):
    run, prog = guest
    s = prog.parent / "server"
    s.write_text(SERVER)
    s.chmod(0o755)
    (prog.parent / "kml-apps").write_text(CLOCK)
    (prog.parent / "kml-apps").chmod(0o755)
    return run, s


def test_kml_modes_runs_a_server_with_its_client(server, tmp_path):
    run, s = server
    client = 'sleep 0.3; echo "client of $KML_SERVER_PID"; exit 5'
    p = run(["kml-modes", "-s", client, "-t", "a", "user", str(s)])
    assert p.returncode == 5, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"# kml-begin a user {s}"
    pid = next(x for x in lines if x.startswith("client of ")).split()[-1]
    assert f"kml-modes: a: server pid {pid}, KernelMode: (none)" in lines
    assert "server up" in lines and "server stops" in lines
    assert lines[-1] == "# kml-end a user 5"
    runs = guestrun.parse(p.stdout)
    assert runs["a"].exit == 5 and runs["a"].elapsed_ns >= 300_000_000
    assert not any(x.startswith("# kml-time") for x in runs["a"].output)
    # the time is the client's, not the server's shutdown
    p = run(["kml-modes", "-t", "-s", "sleep 0.2", "a", "user", str(s)], FAKE_SERVER="slow")
    assert p.returncode == 0 and "server stops" in p.stdout, p.stdout
    assert 200_000_000 <= guestrun.parse(p.stdout)["a"].elapsed_ns < 900_000_000


@pytest.mark.parametrize("how, why", [
    ("early", "the server ended (status 3) before its client"),
    ("stubborn", "the server did not stop within 10 s of SIGTERM"),
    ("crash", "the server died of signal 11"),
])
def test_kml_modes_fails_a_server_that_does_not_serve(server, how, why):
    run, s = server
    p = run(["kml-modes", "-s", "sleep 0.3", "a", "user", str(s)], FAKE_SERVER=how)
    assert p.returncode == 124, p.stdout + p.stderr
    assert f"kml-modes: a: {why}" in p.stdout
    assert p.stdout.endswith("# kml-end a user 124\n")


def test_kml_modes_checks_the_server_mode(server, tmp_path):
    """Here no process has KernelMode 1: a kernel-mode server is refused."""
    run, s = server
    p = run(["kml-modes", "-s", "sleep 0.2", "a", "kernel", str(s)])
    assert p.returncode == 124
    assert "kml-modes: a: the server runs in the wrong mode (KernelMode: none)" in p.stdout
    assert list((tmp_path / "trusted").iterdir()) == []     # its copy is gone
    p = run(["kml-modes", "-s", "true", "-u", "nobody", "a", "user", str(s)])
    assert p.returncode == 2 and "-s and -u" in p.stderr


def test_spec_server_and_timed_argv():
    s = Spec("r", Mode.KERNEL, "/usr/bin/redis-server", ("--port", "1"), quiet=True,
             client="redis-benchmark -q", timed=True)
    assert s.argv("/t") == ["kml-modes", "-q", "-t", "-s", "redis-benchmark -q", "r",
                            "kernel", "/usr/bin/redis-server", "--port", "1"]
    assert "'-s' 'redis-benchmark -q'" in guestrun.script([s])


def test_stream_hides_the_time_marker():
    out = io.BytesIO()
    guestrun.Stream(out=out)(b"# kml-begin a user /p\nx\n# kml-time a 42\n# kml-end a user 0\n")
    assert out.getvalue() == b"== a (user mode): /p\nx\n"
    assert guestrun.parse("# kml-begin a user /p\n# kml-time a bad\n# kml-end a user 0\n")[
        "a"].elapsed_ns is None


def test_old_run_directories_of_a_running_kml_are_kept(tmp_path, monkeypatch):
    """build/runs keeps the latest KEEP_RUNS, but never removes the run
    directory of a ./kml that still runs (another command beside this
    one): its boot would lose its logs."""
    import os
    from kmltool import paths, qemu
    monkeypatch.setattr(paths, "RUNS", tmp_path)
    monkeypatch.setattr(qemu, "KEEP_RUNS", 2)
    dead = 2 ** 22 + 12345          # above pid_max's default: no such process
    mine = tmp_path / f"20260101-000000-{os.getpid()}-000001"
    gone = tmp_path / f"20260101-000001-{dead}-000002"
    mine.mkdir()
    gone.mkdir()
    for i in range(2):
        (tmp_path / f"20260101-00001{i}-{dead}-00000{i}").mkdir()
    new = qemu._new_rundir()
    assert mine.exists() and not gone.exists() and new.exists()


def _crash_result(tmp_path, name, crash, status=None):
    from kmltool import qemu
    d = tmp_path / name
    d.mkdir()
    res = qemu.Result(d)
    res.qemu_crash, res.status = crash, status
    return res


@pytest.mark.parametrize("kw,boots", [({}, 2), ({"drives": ["d.img"]}, 1),
                                      ({"firmware": ("c", "v")}, 1), ({"gdb": print}, 1)])
def test_a_qemu_crash_is_booted_once_more_when_nothing_outlived_it(tmp_path, monkeypatch,
                                                                  kw, boots):
    """QEMU dying of SIGSEGV before the exit status is QEMU's bug: the boot
    is made again, once, unless the first one may have written a drive,
    firmware variables or a gdb hook's state; the crash is still named."""
    import signal
    from kmltool import qemu
    made = []

    def once(argv, **k):
        made.append(k)
        return _crash_result(tmp_path, f"r{len(made)}", signal.SIGSEGV)
    monkeypatch.setattr(qemu, "_boot_once", once)
    res = qemu.boot(["true"], smp=2, **kw)
    assert len(made) == boots and all(k == dict(smp=2, **kw) for k in made)
    assert [r.rundir.name for r in res.crashed_before] == (["r1"] if boots == 2 else [])
    assert "QEMU itself crashed (SIGSEGV" in res.verdict() and res.exit_code() == 125


def test_a_qemu_crash_after_the_exit_status_is_not_booted_again(tmp_path, monkeypatch):
    import signal
    from kmltool import qemu
    made = []

    def once(argv, **k):
        made.append(argv)
        return _crash_result(tmp_path, "r", signal.SIGSEGV, status=0)
    monkeypatch.setattr(qemu, "_boot_once", once)
    res = qemu.boot(["true"])
    assert made == [["true"]] and res.status == 0 and not res.crashed_before
