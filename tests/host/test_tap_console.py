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


def test_console_plain_warning_text_is_no_problem():
    # fs/namespace.c warn_mandlock(), as trinity's mount(MS_MANDLOCK) prints it
    mand = ("[ 3.0] =======================================================\n"
            "[ 3.0] WARNING: The mand mount option has been deprecated and\n"
            "[ 3.0]          and is ignored by this kernel. Remove the mand\n"
            "[ 3.0]          option from the mount to silence this warning.\n"
            "[ 3.0] =======================================================\n")
    assert console.problems(CLEAN + mand) == []
    # only that exact text: a splat with the same words still counts
    other = "[ 3.0] WARNING: The mand mount option has been deprecated and more\n"
    assert console.problems(CLEAN + other)[0][0] == "WARNING"
    splat = "[ 3.0] WARNING: CPU: 1 PID: 7 at fs/namespace.c:1 warn_mandlock+0x1/0x2\n"
    assert console.problems(CLEAN + mand + splat)[0][0] == "WARNING"


OOM = """\
[ 5.0] stress-ng invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=1000
[ 5.0] CPU: 1 UID: 0 PID: 99 Comm: stress-ng Not tainted 6.12.117-kml #1
[ 5.0] Call Trace:
[ 5.0]  <TASK>
[ 5.0]  dump_stack_lvl+0x5d/0x80
[ 5.0]  dump_header+0x43/0x1b0
[ 5.0]  </TASK>
[ 5.0] Out of memory: Killed process 99 (stress-ng) total-vm:1000kB
"""


def test_console_oom_report_stack_is_no_problem():
    assert console.problems(CLEAN + OOM) == []
    # a trace after the report's own still counts, and so does a splat in it
    later = "[ 6.0] Call Trace:\n"
    assert [k for k, _, _ in console.problems(CLEAN + OOM + later)] == ["call trace"]
    splat = OOM.replace("[ 5.0]  dump_header", "[ 5.0] BUG: unable to handle page fault\n[ 5.0]  x")
    assert [k for k, _, _ in console.problems(CLEAN + splat)] == ["BUG"]


def test_console_allocation_failure_stack_is_no_problem():
    fail = ("[ 7.0] trinity-c1: page allocation failure: order:0, "
            "mode:0x140dca(GFP_HIGHUSER_MOVABLE|__GFP_COMP|__GFP_ZERO), nodemask=(null)\n"
            "[ 7.0] CPU: 1 UID: 65534 PID: 724 Comm: trinity-c1 Not tainted 6.12.117-kml #10\n"
            "[ 7.0] Call Trace:\n[ 7.0]  <TASK>\n[ 7.0]  warn_alloc+0xff/0x190\n[ 7.0]  </TASK>\n")
    assert console.problems(CLEAN + fail) == []
