"""./kml kstack-bench: demand-paged ("dynamic") kernel stacks off vs on
vs reclaim.

The same kernel boots three times, with page-table isolation as the
kernel decides (no pti= of ours): first as it is ("off"), then with
dynamic_kstacks=on on the command line ("on"), then with
dynamic_kstacks=reclaim ("reclaim", the fault-free variant); all get the
user's --append.  A kernel without the option ignores the unknown parameter, so
that the second boot then behaves like the first (ratios of about 1, and no
dynamic_kstack_pages in /proc/vmstat).

Each boot runs kml-ubench (guest/bench/kml-ubench.c): BYTE UnixBench's
system tests (System Call Overhead, Pipe Throughput, Pipe-based Context
Switching, Process Creation, Execl Throughput; median ops/s of R runs of
a fixed duration) and the kernel-stack memory of N idle threads
(/proc/meminfo KernelStack, /proc/vmstat dynamic_kstack_pages before,
with the threads blocked -- in the reclaim boot once the reclaim passes
have taken their unused pages -- and after they are joined), and how
long releasing them takes (release_ms: in the reclaim boot every wake-up
must first make a stack whole), and the wake-up latency of one sleeper:
warm, after a reclaim pass took its pages (refilled from the per-CPU
pool), and with that refill forced onto kstackd (the slow path).  Its
JSON comes back in its result block (guestrun.py); one run spec per boot
(BOOTS).

The host checks each boot (console verdict, kml-ubench's exit status and
JSON, that the command line has dynamic_kstacks=on exactly in the "on"
boot and dynamic_kstacks=reclaim exactly in the "reclaim" boot) and
prints one table: each test's ops/s in the three boots and the ratios
to off; the KernelStack growth for N idle threads, per thread, the
savings, the release times and the wake-up latencies
(report.kstack_markdown).
"""
from . import configs
from .guestrun import Mode, Spec, Status, check
from .paths import KmlError
from .util import number

SCHEMA = "kml-kstack-bench/1"
UBENCH_SCHEMA = "kml-ubench/1"
PROGRAM = "/usr/bin/kml-ubench"
PARAM_NAME = "dynamic_kstacks"
PARAM = PARAM_NAME + "=on"
RECLAIM_PARAM = PARAM_NAME + "=reclaim"
DEFAULT_THREADS = 1000

TITLES = {"off": "dynamic kernel stacks off (as the kernel is)",
          "on": f"dynamic kernel stacks on ({PARAM})",
          "reclaim": f"whole stacks, sleepers' unused pages reclaimed ({RECLAIM_PARAM})"}
# One run spec per boot (configs.KSTACK): the same program, without and
# with the parameter
BOOTS = tuple(Spec(c.name, Mode.USER, PROGRAM, title=TITLES[c.name], collect="--json",
                   quiet=True, append=c.append) for c in configs.KSTACK.values())


def ubench_args(quick=False, threads=None):
    args = ["--quick"] if quick else []
    if threads is not None:
        args += ["--threads", str(threads)]
    return args


def specs(quick=False, threads=None):
    """The two runs (one per boot) with kml-ubench's options."""
    return [b.with_options(*ubench_args(quick, threads), "-v", "--label", b.name)
            for b in BOOTS]


def _failures(doc):
    """"test: reason" for each failed test of a kml-ubench JSON document."""
    out = [f"{t.get('name')}: {t.get('reason')}" for t in doc.get("tests") or []
           if t.get("status") != "ok"]
    idle = doc.get("idle_threads")
    if idle and idle.get("status") != "ok":
        out.append(f"idle-threads: {idle.get('reason')}")
    return out


