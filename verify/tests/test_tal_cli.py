"""``python3 -m kmltal``: check, run, random."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kmltal.cli import main

VERIFY = Path(__file__).resolve().parents[1]
EXAMPLES = VERIFY / "kmltal" / "examples"


def run(capsys, *argv):
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def ex(name):
    return str(EXAMPLES / f"{name}.tal")


def test_check_accepts_well_typed_programs(capsys):
    status, out, _ = run(capsys, "check", ex("malloc_pair"), ex("poly_copy"), ex("loop_sum"))
    assert status == 0
    assert out.count("well-typed") == 3 and "never reaches kernel_error" in out


def test_check_reports_the_instruction_and_the_types(capsys):
    status, out, _ = run(capsys, "check", ex("bad_store"))
    assert status == 1
    assert out.strip() == (
        f"{ex('bad_store')}: type error: main+2 (address 2, line 11): `st r2, 0[r1]`: "
        "r2 has type int, but field 0 of r1 : <<int, int>> has type <int, int>")


def test_run_well_typed_at_kernel_privilege(capsys):
    status, out, _ = run(capsys, "run", ex("loop_sum"))
    assert status == 0
    assert "outcome: halted" in out and "[0x40000000]=55" in out


def test_kernel_privilege_refuses_ill_typed_programs(capsys):
    status, out, _ = run(capsys, "run", ex("bad_ld_int"))
    assert status == 1 and "refused at kernel privilege" in out


@pytest.mark.parametrize("name", ["bad_ld_int", "bad_jmp_data", "bad_store"])
def test_unchecked_at_kernel_is_kernel_error_but_user_is_user_error(capsys, name):
    status, out, _ = run(capsys, "run", "--unchecked", ex(name))
    assert status == 4 and "outcome: kernel_error" in out and "WITHOUT the type check" in out
    status, out, _ = run(capsys, "run", "--priv", "user", ex(name))
    assert status == 3 and "outcome: user_error" in out


def test_illegal_is_user_error_at_any_privilege(capsys):
    assert run(capsys, "run", "--unchecked", ex("bad_fallthrough"))[0] == 3


def test_trace_and_step_limit(capsys):
    status, out, _ = run(capsys, "run", "--trace", "--steps", "3", ex("malloc_pair"))
    assert status == 0 and "outcome: step limit after 3 step(s)" in out
    assert "step     0: next main (address 0, line 9): movi 2, r0 : sizeof(<int, int>)" in out


def test_random_programs_are_checkable(capsys, tmp_path):
    status, out, _ = run(capsys, "random", "--seed", "7")
    assert status == 0
    f = tmp_path / "r.tal"
    f.write_text(out)
    assert run(capsys, "check", str(f))[0] == 0
    status, out, _ = run(capsys, "random", "--seed", "7", "--ill-typed")
    f.write_text(out)
    assert run(capsys, "check", str(f))[0] == 1


@pytest.mark.parametrize("argv, message", [
    (["check", "/nonexistent.tal"], "No such file or directory"),
    (["run", "--priv", "root", "x.tal"], "invalid choice"),
])
def test_usage_errors(capsys, argv, message):
    status, _, err = run(capsys, *argv)
    assert status == 2 and message in err


def test_syntax_errors_exit_2(capsys, tmp_path):
    f = tmp_path / "s.tal"
    f.write_text(".code\nmain: {}\n    jump r1\n")
    status, _, err = run(capsys, "check", str(f))
    assert status == 2 and "line 3: unknown instruction 'jump'" in err


def test_module_entry_point():
    env = dict(os.environ, PYTHONPATH=str(VERIFY))
    proc = subprocess.run([sys.executable, "-m", "kmltal", "check", ex("malloc_pair")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and "well-typed" in proc.stdout
