"""./kml soak: Debian's stress-ng and trinity as kernel-mode processes.

What a newcomer tries first is a real program in kernel mode, run as it
comes.  A kernel-mode process must survive what an ordinary one survives,
and must never disturb the kernel: no WARN, BUG, Oops, lockdep report,
stall or hang on the console, whatever the program executes.

One boot per configuration (configs.SOAK: page-table isolation on and
off, dynamic kernel stacks off, on and reclaim; --short:
configs.SOAK_SHORT), 2 vCPUs by default.  In each boot, through the
guest-run layer (guestrun.py):

  stress-ng  the stressors of the classes in CLASSES (--short: the
             stressors in SHORT), one after another with two instances
             each, first as an ordinary process, then in kernel mode, with
             the same options.  Each stressor runs once per mode: it is
             given to the first of its classes (stress_ng_plan()), and the
             runs are one stress-ng invocation per class.  Its YAML metrics
             file comes back in the result block.
  trinity    the system-call fuzzer, in kernel mode, for --calls calls, as
             nobody from the start (admitted through kernel.kml_group), so
             that it cannot take the VM down through what root may do
             anyway (reboot, kill every process).  Its -X (start as root,
             drop to nobody) left processes with root's privileges that
             killed everything init started.

The soak fails if a boot's console shows a problem (console.py), a run
does not finish, a stressor fails in kernel mode but not as an ordinary
process in the same boot, or trinity stops short of its calls.  A stressor
that fails in both modes is the environment's (no such device, no network)
and is reported, not counted.

Stressors left out (EXCLUDED) execute privileged instructions on purpose
and expect the #GP an ordinary process gets; at CPL 0 they would run
them, which no kernel can notice (docs/kernel-mode.md, "Instructions").
"""
import math
import re
import subprocess
from dataclasses import dataclass

from . import configs
from .guestrun import Mode, Spec, Status, check, quote
from .paths import KmlError

STRESS_NG = "/usr/bin/stress-ng"
TRINITY = "/usr/bin/trinity"
WORKDIR = "/tmp/soak"               # the programs' scratch files (tmpfs)
SCHEMA = "kml-soak/1"

# stress-ng 0.15 has no "signal" class: its signal stressors are in os and
# interrupt.
CLASSES = ("os", "cpu", "vm", "memory", "interrupt", "scheduler", "pipe")
# The short form (CI): signals and faults, instructions, process life,
# memory, scheduling -- where a kernel-mode process differs from an
# ordinary one.
SHORT = ("sigsegv", "sigtrap", "sigfpe", "sigabrt", "signest", "bad-altstack",
         "fault", "stack", "x86syscall", "vdso", "tsc", "x86cpuid", "regs",
         "fork", "vfork", "spawn", "clone", "pthread", "ptrace", "futex", "mmap",
         "mprotect", "tlb-shootdown", "pipe", "timer", "hrtimers")
EXCLUDED = {
    "priv-instr": "executes privileged instructions and expects #GP: at CPL 0 "
                  "they run (LGDT, WRMSR, MOV to CR...)",
    "opcode": "executes random machine code: at CPL 0 that includes every "
              "privileged instruction",
}
# trinity's random seed: fixed, so that a run can be repeated exactly
# (--seed picks another).  trinity 1.9+git20230109 (Debian 12) indexes
# its 45-entry net_protocols table modulo 46 when its main process makes
# the socket file descriptors: for some seeds it reads the ELF .dynamic
# section as a pointer and segfaults at 0x21, whatever the mode.  So the
# main process makes no sockets (--disable-fds=sockets); the children
# still call socket() and the rest with random arguments.
TRINITY_SEED = 551964783

# stress-ng's exit statuses that still mean "it ran": 2 a stressor failed,
# 3 one lacked resources, 4 one is not implemented here, 7 untrustworthy
# metrics (stress-ng.h EXIT_*).  The stressors themselves are judged below.
STRESS_NG_EXITS = (0, 2, 3, 4, 7)


@dataclass(frozen=True)
class Plan:
    short: bool
    configs: tuple                  # configs.Config
    stressor_timeout: int           # seconds per stressor and mode
    calls: int                      # trinity's system calls
    seed: int = TRINITY_SEED        # trinity's random seed


def plan(short=False, names=None, stressor_timeout=None, calls=None, seed=None):
    """The soak's parameters, with the defaults of the short or long form."""
    names = names or (configs.SOAK_SHORT if short else tuple(configs.SOAK))
    unknown = [n for n in names if n not in configs.SOAK]
    if unknown:
        raise KmlError(f"unknown soak configuration {', '.join(unknown)} "
                       f"(known: {', '.join(configs.SOAK)})")
    return Plan(short, tuple(c for c in configs.SOAK.values() if c.name in names),
                stressor_timeout or 2,
                calls or (20000 if short else 100000),
                TRINITY_SEED if seed is None else seed)