def run_status(boot, run):
    """None when the boot's kml-ubench run is good, else why not."""
    status, why = check(boot, run, schema=UBENCH_SCHEMA)
    if status not in (Status.OK, Status.FAILED):
        return why
    doc = run.doc
    bad = _failures(doc)
    if status == Status.FAILED:
        return "kml-ubench failed: " + ("; ".join(bad) if bad else why or "exit status 1")
    if bad:
        return "kml-ubench exited with 0 but reports failed tests: " + "; ".join(bad)
    for param, got in ((PARAM, bool(doc.get("dynamic_kstacks_on"))),
                       (RECLAIM_PARAM, doc.get("dynamic_kstacks") == "reclaim")):
        want = param in boot.append.split()
        if got != want:
            return (f"the kernel command line {'lacks' if want else 'has'} {param} "
                    f"(dynamic_kstacks={doc.get('dynamic_kstacks')!r}; cmdline: "
                    f"{doc.get('cmdline')})")
    if not doc.get("tests") or not doc.get("idle_threads"):
        return "kml-ubench ran no tests or no idle-threads measurement"
    return None


def boot_docs(runs, booted=None):
    """{boot name: kml-ubench's JSON} from the runs of the boots named in
    booted (default: all); a KmlError names the first boot whose run is
    not good, and why."""
    docs = {}
    for b in BOOTS:
        if booted is not None and b.name not in booted:
            continue
        why = run_status(b, runs.get(b.name))
        if why:
            raise KmlError(f"kstack-bench FAILED in the {b.name} boot: {why}")
        docs[b.name] = runs[b.name].doc
    return docs


def _ratio(a, b):
    """b / a, or None."""
    a, b = number(a), number(b)
    return round(b / a, 4) if a and b is not None else None


def _saving(off, on):
    """How much less on needs than off, in percent, or None."""
    off, on = number(off), number(on)
    return round(100.0 * (off - on) / off, 2) if off and on is not None else None


def _spread(t):
    """(max - min) / median of one test's runs, or None."""
    lo, hi, med = (number(t.get(k)) for k in ("ops_s_min", "ops_s_max", "ops_s_median"))
    return round((hi - lo) / med, 4) if med and lo is not None and hi is not None else None


def _memory(idle):
    """The memory figures of one boot's idle-threads measurement."""
    page_kib = number(idle.get("page_kib")) or 4
    dyn = number(idle.get("dynamic_stack_pages_delta"))
    return {"threads": idle.get("threads"),
            "kernel_stack_before_kib": (idle.get("before") or {}).get("kernel_stack_kib"),
            "kernel_stack_blocked_kib": (idle.get("blocked") or {}).get("kernel_stack_kib"),
            "kernel_stack_after_kib": (idle.get("after") or {}).get("kernel_stack_kib"),
            "kernel_stack_delta_kib": number(idle.get("kernel_stack_delta_kib")),
            "kernel_stack_per_thread_kib": number(idle.get("kernel_stack_per_thread_kib")),
            "kernel_stack_returned_kib": number(idle.get("kernel_stack_returned_kib")),
            "dynamic_stack_counter": bool(idle.get("dynamic_stack_counter")),
            "dynamic_stack_pages_delta": dyn,
            "dynamic_stack_delta_kib": dyn * page_kib if dyn is not None else None,
            "reclaim_ms": number(idle.get("reclaim_ms")),
            "release_ms": number(idle.get("release_ms")),
            "wake": _wake(idle.get("wake_latency") or {})}


WAKE_KINDS = ("warm", "reclaimed", "deferred")


def _wake(w):
    """The wake-up latency of one boot: {kind: {status, reason, median_ns,
    max_ns, asleep_kib}} for warm, reclaimed, deferred (kml-ubench)."""
    out = {}
    for kind in WAKE_KINDS:
        k = w.get(kind) or {}
        out[kind] = {"status": k.get("status"), "reason": k.get("reason"),
                     "median_ns": number(k.get("median_ns")),
                     "max_ns": number(k.get("max_ns")),
                     "asleep_kib": number(k.get("asleep_kernel_stack_kib"))}
    out["trials"] = number(w.get("trials"))
    out["stack_kib"] = number(w.get("stack_kib"))
    return out


