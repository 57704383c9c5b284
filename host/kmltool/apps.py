"""./kml apps (./kml bench --apps): Debian's programs as ordinary
processes and in kernel mode, side by side in one boot per configuration.

The applications (APPS), each measured by a Debian client that runs as
an ordinary process, through the guest-run layer (guestrun.py; a server
is a Spec with a client, kml-modes -s):

  redis   redis-server (Debian's redis-server is a link to the binary
          redis-tools ships as redis-check-rdb: the name chooses the
          server), measured by redis-benchmark: requests per second of
          REDIS_TESTS, their geometric mean
  nginx   nginx (a master and two workers, guest/bench/apps/nginx.conf), one
          static page, measured by wrk over loopback: requests per second
  iperf3  iperf3 -s, measured by an ordinary iperf3 client: TCP over
          loopback, the receiver's Mbit/s (seed 001, Table 6.3)
  find    Debian's find, timed by kml-modes -t, over a tree with the
          paths of the kernel source (5,800 directories, 86,000 empty
          files, made in the guest's tmpfs by kml-apps mktree from a
          manifest the host writes), looking for one file name (seed 001,
          Table 6.2)

Per configuration (configs.APPS; 2 vCPUs), one boot runs ROUNDS rounds;
in each round every application runs in both modes, one right after the
other, Sizes.pairs times (a pair), the order of the modes
alternating from pair to pair so that a drift of the emulator's speed hits
both alike.  A server
must still run when its client ends and in the mode asked for (kml-modes
checks KernelMode in /proc/PID/status); find must print the paths the
manifest says it must.  The table gives per application and
configuration the medians of both modes and kernel/ordinary as a speed-up
(> 1: kernel mode is faster; for find the time ratio ordinary/kernel),
and the median and range of the pairs' speed-ups.

The programs come from the host's Debian packages (./kml setup installs
redis-tools, wrk, iperf3 and unpacks nginx's package without installing
it, so that no service starts on the host); their libraries are copied
in as for --add.
"""
import math
import re
import statistics
import subprocess
from dataclasses import dataclass

from . import paths, setup
from .guestrun import Mode, Spec, Status, check
from .paths import KmlError

SCHEMA = "kml-apps/1"
ROUNDS = 3
GUEST_DIR = "/usr/lib/kml/apps"             # guest/Makefile installs nginx.conf here
MANIFEST_GUEST = f"{GUEST_DIR}/linux-tree.txt"
TREE = "/tmp/linux"                         # where the guest makes the tree
FIND_NAME = "fork.c"                        # the file find looks for
FIND_GUEST = "/usr/local/bin/find"          # Debian's (busybox's is /usr/bin/find)
WWW = "/tmp/www"
PAGE_BYTES = 1024                           # the page nginx serves
REDIS_PORT, HTTP_PORT, IPERF_PORT = 6379, 8080, 5201
REDIS_TESTS = "set,get,incr,lpush,lpop,mset"
REDIS_QUICK_TESTS = "set,get"
# redis-server on loopback, nothing written to disk (./kml appliance too)
REDIS_ARGS = ("--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning")


# The appliance configurations (configs.APPS: kml=all boots) add a column:
# the server and its client both at CPL 0 (Mode.ALL).  There, kml-modes
# keeps the ordinary server and every other client in user mode with
# no_new_privs (kml-apps ordinary): all three columns in one boot.
APPLIANCE_MODES = (Mode.USER, Mode.KERNEL, Mode.ALL)


def modes(config):
    """The modes each application runs in, in a boot of config."""
    return APPLIANCE_MODES if config.kml_all else (Mode.USER, Mode.KERNEL)


@dataclass(frozen=True)
class Sizes:
    """How long each client runs."""
    redis_requests: int
    redis_tests: str
    http_seconds: int
    iperf_seconds: int
    pairs: int              # runs per mode and application in a round


# TCG's speed wanders by 20-30 % from one 3-second run to the next (iperf3
# between 1.06 and 1.67 Gbit/s in one boot, both modes alike), so a round
# holds three pairs: 9 per application and configuration by default.
FULL = Sizes(5000, REDIS_TESTS, 3, 3, 3)
QUICK = Sizes(2000, REDIS_QUICK_TESTS, 2, 2, 1)


# ---- parsing each client's output ----------------------------------------

class NoResult(Exception):
    """The run's output does not have its result."""


