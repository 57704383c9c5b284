"""Run programs in the guest, in user and kernel mode, and collect results.

Every ./kml command that runs programs in a VM goes through this layer:
the test suite (guest/run-tests), the demo, `./kml run --kernel-mode`,
`./kml bench` (and its --apps), `./kml kstack-bench`, `./kml soak` and
`./kml pathlen`.  A command describes each program
run as a Spec (program, arguments, user or kernel mode, how to collect its
result, what the boot needs); boot() groups the specs into boots, writes
the guest script, streams the output and parses it into Runs; check()
applies the checks every run shares and gives a Status.

The guest side is guest/kml-modes: it runs one program as installed (user
mode) or from a copy in /trusted (kernel mode) and prints one result block,
the only guest-to-host protocol (in a kml=all boot, user mode and the
clients are confined with no_new_privs, and mode all runs both at CPL 0):

    # kml-begin NAME MODE COMMAND...
    ...the program's output (standard output and error)...
    # kml-data NAME                 (only when the spec collects a file)
    ...the file the program wrote...
    # kml-time NAME NS              (only for a timed run: wall-clock ns)
    # kml-end NAME MODE STATUS      (exit status, or not-run)

A spec with a client runs its program as a server: kml-modes starts it in
the background, runs the client (an ordinary process) and, when the client
ends, checks that the server still runs, in the spec's mode, and stops it.
"""
import enum
import json
import re
import sys
from dataclasses import dataclass, field, replace
from functools import cached_property

from . import configs, qemu
from .paths import KmlError
from .util import say

HELPER = "kml-modes"        # guest/kml-modes, installed in /usr/bin
TRUSTED = "/trusted"
MARK = "# kml-"
NOT_RUN = "not-run"
RESULT_DIR = "/tmp/kml-runs"    # where the guest keeps collected files
EXIT_UNAVAILABLE = 3        # the benchmarks: the mode asked for is not available
_MARKER = re.compile(r"# kml-(begin|data|time|end) (\S+)(?: (\S+))?(?: (.*))?$")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]*")


class Mode(str, enum.Enum):
    """Where a program runs: as an ordinary process, or at CPL 0 (from
    /trusted; or, ALL, in a kml=all boot as installed, its client too)."""
    USER = "user"
    KERNEL = "kernel"
    ALL = "all"

    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def cpl(self):
        return 3 if self is Mode.USER else 0


class Status(str, enum.Enum):
    """The verdict on one run (and on one result of it).  The values are
    what the saved JSON says."""
    OK = "ok"
    FAILED = "failed"               # it ran and reports failures of its own
    SKIPPED = "skipped"             # a result the program did not measure here
    UNAVAILABLE = "unavailable"     # the mode cannot run on this kernel
    ERROR = "error"                 # it did not run as it should
    NOT_RUN = "not run"             # no result for it at all

    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class Spec:
    """One program run in the guest.

    name     the run's name in the result block; unique within a command
    mode     Mode.USER: run program as installed; Mode.KERNEL: from a copy
             in /trusted
    program  a guest path, or a name looked up in PATH
    args     the arguments that define the run (reports show them)
    options  further arguments of this invocation (--quick, --label...)
    title    what the run is, for reports
    collect  the program's option for a result file (e.g. "--json"): it is
             given OPTION FILE and the file comes back as Run.data
    quiet    the program's standard output is not wanted (its standard
             error still streams and is in Run.output)
    setup    a guest shell command that must succeed first; if it fails,
             the run is reported as not run, with its error output
    append   kernel command line the boot needs (specs with a different
             append run in another boot)
    boot     a name for the boot: specs with a different one run in another
             boot even with the same append (a fresh kernel for each, when
             what one run leaves behind would bias the next)
    disk     (MiB, file system) of a virtio disk the boot needs, or None
    required a failure ends the guest script (and fails the boot)
    user     run the program as this user (kml-modes -u), not as root
    client   the program is a server: this guest shell command (an ordinary
             process) runs while it does (kml-modes -s); the block's status
             is the client's, its output both's
    timed    the run's wall-clock time comes back as Run.elapsed_ns
             (kml-modes -t; with a client, the client's time)
    """
    name: str
    mode: Mode
    program: str
    args: tuple = ()
    options: tuple = ()
    title: str = ""
    collect: str = None
    quiet: bool = False
    setup: str = None
    append: str = ""
    disk: tuple = None
    required: bool = False
    user: str = None
    client: str = None
    timed: bool = False
    boot: str = ""

    def __post_init__(self):
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"bad run name {self.name!r}")
        object.__setattr__(self, "mode", Mode(self.mode))
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "options", tuple(self.options))

    @property
    def cpl(self):
        return self.mode.cpl

    @property
    def path(self):
        """Where the program runs: as given, or its copy in /trusted."""
        if self.mode is not Mode.KERNEL or self.program.startswith(TRUSTED + "/"):
            return self.program
        return f"{TRUSTED}/{self.base}"

    @property
    def base(self):
        """The program's file name (the name of a kernel-mode copy)."""
        return self.program.rsplit("/", 1)[-1]

    def result_file(self, tmp=RESULT_DIR):
        return f"{tmp}/{self.name}.out" if self.collect else None

    def argv(self, tmp=RESULT_DIR, not_run=None):
        """The guest command: kml-modes with this run."""
        out = [HELPER]
        if self.quiet:
            out.append("-q")
        if self.collect:
            out += ["-c", self.result_file(tmp)]
        if not_run is not None:
            out += ["-n", not_run]
        if self.user:
            out += ["-u", self.user]
        if self.timed:
            out.append("-t")
        if self.client:
            out += ["-s", self.client]
        out += [self.name, self.mode.value, self.program, *self.args, *self.options]
        if self.collect:
            out += [self.collect, self.result_file(tmp)]
        return out

    def with_options(self, *options, **changes):
        return replace(self, options=self.options + tuple(options), **changes)


