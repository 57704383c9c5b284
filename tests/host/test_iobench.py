"""Host tests of kml-iobench (guest/bench/kml-iobench.c), run as an ordinary
process on the development machine: its JSON, its data checks (with
--inject-corruption) and its usage errors.  The timings are not checked."""
import json
import os
import subprocess

import guest_prog
import pytest

OPS = ["write", "re-write", "read", "re-read"]


@pytest.fixture(scope="module")
def iobench(tmp_path_factory):
    return guest_prog.build(tmp_path_factory, "kml-iobench")


def run(prog, *args):
    return subprocess.run([str(prog), *map(str, args)], capture_output=True, text=True,
                          timeout=120)


FAST = ("--runs", "2", "--run-ms", "2")


def test_json_and_table(iobench, tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    j = tmp_path / "r.json"
    p = run(iobench, "--dir", d, "--sizes", "16,64", *FAST, "--label", "t", "--json", j)
    assert p.returncode == 0, p.stderr
    doc = json.loads(j.read_text())
    assert doc["schema"] == "kml-iobench/1"
    assert (doc["label"], doc["cpl"], doc["mode"]) == ("t", 3, "user")
    assert (doc["runs"], doc["run_ms"], doc["record_kib"], doc["fsync"]) == (2, 2, 16, False)
    assert doc["dir"] == str(d.resolve()) and doc["fs"] and doc["verified"] is True
    assert "open() to close()" in doc["timed"]
    assert [(r["size_kib"], r["op"]) for r in doc["results"]] == \
        [(s, op) for s in (16, 64) for op in OPS]
    for r in doc["results"]:
        assert r["status"] == "ok" and r["reason"] is None, r
        assert r["records"] == r["size_kib"] // 16
        assert r["iters"] >= 1
        assert r["kib_s_best"] >= r["kib_s_median"] >= r["kib_s_worst"] > 0
        assert r["ns_best"] <= r["ns_median"] <= r["ns_worst"]
        assert abs(r["kib_s_best"] * r["ns_best"] / 1e9 - r["size_kib"]) < 0.01 * r["size_kib"]
    assert "| File size (KiB) | write KiB/s | re-write KiB/s | read KiB/s | re-read KiB/s |" \
        in p.stdout
    assert p.stdout.count("\n| 16 | ") == 1 and p.stdout.count("\n| 64 | ") == 1
    assert os.listdir(d) == []          # the test file is removed


def test_json_to_stdout_and_fsync(iobench, tmp_path):
    p = run(iobench, "--dir", tmp_path, "--sizes", "32", *FAST, "--fsync", "--record", "8",
            "--json", "-")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["fsync"] is True and "fsync() (write and re-write)" in doc["timed"]
    assert doc["record_kib"] == 8
    assert [r["records"] for r in doc["results"]] == [4] * 4
    assert "| File size (KiB) |" in p.stderr


def test_corruption_after_write_is_found(iobench, tmp_path):
    j = tmp_path / "r.json"
    p = run(iobench, "--dir", tmp_path, "--sizes", "16,64", *FAST,
            "--inject-corruption", "write", "--json", j)
    assert p.returncode == 1
    assert "data mismatch: what was read is not what was written" in p.stderr
    doc = json.loads(j.read_text())
    assert doc["verified"] is False
    res = {(r["size_kib"], r["op"]): r for r in doc["results"]}
    # one byte in the middle of the last record
    assert res[(16, "write")]["reason"] == \
        "data mismatch at offset 8192 (record 0, expected generation 1)"
    assert res[(64, "write")]["reason"] == \
        "data mismatch at offset 57344 (record 3, expected generation 1)"
    for size in (16, 64):
        for op in OPS[1:]:
            assert res[(size, op)]["status"] == "failed"
            assert res[(size, op)]["reason"] == "not measured: write failed in run 1"
            assert res[(size, op)]["kib_s_best"] is None
    assert "- FAILED: 16 KiB write: data mismatch at offset 8192" in p.stdout


def test_corruption_before_read_is_found_by_the_timed_loop(iobench, tmp_path):
    j = tmp_path / "r.json"
    p = run(iobench, "--dir", tmp_path, "--sizes", "64", *FAST,
            "--inject-corruption", "read", "--json", j)
    assert p.returncode == 1
    doc = json.loads(j.read_text())
    res = {r["op"]: r for r in doc["results"]}
    assert res["read"]["status"] == "failed"
    assert "records read back with a wrong tag, the first at offset 49152" in \
        res["read"]["reason"]
    assert res["write"]["reason"] == "not measured: read failed in run 1"
    assert doc["verified"] is False


@pytest.mark.parametrize("args,message", [
    ([], "--dir DIR is required"),
    (["--dir", "/nonexistent/dir"], "--dir /nonexistent/dir: No such file or directory"),
    (["--dir", "/etc/passwd"], "--dir /etc/passwd: not a directory"),
    (["--dir", "/tmp", "--sizes", "20"], "file size 20 KiB is not a multiple of the record "
                                         "size (16 KiB)"),
    (["--dir", "/tmp", "--sizes", "16,,32"], "a comma-separated list of sizes in KiB"),
    (["--dir", "/tmp", "--sizes", "16,"], "a comma-separated list of sizes in KiB"),
    (["--dir", "/tmp", "--sizes", "16,x"], "invalid --sizes value 'x'"),
    (["--dir", "/tmp", "--sizes", "32,32"], "32 KiB given twice"),
    (["--dir", "/tmp", "--record", "0"], "invalid --record value '0'"),
    (["--dir", "/tmp", "--runs", "0"], "invalid --runs value '0'"),
    (["--dir", "/tmp", "--run-ms", "1e3"], "invalid --run-ms value '1e3'"),
    (["--dir", "/tmp", "--expect-mode", "root"], "invalid --expect-mode value 'root'"),
    (["--dir", "/tmp", "--inject-corruption", "x"], "invalid --inject-corruption value 'x'"),
    (["--dir", "/tmp", "--json", ""], "--json needs a path"),
    (["--dir", "/tmp", "extra"], "unexpected argument 'extra'"),
    (["--dir", "/tmp", "--frobnicate"], "unrecognized option"),
])
def test_usage_errors(iobench, args, message):
    p = run(iobench, *args)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr
    assert "Try 'kml-iobench --help'." in p.stderr


def test_help(iobench):
    p = run(iobench, "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: kml-iobench --dir DIR")


def test_expect_mode(iobench, tmp_path):
    """The host is no kml kernel: kernel mode is refused with status 3."""
    p = run(iobench, "--dir", tmp_path, "--expect-mode", "kernel")
    assert p.returncode == 3
    assert "expected to run in kernel mode, but this process runs at CPL 3" in p.stderr
    p = run(iobench, "--dir", tmp_path, "--sizes", "16", *FAST, "--expect-mode", "user")
    assert p.returncode == 0, p.stderr


def test_unwritable_json_fails_before_measuring(iobench, tmp_path):
    p = run(iobench, "--dir", tmp_path, "--json", tmp_path / "no" / "r.json")
    assert p.returncode == 1
    assert "No such file or directory" in p.stderr and "| File size" not in p.stdout