def class_members(klass, program="stress-ng"):
    """The stressors of a stress-ng class, as the host's stress-ng (the
    binary the guest gets) lists them ("stress-ng --class NAME?")."""
    try:
        out = subprocess.run([program, "--class", klass + "?"], capture_output=True,
                             text=True, timeout=60)
    except FileNotFoundError:
        raise KmlError(f"{program} not found: run ./kml setup") from None
    m = re.search(r"class '[^']+' stressors: (.*)", out.stdout + out.stderr)
    if not m:
        raise KmlError(f"{program} --class {klass}? lists no stressors: "
                       f"{(out.stdout + out.stderr).strip()[:200]}")
    return m.group(1).split()


def stress_ng_plan(members, short=False):
    """[(class, [stressors run], [stressors excluded])]: each stressor once,
    in the first class that has it; members: {class: [stressors]}."""
    seen, out = set(), []
    for klass in CLASSES:
        run = [s for s in members[klass] if s not in seen and s not in EXCLUDED
               and (not short or s in SHORT)]
        seen.update(members[klass])
        if run:
            out.append((klass, run, [s for s in members[klass] if s not in run]))
    return out


def specs(p, members):
    """The runs of every boot: stress-ng per class in user, then kernel
    mode; trinity in kernel mode."""
    out = []
    for c in p.configs:
        for klass, _, excluded in stress_ng_plan(members, p.short):
            args = ["--class", klass, "--sequential", "2", "--timeout", str(p.stressor_timeout),
                    "--metrics-brief", "--temp-path", WORKDIR]
            if excluded:
                args += ["--exclude", ",".join(excluded)]
            for mode in (Mode.USER, Mode.KERNEL):
                out.append(Spec(f"{c.name}.{klass}.{mode}", mode, STRESS_NG, args,
                                title=f"stress-ng class {klass}", collect="--yaml",
                                append=c.append))
        out.append(Spec(f"{c.name}.trinity.kernel", Mode.KERNEL, TRINITY,
                        ("-q", "-l", "off", "--disable-fds=sockets", "-s", str(p.seed),
                         "-N", str(p.calls)),
                        title="trinity", append=c.append, user="nobody"))
    return out


# Every boot: the scratch directory is the programs' working directory
# (trinity writes its socket cache and test files there; in the read-only
# for nobody "/" it crashes), on its own size-limited tmpfs so that files
# cannot eat the guest's memory.
WORKDIR_MIB = 512
NOBODY_GID = 65534                  # nogroup (initramfs.py's /etc/group)
PRELUDE = (f"mkdir -p {quote(WORKDIR)}",
           f"mount -t tmpfs -o size={WORKDIR_MIB}m,mode=1777 soak {quote(WORKDIR)}",
           f"cd {quote(WORKDIR)}",
           # nobody's group may start kernel-mode programs (trinity)
           f"echo {NOBODY_GID} > /proc/sys/kernel/kml_group",
           # which are then not dumpable, so their /proc/self files are
           # root's; trinity's children raise their own oom_score_adj
           # there, so that an OOM kill picks a child, not trinity's main
           # process ("debug": every process dumpable)
           "echo 1 > /proc/sys/fs/suid_dumpable")


def adds():
    """The host programs the guest gets (with their libraries)."""
    return [f"{STRESS_NG}:{STRESS_NG}", f"{TRINITY}:{TRINITY}"]


# ---- results ---------------------------------------------------------

_METRIC = re.compile(r"^\s*-?\s*(stressor|bogo-ops|bogo-ops-per-second-real-time):\s*(\S+)")
_FAIL = re.compile(r"stress-ng: (?:fail|error):\s*\[\d+\] ([a-z0-9-]+): (.*)")
# "NAME: ..." or "NAME stressor ...", e.g. "exec stressor must not run as
# root, skipping the stressor"
_SKIP = re.compile(r"stress-ng: (?:info|warn|skip):\s*\[\d+\] ([a-z0-9-]+)(?::| stressor) "
                   r"(.*(?:skipp|not implemented|not supported|unavailable|not available|"
                   r"no such|cannot|not a recognised).*)", re.I)


def yaml_metrics(text):
    """{stressor: {"bogo_ops": n, "rate": ops/s}} from stress-ng's YAML file
    (only the keys used; stress-ng writes them one per line)."""
    out, cur = {}, None
    for line in (text or "").splitlines():
        m = _METRIC.match(line)
        if not m:
            continue
        key, val = m.groups()
        if key == "stressor":
            cur = out.setdefault(val, {})
        elif cur is not None:
            try:
                cur["bogo_ops" if key == "bogo-ops" else "rate"] = float(val)
            except ValueError:
                pass
    return out


