"""./kml fuzz: the differential fuzzer, the oracle for kernel mode.

The oracle: the same program, run as an ordinary process and from
/trusted (CPL 0) in the same boot, must end the same way -- the same exit
status or terminating signal, and the same output.  The guest side
(guest/fuzz/) is kml-fuzz-case, which generates a random machine-code
program from a seed (faults at addresses of every class, stack games,
control transfers, INT n, #DE, x87 and SSE faults, harmless system calls,
a signal handler that resumes, rewrites its context or exits), and
kml-fuzz, the driver that runs each seed in both modes and prints TAP.

Here: the plan (configurations of configs.TESTS, seeds, count), the run
spec (kml-fuzz through kml-modes, the one guest-run layer), the parsing
of the driver's TAP, the per-configuration result (saved as
build/fuzz/CONFIG.json) and the command that reproduces a divergent seed.
A boot whose console shows a problem (console.py: WARNING, BUG, Oops,
lockdep, stalls) or that times out (the VM hung) fails the configuration
too; for a hang the seed the driver was running is the one after its last
TAP line.
"""
import json
import re
import shlex
from dataclasses import asdict, dataclass, field

from . import configs, paths
from .guestrun import Mode, Spec
from .paths import KmlError

DRIVER = "kml-fuzz"                 # guest/fuzz/kml-fuzz.c, in /usr/bin
CASE = "kml-fuzz-case"
DEFAULT_CONFIGS = ("smp2-pti-off", "smp2-pti-on-dks")
DEFAULT_COUNT = 2000
DEFAULT_SEED = 1
DEFAULT_OPS = 48
PER_CASE_S = 20                     # kml-fuzz -t: a case slower than this is a hang
OUT = paths.BUILD / "fuzz"
SCHEMA = "kml-fuzz/1"

_OK = re.compile(r"^ok (\d+) seed (\d+)(?: # (.*))?$")
_NOT_OK = re.compile(r"^not ok (\d+) seed (\d+) user: (.*?) kernel: (.*)$")
_DIAG = re.compile(r"^#   (.*)$")
_SUMMARY = re.compile(r"^# kml-fuzz: (\d+) programs per mode, (\d+) divergences, "
                      r"seeds (\d+)\.\.(\d+)")
_BAIL = re.compile(r"^Bail out!\s*(.*)$")


@dataclass
class Divergence:
    seed: int
    user: str                       # "exit 0 out 3 lines #digest", "signal 11 ...", "hang ..."
    kernel: str
    detail: list = field(default_factory=list)     # the first differing lines


@dataclass
class Tap:
    """What one kml-fuzz run printed."""
    results: int = 0                # ok + not ok lines
    divergences: list = field(default_factory=list)
    hangs_both: list = field(default_factory=list)  # seeds that hung in both modes
    last_seed: int = None           # the last seed with a result
    summary: dict = None            # the summary line: count, divergences, first, last
    bail: str = None                # Bail out! (kernel mode not reached)

    @property
    def count(self):
        return self.summary["count"] if self.summary else self.results


def parse(lines):
    """A Tap from kml-fuzz's output lines."""
    tap, cur = Tap(), None
    for line in lines:
        line = line.rstrip("\r")
        m = _OK.match(line)
        if m:
            tap.results += 1
            tap.last_seed, cur = int(m.group(2)), None
            if m.group(3) and "hang" in m.group(3):
                tap.hangs_both.append(int(m.group(2)))
            continue
        m = _NOT_OK.match(line)
        if m:
            tap.results += 1
            tap.last_seed = int(m.group(2))
            cur = Divergence(int(m.group(2)), m.group(3).strip(), m.group(4).strip())
            tap.divergences.append(cur)
            continue
        m = _DIAG.match(line)
        if m and cur is not None:
            cur.detail.append(m.group(1))
            continue
        m = _SUMMARY.match(line)
        if m:
            tap.summary = {"count": int(m.group(1)), "divergences": int(m.group(2)),
                           "first": int(m.group(3)), "last": int(m.group(4))}
            cur = None
            continue
        m = _BAIL.match(line)
        if m:
            tap.bail = m.group(1) or "Bail out!"
    return tap


@dataclass(frozen=True)
class Plan:
    configs: tuple                  # configs.Config
    count: int                      # programs per mode per boot (an upper bound with seconds)
    seed: int                       # the first seed of the first boot
    ops: int = DEFAULT_OPS
    avoid: str = None               # kml-fuzz-case --avoid
    minutes: float = None           # --minutes: boot batches until this is used


def plan(names=None, kernel=None, count=None, seed=None, ops=None, avoid=None,
         minutes=None):
    """The configurations (names from configs.TESTS; default DEFAULT_CONFIGS,
    or every configuration of --kernel) and the run's parameters."""
    if names:
        unknown = [n for n in names if n not in configs.TESTS]
        if unknown:
            raise KmlError(f"unknown configuration {', '.join(unknown)} "
                           f"(known: {', '.join(configs.TESTS)})")
        chosen = [configs.TESTS[n] for n in dict.fromkeys(names)]
        if kernel:
            other = [c.name for c in chosen if c.kernel != kernel]
            if other:
                raise KmlError(f"--kernel {kernel}: {', '.join(other)} boot(s) another kernel")
    elif kernel and kernel != "default":
        chosen = [c for c in configs.TESTS.values() if c.kernel == kernel]
        if not chosen:
            raise KmlError(f"--kernel {kernel}: no configuration of configs.TESTS boots it")
    else:
        chosen = [configs.TESTS[n] for n in DEFAULT_CONFIGS]
    if avoid is not None and not re.fullmatch(r"[a-z0-9@,-]+", avoid):
        raise KmlError(f"--avoid {avoid!r}: KIND, CLASS or KIND@CLASS, comma-separated "
                       f"(kml-fuzz-case's usage lists them)")
    return Plan(tuple(chosen), count or DEFAULT_COUNT, DEFAULT_SEED if seed is None else seed,
                ops or DEFAULT_OPS, avoid, minutes)