def quote(s):
    """Single-quote s for sh (always, so that scripts read the same)."""
    return "'" + str(s).replace("'", "'\\''") + "'"


def script(specs, prelude=(), tmp=RESULT_DIR):
    """The guest shell script running specs in order: one kml-modes call
    each; consecutive specs with the same setup share one `if`.  prelude:
    shell lines before the runs."""
    lines = list(prelude)
    if any(s.collect or s.setup for s in specs):
        lines.append(f"mkdir -p {quote(tmp)}")
    i, n = 0, 0
    while i < len(specs):
        setup, group = specs[i].setup, []
        while i < len(specs) and specs[i].setup == setup:
            group.append(specs[i])
            i += 1
        if not setup:
            lines += [_call(s, tmp) for s in group]
            continue
        n += 1
        err = quote(f"{tmp}/setup-{n}.err")
        lines.append(f"if {{ {setup}; }} 2>{err}; then")
        lines += ["  " + _call(s, tmp) for s in group]
        lines.append("else")
        lines.append(f"  why={quote(setup + ' failed: ')}\"$(tr '\\n' ' ' <{err})\"")
        lines += ["  " + _call(s, tmp, why='"$why"') for s in group]
        lines.append("fi")
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


def _call(spec, tmp, why=None):
    """One kml-modes line; why: a shell word, the reason it is not run."""
    helper, *rest = spec.argv(tmp)
    words = [helper] + (["-n", why] if why else []) + [quote(a) for a in rest]
    return " ".join(words) + (" || exit $?" if spec.required else "")


# ---- parsing ---------------------------------------------------------

@dataclass
class Run:
    """One result block."""
    name: str
    mode: str
    command: str = ""
    exit: int = None            # the exit status (None: not run, or unfinished)
    not_run: bool = False
    finished: bool = False      # the end marker came
    output: list = field(default_factory=list)     # lines
    data: str = None            # the collected file (None: none)
    elapsed_ns: int = None      # a timed run's wall-clock time

    @property
    def text(self):
        return "".join(line + "\n" for line in self.output)

    def last_line(self):
        """The last non-empty output line (where programs say why)."""
        return next((x.strip() for x in reversed(self.output) if x.strip()), "")

    @cached_property
    def _json(self):
        if self.data is None or not self.data.strip():
            return None, None
        try:
            return json.loads(self.data), None
        except ValueError as e:
            return None, str(e)

    @property
    def doc(self):
        """The collected file as JSON (None: none, or invalid)."""
        return self._json[0]

    @property
    def json_error(self):
        return self._json[1] or ""