# stress-ng's own verdict EXIT_NO_RESOURCE, e.g. "process [17345] (mutex)
# aborted early, out of system resources"
_NO_RESOURCE = re.compile(r"stress-ng: warn:\s*\[\d+\] process \[\d+\] \(([a-z0-9-]+)\) "
                          r"aborted early, out of system resources")
NO_RESOURCE = "out of system resources (stress-ng's verdict, not a failure)"


def stressors(run, names):
    """{stressor: {"status", "reason", "bogo_ops", "rate"}} for one
    stress-ng run: failed (a fail or error line names it), ok (it has
    metrics), else skipped (with stress-ng's reason if it gave one).  A
    stressor whose instance stress-ng reports as aborted for lack of
    resources (its exit code EXIT_NO_RESOURCE) counts as skipped, with the
    message it gave and NO_RESOURCE as the reason, whatever it printed
    before: stress-ng does not count it as a failure either."""
    metrics = yaml_metrics(run.data)
    fails, skips, starved = {}, {}, set()
    for line in run.output:
        m = _NO_RESOURCE.search(line)
        if m:
            starved.add(m.group(1))
            continue
        m = _FAIL.search(line)
        if m:
            fails.setdefault(m.group(1), m.group(2).strip())
            continue
        m = _SKIP.search(line)
        if m:
            skips.setdefault(m.group(1), m.group(2).strip())
    out = {}
    for s in names:
        r = dict(metrics.get(s, {}))
        if s in starved:
            said = fails.get(s) or skips.get(s)
            r.update(status=Status.SKIPPED,
                     reason=NO_RESOURCE + (f": {said}" if said else ""))
        elif s in fails:
            r.update(status=Status.FAILED, reason=fails[s])
        elif s in metrics:
            r.update(status=Status.OK, reason=None)
        else:
            r.update(status=Status.SKIPPED, reason=skips.get(s, "stress-ng did not run it"))
        out[s] = r
    return out


def run_status(spec, run):
    """(Status, reason) of a stress-ng run as a whole: did it run and end
    with one of stress-ng's own statuses."""
    if run is None or run.not_run or not run.finished:
        return check(spec, run, want_json=False)
    if run.exit not in STRESS_NG_EXITS:
        return Status.ERROR, f"stress-ng exited with {run.exit}: {run.last_line()}"
    return Status.OK, None


_TRINITY_RAN = re.compile(r"Ran (\d+) syscalls")


def trinity_result(spec, run, calls):
    """{"status", "reason", "calls"} for the trinity run."""
    st, why = check(spec, run, want_json=False)
    done = None
    for line in (run.output if run else []):
        m = _TRINITY_RAN.search(line)
        if m:
            done = int(m.group(1))
    if st is Status.OK and (done is None or done < calls):
        st, why = Status.FAILED, (f"ran {done} of {calls} calls" if done is not None
                                  else "no \"Ran N syscalls\" line: " + run.last_line())
    return {"status": st, "reason": why, "calls": done}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def combine(p, members, outcome):
    """The soak's result: per configuration, each stressor in both modes,
    the verdict and trinity's; "status" ok only if every part is."""
    runs = outcome.runs
    booted = {s.name: s for b in outcome.boots for s in b.specs}
    boots = {b.specs[0].append: b for b in outcome.boots if b.specs}
    data = {"schema": SCHEMA, "short": p.short, "stressor_timeout": p.stressor_timeout,
            "calls": p.calls, "seed": p.seed, "excluded": EXCLUDED, "configs": []}
    for c in p.configs:
        boot = boots.get(c.append)
        cfg = {"name": c.name, "append": c.append, "stressors": {}, "problems": [],
               "boot": (boot.failure if boot else "not booted (an earlier boot failed)")}
        for klass, names, _ in stress_ng_plan(members, p.short):
            for mode in (Mode.USER, Mode.KERNEL):
                name = f"{c.name}.{klass}.{mode}"
                spec, run = booted.get(name), runs.get(name)
                st, why = run_status(spec, run) if spec else (Status.NOT_RUN, "not booted")
                if st is not Status.OK:
                    cfg["problems"].append(f"stress-ng class {klass} ({mode} mode): {st}: {why}")
                    results = {s: {"status": Status.NOT_RUN, "reason": why} for s in names}
                else:
                    results = stressors(run, names)
                for s, r in results.items():
                    r["class"] = klass
                    cfg["stressors"].setdefault(s, {})[mode.value] = r
        for s, r in cfg["stressors"].items():
            u, k = r.get("user", {}), r.get("kernel", {})
            if k.get("status") == Status.FAILED and u.get("status") != Status.FAILED:
                cfg["problems"].append(f"stressor {s} fails in kernel mode only: {k.get('reason')}")
            if u.get("status") == Status.OK and k.get("status") == Status.OK and u.get("rate"):
                r["ratio"] = (k.get("rate") or 0) / u["rate"]
        tspec = booted.get(f"{c.name}.trinity.kernel")
        cfg["trinity"] = (trinity_result(tspec, runs.get(tspec.name), p.calls) if tspec
                          else {"status": Status.NOT_RUN, "reason": "not booted", "calls": None})
        if cfg["trinity"]["status"] is not Status.OK:
            cfg["problems"].append(f"trinity: {cfg['trinity']['status']}: {cfg['trinity']['reason']}")
        if cfg["boot"]:
            cfg["problems"].insert(0, "boot: " + cfg["boot"])
        cfg["ratio_geomean"] = geomean(r.get("ratio") for r in cfg["stressors"].values())
        cfg["status"] = Status.OK if not cfg["problems"] else Status.FAILED
        data["configs"].append(cfg)
    data["status"] = (Status.OK if all(c["status"] is Status.OK for c in data["configs"])
                      else Status.FAILED)
    return data