_REDIS_CSV = re.compile(r'^"([A-Z_]+(?: \([^)]*\))?)","([0-9.]+)"')
_WRK_RPS = re.compile(r"^Requests/sec:\s+([0-9.]+)")
_WRK_BAD = re.compile(r"^\s*(Non-2xx or 3xx responses|Socket errors):\s*(.*)")
_IPERF_RECV = re.compile(r"\s([0-9.]+) Mbits/sec\s.*\breceiver\s*$")


def parse_redis(run, _app):
    """{test: requests/s} from redis-benchmark --csv; the geometric mean."""
    tests = {}
    for line in run.output:
        m = _REDIS_CSV.match(line.strip())
        if m:
            tests[m.group(1)] = float(m.group(2))
    if not tests or not all(v > 0 for v in tests.values()):
        raise NoResult("no redis-benchmark CSV results in the output")
    mean = math.exp(sum(math.log(v) for v in tests.values()) / len(tests))
    return mean, {"tests": tests}


def parse_wrk(run, _app):
    bad = [f"{m.group(1)}: {m.group(2)}" for m in map(_WRK_BAD.match, run.output) if m]
    if bad:
        raise NoResult("wrk saw failed requests: " + "; ".join(bad))
    for line in run.output:
        m = _WRK_RPS.match(line.strip())
        if m:
            return float(m.group(1)), {}
    raise NoResult("no 'Requests/sec:' line from wrk")


def parse_iperf(run, _app):
    vals = [float(m.group(1)) for m in map(_IPERF_RECV.search, run.output) if m]
    if not vals:
        raise NoResult("no receiver summary (Mbits/sec) from the iperf3 client")
    return vals[-1], {}


def parse_find(run, app):
    if run.elapsed_ns is None:
        raise NoResult("no time for the run (kml-modes -t)")
    found = sorted(x.strip() for x in run.output if x.strip().startswith(TREE + "/"))
    want = sorted(f"{TREE}/{p}" for p in app.expect)
    if found != want:
        raise NoResult(f"find printed {len(found)} path(s), the tree has {len(want)} "
                       f"named {FIND_NAME}")
    return run.elapsed_ns / 1e6, {}


@dataclass(frozen=True)
class App:
    name: str
    title: str
    program: str            # the guest path
    args: tuple
    client: str             # guest shell command; None: the program is timed
    metric: str
    unit: str
    higher_better: bool
    parse: object           # (Run, App) -> (value, details); raises NoResult
    expect: tuple = ()      # find: the paths it must print

    def spec(self, config, mode, run):
        """run: "ROUND-PAIR", both from 1"""
        return Spec(f"{config.name}.{self.name}.{mode.value}.{run}", mode, self.program,
                    self.args, title=self.title, quiet=self.client is not None,
                    append=config.append, client=self.client,
                    timed=self.client is None)


def apps(sizes, expect_find=()):
    """The applications with their clients sized by sizes."""
    return (
        App("redis", "redis-server, redis-benchmark (ordinary)", "/usr/bin/redis-server",
            REDIS_ARGS,
            f"kml-apps wait-port {REDIS_PORT} && redis-benchmark -h 127.0.0.1 "
            f"-p {REDIS_PORT} -c 20 -n {sizes.redis_requests} -t {sizes.redis_tests} --csv",
            "requests/s, geometric mean of " + sizes.redis_tests.replace(",", " "),
            "req/s", True, parse_redis),
        App("nginx", "nginx (master, 2 workers), wrk (ordinary)", "/usr/sbin/nginx",
            ("-p", "/tmp/nginx/", "-e", "stderr", "-c", f"{GUEST_DIR}/nginx.conf"),
            f"kml-apps wait-port {HTTP_PORT} && wrk -t 2 -c 8 -d {sizes.http_seconds}s "
            f"http://127.0.0.1:{HTTP_PORT}/",
            f"requests/s of a {PAGE_BYTES}-byte page, 8 connections", "req/s", True,
            parse_wrk),
        App("iperf3", "iperf3 -s, iperf3 -c (ordinary)", "/usr/bin/iperf3",
            ("-s", "-p", str(IPERF_PORT)),
            f"kml-apps wait-port {IPERF_PORT} && iperf3 -c 127.0.0.1 -p {IPERF_PORT} "
            f"-t {sizes.iperf_seconds} -f m",
            "TCP over loopback, receiver Mbit/s", "Mbit/s", True, parse_iperf),
        App("find", "Debian's find", FIND_GUEST, (TREE, "-name", FIND_NAME), None,
            f"time to find {FIND_NAME} in a kernel-source tree", "ms", False, parse_find,
            tuple(expect_find)),
    )


APP_NAMES = tuple(a.name for a in apps(QUICK))


# ---- the guest image's extra files ---------------------------------------