def split_marker(line):
    """(text before a marker, marker match or None) for one output line.
    A marker normally starts its line; after output without a final
    newline it follows that output."""
    i = line.find(MARK)
    while i >= 0:
        m = _MARKER.match(line, i)
        if m:
            return line[:i], m
        i = line.find(MARK, i + 1)
    return line, None


def parse(text):
    """{name: Run} from guest output, in the order the blocks began."""
    runs, cur, in_data = {}, None, False
    for line in text.splitlines():
        line = line.rstrip("\r")
        before, m = split_marker(line)
        if before and cur is not None:
            if in_data:
                cur.data = (cur.data or "") + before + "\n"
            else:
                cur.output.append(before)
        if m is None:
            continue
        kind, name, mode, rest = m.groups()
        if kind == "begin" and mode:
            cur = runs[name] = Run(name, mode, rest or "")
            in_data = False
        elif cur is None or name != cur.name:
            continue
        elif kind == "data":
            in_data, cur.data = True, ""
        elif kind == "time":
            in_data = False
            try:
                cur.elapsed_ns = int(mode)
            except (TypeError, ValueError):
                cur.elapsed_ns = None
        elif kind == "end":
            word = (rest or "").strip()
            if word == NOT_RUN:
                cur.not_run = True
            else:
                try:
                    cur.exit = int(word)
                except ValueError:
                    cur.exit = None
            cur.finished = True
            cur, in_data = None, False
    return runs


# ---- checks ----------------------------------------------------------

def check(spec, run, schema=None, want_json=True):
    """(Status, reason) from what every run shares: did it run, how did it
    exit, did it write its result (a JSON document with the schema given,
    from the expected CPL; want_json=False: the caller reads the collected
    file itself).  OK: exit status 0; FAILED: 1 (the program reports failures
    itself; the caller says which)."""
    prog = spec.base
    if run is None:
        return Status.ERROR, "no output from this run (the guest script stopped early)"
    last = run.last_line()
    if run.not_run:
        return Status.ERROR, "not run: " + last.split(": not run: ", 1)[-1]
    if not run.finished:
        return Status.ERROR, f"{prog} did not finish" + (f": {last}" if last else "")
    if run.exit == EXIT_UNAVAILABLE:
        return Status.UNAVAILABLE, last or f"{prog} exit status {EXIT_UNAVAILABLE}"
    if run.exit not in (0, 1):
        return Status.ERROR, f"{prog} exited with {run.exit}" + (f": {last}" if last else "")
    if spec.collect and want_json:
        doc = run.doc
        if doc is None and run.exit != 0 and last:
            return Status.ERROR, f"{prog} exited with {run.exit}: {last}"
        if doc is None:
            why = f"invalid JSON ({run.json_error})" if run.json_error else "no JSON"
            return Status.ERROR, f"{prog} exited with {run.exit} but wrote {why}"
        if schema and doc.get("schema") != schema:
            return Status.ERROR, f"JSON schema {doc.get('schema')!r}, expected {schema!r}"
        if "cpl" in doc and doc.get("cpl") != spec.cpl:
            return Status.ERROR, (f"ran at CPL {doc.get('cpl')}, expected CPL {spec.cpl} "
                                  "(did --expect-mode not work?)")
    return (Status.OK, None) if run.exit == 0 else (Status.FAILED, last or None)


# ---- streaming -------------------------------------------------------

def header(name, mode, command):
    """The line the stream shows for a block's begin marker."""
    return f"== {name} ({mode} mode): {command}".rstrip()


