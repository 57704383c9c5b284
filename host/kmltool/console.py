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


def problems(text):
    """[(kind, line_number, line)] for every problem line in a console log."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        line = re.sub(r"^\[\s*\d+\.\d+\]\s*", "", line.rstrip("\r"))
        for kind, pat in PROBLEMS:
            if pat.search(line):
                found.append((kind, n, line))
                break
    return found
