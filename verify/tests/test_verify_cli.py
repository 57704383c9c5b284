"""``kml verify`` (kmlverify.cli.main): reports, exit codes, JSON, marks."""
import json
import os
import shutil

import pytest

from kmlverify import SCANNER_VERSION, mark, policy_id
from kmlverify.cli import main

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None,
                                reason="objdump (binutils) is not installed")
BUSYBOX = "/bin/busybox"
STATIC = "int main(void) { return 0; }\n"
BAD = '__asm__(".pushsection .text\\n.globl evil\\n.type evil,@function\\nevil:\\n"' \
    '"\\twrmsr\\n\\tcli\\n.popsection\\n");\n' \
    "int main(void) { return 0; }\n"


@pytest.fixture(scope="module")
def static_ok(compile_c):
    """A static glibc program: clean, with glibc's hlt warnings."""
    return compile_c("static-ok", STATIC, "-static")


@pytest.fixture(scope="module")
def static_bad(compile_c):
    return compile_c("static-bad", BAD, "-static")


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_busybox_report(capsys):
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox-static is not installed")
    status, out, _ = run(capsys, BUSYBOX)
    assert status == 0
    assert out.startswith(f"{BUSYBOX}: OK -- 0 error(s), ")
    assert "hlt" in out and "[halt]" in out and "result: clean -- 1 file(s) scanned" in out


def test_clean_and_strict(capsys, static_ok):
    assert run(capsys, "--no-libs", str(static_ok))[0] == 0
    status, out, _ = run(capsys, "--no-libs", "--strict", str(static_ok))
    assert status == 1 and "result: FLAGGED" in out


def test_crafted_binary_is_flagged(capsys, static_bad):
    status, out, _ = run(capsys, "--no-libs", str(static_bad))
    assert status == 1
    lines = [l for l in out.splitlines() if "<evil" in l]
    assert len(lines) == 2
    assert all(word in lines[0] for word in ("error", "0f 30", "wrmsr", "[msr]"))
    assert "<evil+0x2>" in lines[1] and "cli" in lines[1] and "[interrupt-flag]" in lines[1]
    assert "[msr] CPL 0 only" in out            # the reasons are explained once


def test_json_report(capsys, static_bad):
    status, out, _ = run(capsys, "--no-libs", "--json", str(static_bad))
    assert status == 1
    report = json.loads(out)
    assert report["scanner"] == SCANNER_VERSION and report["policy"] == policy_id()
    assert report["result"] == "flagged"
    (f,) = report["files"]
    evil = [x for x in f["findings"] if (x["symbol"] or "").startswith("evil")]
    assert [x["mnemonic"] for x in evil] == ["wrmsr", "cli"]
    assert evil[0]["bytes"] == "0f 30" and evil[0]["severity"] == "error"
    with open(static_bad, "rb") as fh:
        fh.seek(evil[0]["offset"])
        assert fh.read(2) == b"\x0f\x30"


def test_max_findings_limits_the_text_report(capsys, static_bad):
    _, out, _ = run(capsys, "--no-libs", "--max-findings", "1", str(static_bad))
    assert "more (--max-findings 0 lists all)" in out


@pytest.mark.parametrize("argv, message", [
    ([], "no FILE given"),
    (["--bogus"], "unrecognized arguments"),
    (["--mark", "--check-mark", "x"], "not allowed with"),
    (["/nonexistent/file"], "No such file or directory"),
    (["--root", "/nonexistent", "/bin/ls"], "not a directory"),
    (["/"], "is a directory"),
])
def test_usage_and_io_errors_exit_2(capsys, argv, message):
    status, _, err = run(capsys, *argv)
    assert status == 2 and message in err


def test_a_text_file_is_refused(capsys, tmp_path):
    f = tmp_path / "script.sh"
    f.write_text("#!/bin/sh\necho hello\n")
    status, _, err = run(capsys, str(f))
    assert status == 2 and err.strip() == f"kml verify: {f}: not an ELF file"


def test_a_32_bit_elf_is_refused(capsys, tmp_path):
    f = tmp_path / "elf32"
    f.write_bytes(b"\x7fELF\x01\x01\x01" + bytes(57))
    status, _, err = run(capsys, str(f))
    assert status == 2 and "32-bit ELF file" in err


def test_policy_listing(capsys):
    status, out, _ = run(capsys, "--policy")
    assert status == 0 and policy_id() in out
    for category in ("[msr]", "[segment-write]", "[halt] warning", "[far-transfer]"):
        assert category in out


@pytest.fixture
def xattr_name(monkeypatch, tmp_path):
    """The mark's attribute: trusted.kml.verified when this process may
    write it (root), else user.kml.verified, else skip."""
    probe = tmp_path / "probe"
    probe.write_text("")
    for name in (mark.XATTR, "user.kml.verified"):
        try:
            os.setxattr(probe, name, b"x")
        except OSError:
            continue
        monkeypatch.setattr(mark, "XATTR", name)
        return name
    pytest.skip("this filesystem supports neither trusted.* nor user.* xattrs")


def test_mark_and_check_mark(capsys, tmp_path, static_ok, xattr_name):
    f = tmp_path / "prog"
    shutil.copy(static_ok, f)
    status, out, _ = run(capsys, "--check-mark", str(f))
    assert status == 1 and f"no {xattr_name} mark" in out

    status, out, _ = run(capsys, "--mark", str(f))
    assert status == 0 and f"marked {f}: {xattr_name}=" in out
    value = os.getxattr(f, xattr_name).decode()
    assert value == f"{SCANNER_VERSION} policy={policy_id()} mode=default sha256=" \
                    f"{mark.file_sha256(f)}"

    status, out, _ = run(capsys, "--check-mark", str(f))
    assert status == 0 and "mark OK" in out

    with open(f, "ab") as fh:
        fh.write(b"\0")
    status, out, _ = run(capsys, "--check-mark", str(f))
    assert status == 1 and "stale mark" in out


def test_a_flagged_file_is_not_marked(capsys, tmp_path, static_bad, xattr_name):
    f = tmp_path / "bad"
    shutil.copy(static_bad, f)
    status, out, _ = run(capsys, "--mark", "--no-libs", str(f))
    assert status == 1 and "not marked" in out
    with pytest.raises(OSError):
        os.getxattr(f, xattr_name)


def test_marks_from_another_policy_do_not_verify(tmp_path, static_ok, xattr_name):
    f = tmp_path / "prog"
    shutil.copy(static_ok, f)
    digest = mark.file_sha256(f)
    os.setxattr(f, xattr_name, f"kmlverify-0 policy=000000000000 mode=default "
                               f"sha256={digest}".encode())
    ok, message = mark.check_mark(str(f))
    assert not ok and "scan again" in message
    os.setxattr(f, xattr_name, b"garbage")
    assert mark.check_mark(str(f)) == (False, "malformed mark 'garbage'")