class Stream:
    """A qemu.boot() stream callback: passes the guest's output through as
    it comes, shows each begin marker as a header line (headers=False:
    hides it), hides the other markers and the collected data."""

    def __init__(self, out=None, headers=True):
        self.out = out or sys.stdout.buffer
        self.headers = headers
        self.buf = ""
        self.in_data = False
        self.midline = False        # part of the current line was written

    def __call__(self, data):
        self.buf += data.decode(errors="replace")
        *lines, self.buf = self.buf.split("\n")
        out = [self._line(line) for line in lines]
        # a partial line: write what cannot start a marker
        i = self.buf.find("#")
        if not self.in_data and i != 0:
            part = self.buf if i < 0 else self.buf[:i]
            if part:
                out.append(part)
                self.midline = True
                self.buf = self.buf[len(part):]
        self._write("".join(out))

    def _line(self, line):
        before, m = split_marker(line)
        midline, self.midline = self.midline, False
        if m is None:
            return "" if self.in_data else before + "\n"
        text = "" if self.in_data else before
        kind, name, mode, rest = m.groups()
        if (text or midline) and not self.in_data:
            text += "\n"            # the output before the marker ends here
        if kind == "begin":
            self.in_data = False
            if self.headers:
                text += header(name, mode, rest or "") + "\n"
        else:
            self.in_data = kind == "data"
        return text

    def _write(self, text):
        if text:
            self.out.write(text.encode())
            self.out.flush()


# ---- booting ---------------------------------------------------------

@dataclass
class Boot:
    """One VM boot and the runs in it."""
    append: str
    specs: list
    result: object = None       # qemu.Result
    runs: dict = field(default_factory=dict)
    failure: str = None         # why the boot failed as a whole
    code: int = 0               # ./kml's exit status for that failure


@dataclass
class Outcome:
    boots: list

    @property
    def runs(self):
        out = {}
        for b in self.boots:
            out.update(b.runs)
        return out

    @property
    def failed(self):
        """The boot that failed as a whole, or None."""
        return next((b for b in self.boots if b.failure), None)


def group(specs):
    """The boots specs need: [(append, disk, [specs])], in order; specs
    with the same append and boot name share a boot (it gets the largest
    disk wanted)."""
    boots = {}
    for s in specs:
        b = boots.setdefault((s.append, s.boot), [s.append, None, []])
        b[2].append(s)
        if s.disk and (b[1] is None or s.disk[0] > b[1][0]):
            b[1] = s.disk
    return [tuple(b) for b in boots.values()]


def boot(specs, prelude=(), append="", show=True, runner=None, **vm):
    """Boot once per group of specs (see group()), run them with kml-modes
    and parse the results.  prelude: shell lines every boot's script
    starts with.  append: the user's kernel command line, added to each
    boot's own (configs.merge: one that sets a parameter of the boot's own
    is refused); vm: qemu.boot()'s smp, mem, timeout, accel, gdb.
    show: stream the output (with a header line per run).  runner: what
    boots (default qemu.boot; system.boot for the Debian system), called
    as qemu.boot is.  Stops after a
    boot that fails as a whole (a console problem, a timeout, the guest
    script's exit status); Outcome.failed says which and why."""
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise KmlError(f"run names must be unique: {', '.join(dup)}")
    groups = group(specs)
    for _, disk, _ in groups:           # before any boot: a clear error
        if disk and disk[1]:
            qemu.find_mkfs(disk[1])
    fulls = [configs.merge(own, append, f"the boot of {members[0].name}")
             for own, _, members in groups]
    out = Outcome([])
    for i, ((_, disk, members), full) in enumerate(zip(groups, fulls)):
        b = Boot(full, members)
        out.boots.append(b)
        if len(groups) > 1:
            names = [s.name for s in members]
            runs = (", ".join(names) if len(names) <= 6 else
                    f"{', '.join(names[:3])}, ... {len(names) - 3} more runs")
            say(f"boot {i + 1} of {len(groups)} ({runs}): "
                f"kernel command line + {full or '(nothing)'}")
        text = script(members, prelude)
        disk_opts = {"disk_mib": disk[0], "disk_fs": disk[1]} if disk else {}
        res = (runner or qemu.boot)(["sh", "-c", text], append=full,
                                    stream=Stream() if show else False, **disk_opts, **vm)
        b.result = res
        output = res.output.decode(errors="replace")
        b.runs = parse(output)
        where = f" in the boot with {full or 'no extra parameters'}" if len(groups) > 1 else ""
        msg = res.verdict()
        if msg:
            b.failure, b.code = msg + where, res.exit_code()
        elif res.status != 0 or not b.runs:
            tail = "\n".join(output.strip().splitlines()[-5:])
            b.failure = (f"the guest script exited with {res.status}{where}"
                         + (f"; its last output:\n{tail}" if tail else "")
                         + f"\noutput: {res.output_log}")
            b.code = res.status or 1
        if b.failure:
            break
    return out