def manifest_path():
    return paths.BUILD / "apps" / "linux-tree.txt"


def write_manifest(tree=None):
    """The kernel source's paths (directories end in '/'), from the base
    commit of the patch tree, into build/apps/linux-tree.txt (rewritten
    when the base changes); [paths of files named FIND_NAME]."""
    tree = tree or paths.TREE
    rev = subprocess.run(["git", "-C", str(tree), "rev-parse", "kml-base^{tree}"],
                         capture_output=True, text=True)
    if rev.returncode != 0:
        raise KmlError(f"{tree}: no kml-base commit (run ./kml patches apply): "
                       f"{rev.stderr.strip()}")
    out = manifest_path()
    stamp = out.with_suffix(".tree")
    if not (out.exists() and stamp.exists() and stamp.read_text().strip() == rev.stdout.strip()):
        ls = subprocess.run(["git", "-C", str(tree), "ls-tree", "-r", "-t", "-z", "kml-base"],
                            capture_output=True)
        if ls.returncode != 0:
            raise KmlError(f"git ls-tree kml-base in {tree} failed")
        lines = []
        for entry in ls.stdout.split(b"\0"):
            if not entry:
                continue
            meta, _, name = entry.decode(errors="replace").partition("\t")
            if "\n" in name:
                continue                # (no such name in Linux; cannot be listed)
            lines.append(name + "/" if meta.split()[1] == "tree" else name)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n")
        stamp.write_text(rev.stdout)
    return [p for p in out.read_text().splitlines()
            if not p.endswith("/") and p.rsplit("/", 1)[-1] == FIND_NAME]


def adds():
    """--add specs: the programs (with their libraries) and the manifest."""
    nginx = setup.unpacked("nginx") / "usr" / "sbin" / "nginx"
    return [
        # Debian's /usr/bin/redis-server is a link to this file
        "/usr/bin/redis-check-rdb:/usr/bin/redis-server",
        "/usr/bin/redis-benchmark:/usr/bin/redis-benchmark",
        f"{nginx}:/usr/sbin/nginx",
        "/usr/bin/wrk:/usr/bin/wrk",
        "/usr/bin/iperf3:/usr/bin/iperf3",
        f"/usr/bin/find:{FIND_GUEST}",
        f"{manifest_path()}:{MANIFEST_GUEST}",
    ]


def system_adds():
    """--add specs for the Debian system, whose image has Debian's
    redis-server, nginx, wrk and iperf3 installed: the guest-run layer
    and the tree's manifest (Debian's find is also put where the guest
    image has it)."""
    return [
        f"{paths.GUEST_SRC / 'kml-modes'}:/usr/bin/kml-modes",
        f"{paths.GUEST_OUT / 'kml-apps'}:/usr/bin/kml-apps",
        f"{paths.GUEST_SRC / 'bench' / 'apps' / 'nginx.conf'}:{GUEST_DIR}/nginx.conf",
        f"/usr/bin/find:{FIND_GUEST}",
        f"{manifest_path()}:{MANIFEST_GUEST}",
    ]


# Every boot: nginx's directories and page, the tree, no overcommit
# warning from redis.
PRELUDE = ("mkdir -p /tmp/nginx " + WWW,
           f"head -c {PAGE_BYTES} /dev/zero | tr '\\0' k > {WWW}/index.html",
           f"kml-apps mktree {MANIFEST_GUEST} {TREE} || exit 1",
           "echo 1 > /proc/sys/vm/overcommit_memory")
# The Debian system starts Debian's redis-server and nginx at boot: stopped
# first, the benchmark's own servers take their place (same ports), each
# started by systemd as a transient service (kml-modes: KML_SERVER_UNIT); the
# trusted directory is made as an administrator makes it.  Its
# /tmp is on the root file system, as Debian 12 has it: the tree goes on
# a tmpfs, as in the guest (86,000 files; the image has fewer inodes).
SYSTEM_PRELUDE = ("systemctl stop redis-server.service nginx.service",
                  "export KML_SERVER_UNIT=1",
                  "install -d -o root -g root -m 755 /trusted",
                  f"mkdir -p {TREE} && mount -t tmpfs -o mode=755 tmpfs {TREE}") + PRELUDE


def system_spec(config):
    """A run that reports the boot: kernel, CPUs, command line."""
    return Spec(f"{config.name}.system", Mode.USER, "/bin/sh",
                ("-c", "uname -r; nproc; sed -n 's/^model name[^:]*: //p' /proc/cpuinfo "
                       "| head -n 1; cat /proc/cmdline"),
                title="the boot", append=config.append)


