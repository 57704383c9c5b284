"""Parse the output of guest/run-tests: TAP from each kselftest program."""
import re


class ProgramRun:
    def __init__(self, name):
        self.name = name
        self.results = {}       # test name -> ("pass"|"fail"|"skip", detail)
        self.exit = None        # program exit status (None: never finished)


_RESULT = re.compile(r"^(not ok|ok)\s+\d+\s+(\S+)(.*)$")


def parse_runs(text):
    """{program: ProgramRun} from run-tests output."""
    runs, cur, pending = {}, None, []
    for line in text.splitlines():
        m = re.match(r"^# kml-test-begin (\S+)$", line)
        if m:
            cur = runs[m.group(1)] = ProgramRun(m.group(1))
            pending = []
            continue
        m = re.match(r"^# kml-test-end (\S+) (-?\d+)$", line)
        if m and cur and m.group(1) == cur.name:
            cur.exit = int(m.group(2))
            cur = None
            continue
        if cur is None:
            continue
        if re.match(r"^#\s+RUN\s", line):
            pending = [line]
            continue
        m = _RESULT.match(line)
        if m:
            status, name, rest = m.groups()
            if status == "not ok":
                verdict = "fail"
            elif re.match(r"\s*#\s*SKIP", rest, re.I):
                verdict = "skip"
            else:
                verdict = "pass"
            cur.results[name] = (verdict, "\n".join(pending + [line]))
            pending = []
        else:
            pending.append(line)
    return runs
