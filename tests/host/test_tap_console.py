"""Unit tests: TAP parsing and console-log classification."""
from kmltool import console, tap

RUN = """\
# kml-begin foundation user /usr/lib/kml/tests/foundation
TAP version 13
1..3
# Starting 3 tests from 1 test cases.
#  RUN           global.a ...
#            OK  global.a
ok 1 global.a
#  RUN           global.b ...
# foundation.c:10:b:Expected 1 (1) == 2 (2)
#          FAIL  global.b
not ok 2 global.b
#  RUN           global.c ...
#      SKIP      no pti
ok 3 global.c # SKIP no pti
# FAILED: 1 / 3 tests passed.
# kml-end foundation user 1
# kml-begin process@kernel kernel /trusted/process
TAP version 13
ok 1 global.k
# kml-end process@kernel kernel 0
# kml-begin crashed user /usr/lib/kml/tests/crashed
TAP version 13
"""


def test_tap_results_per_program():
    runs = tap.parse_runs(RUN)
    f = runs["foundation"]
    assert f.exit == 1
    assert f.results["global.a"][0] == "pass"
    assert f.results["global.b"][0] == "fail"
    assert "Expected 1 (1) == 2 (2)" in f.results["global.b"][1]
    assert f.results["global.c"][0] == "skip"
    assert runs["crashed"].exit is None and runs["crashed"].results == {}
    assert runs["process@kernel"].exit == 0
    assert runs["process@kernel"].results["global.k"][0] == "pass"


def test_tap_ignores_lines_outside_programs():
    assert tap.parse_runs("ok 1 global.x\n") == {}


CLEAN = """\
[    0.000000] Linux version 6.12.117-kml
[    1.000000] Run /init as init process
[    2.000000] prog[55]: segfault at 0 ip 0000000000401000 sp 00007ffd error 6 in prog
[    2.100000] traps: prog[56] general protection fault ip:401000 sp:7ffd error:0 in prog
[    2.200000] traps: prog[57] trap divide error ip:401000 sp:7ffd error:0 in prog
"""


def test_console_clean_log_has_no_problems():
    assert console.problems(CLEAN) == []


def test_console_detects_each_kind():
    bad = {
        "WARNING": "[ 1.0] WARNING: CPU: 0 PID: 1 at kernel/fork.c:1 foo+0x1/0x2",
        "BUG": "[ 1.0] BUG: kernel NULL pointer dereference, address: 0000000000000000",
        "Oops": "[ 1.0] Oops: 0002 [#1] SMP PTI",
        "panic": "[ 1.0] Kernel panic - not syncing: Fatal exception",
        "double fault": "[ 1.0] PANIC: double fault, error_code: 0x0",
        "lockdep": "[ 1.0] WARNING: possible circular locking dependency detected",
        "stall": "[ 1.0] rcu: INFO: rcu_sched self-detected stall on CPU",
        "call trace": "[ 1.0] Call Trace:",
    }
    for kind, line in bad.items():
        found = console.problems(CLEAN + line + "\n")
        assert len(found) == 1, (kind, found)
        assert found[0][1] == CLEAN.count("\n") + 1
    assert console.problems("[ 1.0] kernel BUG at mm/slub.c:1!\n")[0][0] == "BUG"
