"""TAP (kselftest harness) results of the guest test programs, from the
result blocks guest/run-tests prints through kml-modes (guestrun.parse)."""
import re

from . import guestrun


class ProgramRun:
    def __init__(self, name):
        self.name = name
        self.results = {}       # test name -> ("pass"|"fail"|"skip", detail)
        self.exit = None        # program exit status (None: never finished)


_RESULT = re.compile(r"^(not ok|ok)\s+\d+\s+(\S+)(.*)$")


def parse_tap(name, lines):
    """A ProgramRun from one program's TAP output lines."""
    prog, pending = ProgramRun(name), []
    for line in lines:
        if re.match(r"^#\s+RUN\s", line):
            pending = [line]
            continue
        m = _RESULT.match(line)
        if m:
            status, test, rest = m.groups()
            if status == "not ok":
                verdict = "fail"
            elif re.match(r"\s*#\s*SKIP", rest, re.I):
                verdict = "skip"
            else:
                verdict = "pass"
            prog.results[test] = (verdict, "\n".join(pending + [line]))
            pending = []
        else:
            pending.append(line)
    return prog


def parse_runs(text):
    """{program: ProgramRun} from run-tests output (a kernel-mode run of
    a program is NAME@kernel)."""
    out = {}
    for name, run in guestrun.parse(text).items():
        out[name] = parse_tap(name, run.output)
        out[name].exit = run.exit
    return out