def counts(cfg):
    """How many stressors ran ok in both modes, failed where, were skipped."""
    n = {"both_ok": 0, "kernel_only_failed": 0, "both_failed": 0, "user_only_failed": 0,
         "skipped": 0, "not_run": 0}
    for r in cfg["stressors"].values():
        u, k = r.get("user", {}).get("status"), r.get("kernel", {}).get("status")
        if u == Status.OK and k == Status.OK:
            n["both_ok"] += 1
        elif k == Status.FAILED and u != Status.FAILED:
            n["kernel_only_failed"] += 1
        elif k == Status.FAILED:
            n["both_failed"] += 1
        elif u == Status.FAILED:
            n["user_only_failed"] += 1
        elif Status.NOT_RUN in (u, k):
            n["not_run"] += 1
        else:
            n["skipped"] += 1
    return n


def markdown(data):
    """The summary table, then per configuration what failed and the
    stressors with the lowest and highest kernel/user ratio."""
    form = "short" if data["short"] else "long"
    out = [f"## ./kml soak ({form} form): stress-ng ({data['stressor_timeout']} s per "
           f"stressor and mode, 2 instances) and trinity ({data['calls']} calls, "
           f"seed {data['seed']}) "
           "in kernel mode", "",
           "bogo-ops/s ratios are EMULATED (QEMU TCG), kernel mode / ordinary process, "
           "geometric mean over the stressors ok in both modes.", "",
           "| configuration | stressors | ok in both modes | failed in kernel mode only "
           "| failed in both | failed as ordinary only | skipped | bogo-ops/s kernel/user "
           "| trinity calls | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for c in data["configs"]:
        n = counts(c)
        ratio = f"{c['ratio_geomean']:.2f}" if c.get("ratio_geomean") else "–"
        t = c["trinity"]
        calls = str(t["calls"]) if t.get("calls") is not None else str(t["status"])
        out.append(f"| {c['name']} (`{c['append']}`) | {len(c['stressors'])} | {n['both_ok']} "
                   f"| {n['kernel_only_failed']} | {n['both_failed']} | {n['user_only_failed']} "
                   f"| {n['skipped'] + n['not_run']} | {ratio} | {calls} "
                   f"| {'clean' if c['status'] is Status.OK else 'FAILED'} |")
    out.append("")
    out.append("Not run in either mode: " + "; ".join(
        f"`{s}` ({why})" for s, why in data["excluded"].items()) + ".")
    for c in data["configs"]:
        if c["problems"]:
            out += ["", f"### {c['name']}: problems", ""]
            out += [f"- {p}" for p in c["problems"]]
        both = [(s, r) for s, r in c["stressors"].items()
                if r.get("user", {}).get("status") == Status.FAILED
                and r.get("kernel", {}).get("status") == Status.FAILED]
        if both:
            out += ["", f"### {c['name']}: failed in both modes (the environment)", ""]
            out += [f"- `{s}`: {r['kernel'].get('reason')}" for s, r in both]
        starved = [(s, m, r[m]["reason"]) for s, r in c["stressors"].items()
                   for m in ("user", "kernel")
                   if (r.get(m, {}).get("reason") or "").startswith(NO_RESOURCE)]
        if starved:
            out += ["", f"### {c['name']}: aborted for lack of resources "
                    "(stress-ng's EXIT_NO_RESOURCE; counted as skipped)", ""]
            out += [f"- `{s}` ({m} mode): {why}" for s, m, why in starved]
    return "\n".join(out) + "\n"