def combine(docs, appends=None):
    """The combined result (a dict, saved as JSON; report.kstack_markdown()
    prints it)
    from {"off": kml-ubench JSON, "on": ..., "reclaim": ...} ("reclaim"
    may be missing: its columns are then empty).  appends: each boot's
    command-line additions, for the record."""
    missing = [b.name for b in BOOTS if b.name != "reclaim" and not docs.get(b.name)]
    if missing:
        raise KmlError(f"kstack-bench: no results from the {' and '.join(missing)} boot")
    off, on, rec = docs["off"], docs["on"], docs.get("reclaim") or {}
    boots = []
    for b in BOOTS:
        d = docs.get(b.name)
        if not d:
            continue
        boots.append({"name": b.name, "append": (appends or {}).get(b.name, b.append),
                      "cmdline": d.get("cmdline"), "dynamic_kstacks": d.get("dynamic_kstacks"),
                      "kernel": d.get("kernel"), "accel": d.get("accel"),
                      "emulated": bool(d.get("emulated")), "exe": d.get("exe"),
                      "result": d})
    rows = []
    on_tests = {t.get("name"): t for t in on.get("tests", [])}
    rec_tests = {t.get("name"): t for t in rec.get("tests", [])}
    for t in off.get("tests", []):
        u = on_tests.get(t.get("name"), {})
        v = rec_tests.get(t.get("name"), {})
        per = {}
        for name, x in (("off", t), ("on", u), ("reclaim", v)):
            per[name] = {k: number(x.get(f"ops_s_{k}")) for k in ("median", "min", "max")}
            per[name]["spread"] = _spread(x)
        rows.append({"name": t.get("name"), "label": t.get("label"), "unit": t.get("unit"),
                     "off": per["off"], "on": per["on"], "reclaim": per["reclaim"],
                     "ratio": _ratio(per["off"]["median"], per["on"]["median"]),
                     "ratio_reclaim": _ratio(per["off"]["median"],
                                             per["reclaim"]["median"])})
    m_off, m_on = _memory(off["idle_threads"]), _memory(on["idle_threads"])
    m_rec = _memory(rec.get("idle_threads") or {})
    memory = {"threads": off["idle_threads"].get("threads"),
              "stack_kib": off["idle_threads"].get("stack_kib"),
              "off": m_off, "on": m_on, "reclaim": m_rec,
              "delta_ratio": _ratio(m_off["kernel_stack_delta_kib"],
                                    m_on["kernel_stack_delta_kib"]),
              "saving_pct": _saving(m_off["kernel_stack_delta_kib"],
                                    m_on["kernel_stack_delta_kib"]),
              "delta_ratio_reclaim": _ratio(m_off["kernel_stack_delta_kib"],
                                            m_rec["kernel_stack_delta_kib"]),
              "saving_reclaim_pct": _saving(m_off["kernel_stack_delta_kib"],
                                            m_rec["kernel_stack_delta_kib"])}
    emulated = any(b["emulated"] for b in boots)
    notes = []
    if not m_on["dynamic_stack_counter"]:
        notes.append("the on boot's /proc/vmstat has no dynamic_kstack_pages: this "
                     f"kernel has no demand-paged kernel stacks, so {PARAM} was an "
                     "unknown parameter and the on boot ran like the off boot")
    if len({b["accel"] for b in boots}) > 1:
        notes.append("the two boots ran with different accelerators ("
                     + ", ".join(f"{b['name']}: {b['accel']}" for b in boots)
                     + "): the ratios compare unlike things")
    if len({b["kernel"] for b in boots}) > 1:
        notes.append("the two boots ran different kernels ("
                     + ", ".join(f"{b['name']}: {b['kernel']}" for b in boots) + ")")
    return {"schema": SCHEMA, "emulated": emulated, "accel": off.get("accel"),
            "cpu": off.get("cpu"), "ncpus": off.get("ncpus"), "kernel": off.get("kernel"),
            "runs": off.get("runs"), "duration_ms": off.get("duration_ms"),
            "boots": boots, "rows": rows, "memory": memory, "notes": notes}