def run_ids(rounds, sizes, modes=(Mode.USER, Mode.KERNEL)):
    """[(run id, modes in the order they run)] of one application: per
    round its pairs (one run per mode), the first mode rotating from pair
    to pair (two modes: alternating)."""
    out = []
    for r in range(rounds):
        for i in range(sizes.pairs):
            k = (r * sizes.pairs + i) % len(modes)
            out.append((f"{r + 1}-{i + 1}", tuple(modes[k:]) + tuple(modes[:k])))
    return out


def specs(configs, rounds, sizes, expect_find):
    """Per configuration: its system run, then per round every
    application's pairs, both modes one after the other."""
    out = []
    for c in configs:
        ids = run_ids(rounds, sizes, modes(c))
        out.append(system_spec(c))
        for r in range(rounds):
            for app in apps(sizes, expect_find):
                for rid, order in ids[r * sizes.pairs:(r + 1) * sizes.pairs]:
                    out += [app.spec(c, m, rid) for m in order]
    return out


# ---- combining -------------------------------------------------------------

def run_result(app, spec, run):
    """{status, reason, value, ...} of one run."""
    st, why = check(spec, run, want_json=False)
    res = {"name": spec.name, "status": st, "reason": why, "value": None}
    if run is not None and run.elapsed_ns is not None:
        res["elapsed_ms"] = run.elapsed_ns / 1e6
    if st != Status.OK:
        return res
    try:
        value, details = app.parse(run, app)
    except NoResult as e:
        res.update(status=Status.ERROR, reason=str(e))
        return res
    res.update(value=value, **details)
    return res


def speedup(app, user, kernel):
    """> 1: kernel mode is faster."""
    if not user or not kernel:
        return None
    return kernel / user if app.higher_better else user / kernel


def _system(run):
    lines = [x.strip() for x in (run.output if run else [])]
    keys = ("kernel", "ncpus", "cpu", "cmdline")
    return dict(zip(keys, lines + [None] * len(keys)))


def combine(configs, rounds, sizes, expect_find, runs, accel):
    """The results of every boot as one dict (SCHEMA)."""
    data = {"schema": SCHEMA, "accel": accel, "emulated": accel == "tcg",
            "rounds": rounds, "pairs": rounds * sizes.pairs, "sizes": sizes.__dict__,
            "configs": []}
    for c in configs:
        cfg = {"name": c.name, "append": c.append, "apps": [],
               "modes": [m.value for m in modes(c)],
               "system": _system(runs.get(f"{c.name}.system"))}
        for app in apps(sizes, expect_find):
            row = {"name": app.name, "title": app.title, "metric": app.metric,
                   "unit": app.unit, "higher_better": app.higher_better}
            ids = [rid for rid, _ in run_ids(rounds, sizes, modes(c))]
            for mode in modes(c):
                rs = [run_result(app, s, runs.get(s.name))
                      for s in (app.spec(c, mode, rid) for rid in ids)]
                vals = [r["value"] for r in rs if r["status"] == Status.OK]
                bad = [r for r in rs if r["status"] != Status.OK]
                row[mode.value] = {
                    "runs": rs, "values": vals,
                    "median": statistics.median(vals) if vals and not bad else None,
                    "status": Status.OK if not bad else bad[0]["status"],
                    "reason": None if not bad else f"{bad[0]['name']}: {bad[0]['reason']}"}
            u, k = row["user"]["median"], row["kernel"]["median"]
            row["speedup"] = speedup(app, u, k)
            # each pair's, for the spread (a pair ran back to back)
            pairs = [speedup(app, a["value"], b["value"])
                     for a, b in zip(row["user"]["runs"], row["kernel"]["runs"])]
            row["pair_speedups"] = pairs
            ok = [x for x in pairs if x]
            row["pair_median"] = statistics.median(ok) if ok else None
            if Mode.ALL in modes(c):     # the appliance against the ordinary process
                row["speedup_all"] = speedup(app, u, row["all"]["median"])
                pairs = [speedup(app, a["value"], b["value"])
                         for a, b in zip(row["user"]["runs"], row["all"]["runs"])]
                row["pair_speedups_all"] = pairs
                ok = [x for x in pairs if x]
                row["pair_median_all"] = statistics.median(ok) if ok else None
            cfg["apps"].append(row)
        data["configs"].append(cfg)
    return data


def exit_status(data):
    return 0 if all(row[m]["status"] == Status.OK for c in data["configs"]
                    for row in c["apps"]
                    for m in c.get("modes", ("user", "kernel"))) else 1
