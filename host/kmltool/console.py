"""Classify a kernel console log: anything here fails a run."""
import re

# A console line matching one of these means the kernel misbehaved, even if
# the command succeeded.  User-space crashes ("segfault at", "traps: ...")
# are not kernel problems and deliberately do not match.
PROBLEMS = [
    ("WARNING", re.compile(r"\bWARNING:")),
    ("BUG", re.compile(r"\bBUG:|kernel BUG at")),
    ("Oops", re.compile(r"\bOops\b")),
    ("panic", re.compile(r"Kernel panic")),
    ("double fault", re.compile(r"double fault", re.I)),
    ("lockdep", re.compile(r"possible (circular|recursive) locking|inconsistent lock state")),
    ("stall", re.compile(r"rcu_\w+ (self-)?detected stall|soft lockup|hung_task|blocked for more than")),
    ("sanitizer", re.compile(r"\b(UBSAN|KASAN|KFENCE):")),
    ("call trace", re.compile(r"^\s*Call Trace:")),
]

# Plain kernel messages that happen to start with "WARNING:" but are no
# splat (no stack dump, nothing went wrong in the kernel): a program asked
# for something deprecated.  Exact texts only; anything else still counts.
PLAIN = [
    # fs/namespace.c warn_mandlock(): mount(2) with MS_MANDLOCK (trinity)
    re.compile(r"^WARNING: The mand mount option has been deprecated and$"),
    # arch/x86/kernel/cpu/bugs.c, the mitigation chosen for the CPU model
    # (./kml pathlen --cpu: a virtual Skylake without IBRS, a virtual Zen 3
    # without the IBPB microcode)
    re.compile(r"^RETBleed: WARNING: Spectre v2 mitigation leaves CPU vulnerable to "
               r"RETBleed attacks, data leaks possible!$"),
    re.compile(r"^RETBleed: WARNING: CPU does not support IBPB\.$"),
    re.compile(r"^Speculative Return Stack Overflow: WARNING: See "
               r"https://kernel\.org/doc/html/latest/admin-guide/hw-vuln/srso\.html for "
               r"mitigation options\.$"),
]


# The OOM killer's report and an allocation-failure report (warn_alloc())
# dump the stack of the task that ran out of memory: a program's choice,
# not a kernel problem.  Their "Call Trace:" (up to the end of that trace)
# does not count; anything else in them still does.
OOM_REPORT = re.compile(r"\binvoked oom-killer: |: page allocation failure: order:\d+, mode:")
TRACE_END = re.compile(r"^\s*</TASK>")
CALL_TRACE = dict(PROBLEMS)["call trace"]


def problems(text):
    """[(kind, line_number, line)] for every problem line in a console log."""
    found = []
    in_oom = False
    for n, line in enumerate(text.splitlines(), 1):
        line = re.sub(r"^\[\s*\d+\.\d+\]\s*", "", line.rstrip("\r"))
        if any(p.search(line) for p in PLAIN):
            continue
        if OOM_REPORT.search(line):
            in_oom = True
        elif in_oom and TRACE_END.search(line):
            in_oom = False
        if in_oom and CALL_TRACE.search(line):
            continue
        for kind, pat in PROBLEMS:
            if pat.search(line):
                found.append((kind, n, line))
                break
    return found