def driver_args(count, seed, ops=DEFAULT_OPS, avoid=None, seconds=None):
    """kml-fuzz's arguments."""
    args = ["-n", str(count), "-s", str(seed)]
    if ops != DEFAULT_OPS:
        args += ["-o", str(ops)]
    if avoid:
        args += ["-a", avoid]
    if seconds:
        args += ["-T", str(int(seconds))]
    return args


def spec(config, count, seed, ops=DEFAULT_OPS, avoid=None, seconds=None, batch=1):
    """The run of kml-fuzz (an ordinary process: it runs both modes itself)
    in config's boot, through kml-modes."""
    name = f"{config.name}.fuzz" + (f".{batch}" if batch > 1 else "")
    return Spec(name, Mode.USER, DRIVER,
                args=tuple(driver_args(count, seed, ops, avoid, seconds)),
                title=f"kml-fuzz, {count} programs per mode from seed {seed}",
                append=config.append)


def reproduce(config, seed, ops=DEFAULT_OPS, avoid=None, user_append=""):
    """The command that runs one seed again, in a boot like config's."""
    cmd = ["./kml", "run"]
    if config.kernel != "default":
        cmd += ["--kernel", config.kernel]
    if config.smp:
        cmd += ["--smp", str(config.smp)]
    append = configs.merge(config, user_append, "fuzz")
    if append:
        cmd += ["--append", append]
    return " ".join(shlex.quote(w) for w in cmd + ["--", DRIVER, *driver_args(1, seed, ops, avoid)])


def hang_seed(tap, first):
    """The seed the driver was running when the VM stopped answering."""
    return first if tap.last_seed is None else tap.last_seed + 1


@dataclass
class ConfigResult:
    """One configuration: every boot (batch) of it, combined."""
    config: str
    append: str
    kernel: str
    ops: int
    avoid: str = None
    count: int = 0                  # programs per mode, all batches
    seeds: list = field(default_factory=list)      # [first, last] of each batch
    divergences: list = field(default_factory=list)
    hangs_both: list = field(default_factory=list)
    problems: list = field(default_factory=list)   # the VM's: console, timeout, no result
    elapsed_s: float = 0.0
    schema: str = SCHEMA

    @property
    def clean(self):
        return not self.divergences and not self.problems

    def add_batch(self, tap, first, failure=None, elapsed=0.0, user_append=""):
        """Add one boot's Tap; failure: why the boot failed as a whole."""
        config = configs.TESTS.get(self.config)
        self.elapsed_s = round(self.elapsed_s + elapsed, 1)
        self.count += tap.count
        if tap.count or tap.last_seed is not None:
            self.seeds.append([first, tap.last_seed if tap.last_seed is not None
                               else first + tap.count - 1])
        for d in tap.divergences:
            x = asdict(d)
            if config:
                x["reproduce"] = reproduce(config, d.seed, self.ops, self.avoid, user_append)
            self.divergences.append(x)
        self.hangs_both += tap.hangs_both
        if tap.bail:
            self.problems.append(f"kml-fuzz stopped: {tap.bail}")
        if failure:
            first_line = failure.splitlines()[0]
            if first_line.startswith("timeout"):
                seed = hang_seed(tap, first)
                where = f" at seed {seed} (or in the seed's second mode)"
                rep = reproduce(config, seed, self.ops, self.avoid, user_append) \
                    if config else ""
                self.problems.append(f"the VM hung{where}; reproduce: {rep}")
            self.problems.append(failure)
        elif tap.summary is None and not tap.bail:
            self.problems.append("kml-fuzz printed no summary (it did not finish)")

    def to_json(self):
        return {**asdict(self), "clean": self.clean}


def save(result, out=None):
    """build/fuzz/CONFIG.json; its path."""
    out = out or OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result.config}.json"
    path.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    return path


def report(result):
    """The lines the command prints for one configuration."""
    if result.clean:
        extra = f" ({len(result.hangs_both)} hang in both modes)" if result.hangs_both else ""
        return [f"{result.config}: {result.count} programs per mode clean{extra}"]
    lines = [f"{result.config}: {len(result.divergences)} divergence(s) in {result.count} "
             f"programs per mode" + (f", {len(result.problems)} VM problem(s)"
                                     if result.problems else "")]
    for d in result.divergences:
        lines.append(f"  seed {d['seed']}: user: {d['user']}; kernel: {d['kernel']}")
        lines += [f"    {x}" for x in d["detail"]]
        if d.get("reproduce"):
            lines.append(f"    reproduce: {d['reproduce']}")
    for p in result.problems:
        lines += ["  " + x for x in p.splitlines()]
    return lines
