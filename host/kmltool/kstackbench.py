"""./kml kstack-bench: demand-paged ("dynamic") kernel stacks off vs on.

The same kernel boots twice, with page-table isolation as the kernel
decides (no pti= of ours): first as it is ("off"), then with
dynamic_kstacks=on on the command line ("on"); both get the user's
--append.  A kernel without the option ignores the unknown parameter, so
that the second boot then behaves like the first (ratios of about 1, and no
nr_dynamic_stack_pages in /proc/vmstat).

Each boot runs kml-ubench (guest/bench/kml-ubench.c): BYTE UnixBench's
system tests (System Call Overhead, Pipe Throughput, Pipe-based Context
Switching, Process Creation, Execl Throughput; median ops/s of R runs of
a fixed duration) and the kernel-stack memory of N idle threads
(/proc/meminfo KernelStack, /proc/vmstat nr_dynamic_stack_pages before,
with the threads blocked, and after they are joined).  The guest prints
its JSON between the markers of ./kml bench (bench.parse_output).

The host checks each boot (console verdict, kml-ubench's exit status and
JSON, that the command line has dynamic_kstacks=on exactly in the "on"
boot) and prints one table: each test's ops/s off and on and the ratio
on/off; the KernelStack growth for N idle threads off and on, per thread,
and the saving.
"""
import json
import shlex
import time

from . import bench, paths
from .bench import _num
from .paths import KmlError

SCHEMA = "kml-kstack-bench/1"
UBENCH_SCHEMA = "kml-ubench/1"
PROGRAM = "/usr/bin/kml-ubench"
PARAM_NAME = "dynamic_kstacks"
PARAM = PARAM_NAME + "=on"
RUN = "ubench"              # the run's name in the guest script's markers
DEFAULT_THREADS = 1000
EMULATED = "emulated (TCG)"
EMULATED_NOTE = ("emulated (TCG): QEMU software emulation, not hardware timings; "
                 "compare ratios only")


class Boot:
    def __init__(self, name, extra):
        self.name = name        # "off" or "on"
        self.extra = extra      # kernel parameters this boot adds

    def append(self, user_append=""):
        """The boot's kernel command line additions."""
        return " ".join(x for x in (self.extra, user_append.strip()) if x)


BOOTS = (Boot("off", ""), Boot("on", PARAM))


def check_append(append):
    """The user's --append must not decide dynamic_kstacks itself."""
    try:
        words = shlex.split(append or "")
    except ValueError:
        words = (append or "").split()
    for word in words:
        if word.split("=", 1)[0] == PARAM_NAME:
            raise KmlError(f"--append {append!r}: {word} would spoil the comparison "
                           f"(kstack-bench boots without and with {PARAM} itself)")


def ubench_args(quick=False, threads=None):
    args = ["--quick"] if quick else []
    if threads is not None:
        args += ["--threads", str(threads)]
    return args


def guest_script(program=PROGRAM, tmp="/tmp"):
    """The guest shell script; kml-ubench's options come as "$@"."""
    lines = [bench.mode_function("kml-ubench", tmp),
             f'mode {RUN} {bench._q(program)} "$@"']
    lines += bench.report_lines([RUN], tmp)
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


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
    if run is None:
        return "no output from kml-ubench (the guest script stopped early)"
    last = bench._last_line(run.stderr)
    doc = run.doc
    if run.exit not in (0, 1) or (run.exit == 1 and doc is None):
        return f"kml-ubench exited with {run.exit}" + (f": {last}" if last else "")
    if doc is None:
        why = f"invalid JSON ({run.json_error})" if run.json_error else "no JSON"
        return f"kml-ubench exited with {run.exit} but wrote {why}"
    if doc.get("schema") != UBENCH_SCHEMA:
        return f"JSON schema {doc.get('schema')!r}, expected {UBENCH_SCHEMA!r}"
    bad = _failures(doc)
    if run.exit == 1:
        return "kml-ubench failed: " + ("; ".join(bad) if bad else last or "exit status 1")
    if bad:
        return "kml-ubench exited with 0 but reports failed tests: " + "; ".join(bad)
    want = boot.name == "on"
    if bool(doc.get("dynamic_kstacks_on")) != want:
        return (f"the kernel command line {'lacks' if want else 'has'} {PARAM} "
                f"(dynamic_kstacks={doc.get('dynamic_kstacks')!r}; cmdline: "
                f"{doc.get('cmdline')})")
    if not doc.get("tests") or not doc.get("idle_threads"):
        return "kml-ubench ran no tests or no idle-threads measurement"
    return None


def boot_result(boot, text, status):
    """(kml-ubench's JSON document, None) from a boot's output, or (None,
    why it failed)."""
    runs = bench.parse_output(text)
    if status != 0 or RUN not in runs:
        tail = "\n".join(text.strip().splitlines()[-5:])
        return None, (f"the guest script exited with {status}"
                      + (f"; its last output:\n{tail}" if tail else ""))
    why = run_status(boot, runs[RUN])
    return (None, why) if why else (runs[RUN].doc, None)


def _ratio(a, b):
    """b / a, or None."""
    a, b = _num(a), _num(b)
    return round(b / a, 4) if a and b is not None else None


def _saving(off, on):
    """How much less on needs than off, in percent, or None."""
    off, on = _num(off), _num(on)
    return round(100.0 * (off - on) / off, 2) if off and on is not None else None


def _spread(t):
    """(max - min) / median of one test's runs, or None."""
    lo, hi, med = (_num(t.get(k)) for k in ("ops_s_min", "ops_s_max", "ops_s_median"))
    return round((hi - lo) / med, 4) if med and lo is not None and hi is not None else None


def _memory(idle):
    """The memory figures of one boot's idle-threads measurement."""
    page_kib = _num(idle.get("page_kib")) or 4
    dyn = _num(idle.get("dynamic_stack_pages_delta"))
    return {"threads": idle.get("threads"),
            "kernel_stack_before_kib": (idle.get("before") or {}).get("kernel_stack_kib"),
            "kernel_stack_blocked_kib": (idle.get("blocked") or {}).get("kernel_stack_kib"),
            "kernel_stack_after_kib": (idle.get("after") or {}).get("kernel_stack_kib"),
            "kernel_stack_delta_kib": _num(idle.get("kernel_stack_delta_kib")),
            "kernel_stack_per_thread_kib": _num(idle.get("kernel_stack_per_thread_kib")),
            "kernel_stack_returned_kib": _num(idle.get("kernel_stack_returned_kib")),
            "dynamic_stack_counter": bool(idle.get("dynamic_stack_counter")),
            "dynamic_stack_pages_delta": dyn,
            "dynamic_stack_delta_kib": dyn * page_kib if dyn is not None else None}


def combine(docs, appends=None):
    """The combined result (a dict, saved as JSON; markdown() prints it)
    from {"off": kml-ubench JSON, "on": kml-ubench JSON}.  appends: each
    boot's command-line additions, for the record."""
    missing = [b.name for b in BOOTS if not docs.get(b.name)]
    if missing:
        raise KmlError(f"kstack-bench: no results from the {' and '.join(missing)} boot")
    off, on = docs["off"], docs["on"]
    boots = []
    for b in BOOTS:
        d = docs[b.name]
        boots.append({"name": b.name, "append": (appends or {}).get(b.name, b.append()),
                      "cmdline": d.get("cmdline"), "dynamic_kstacks": d.get("dynamic_kstacks"),
                      "kernel": d.get("kernel"), "accel": d.get("accel"),
                      "emulated": bool(d.get("emulated")), "exe": d.get("exe"),
                      "result": d})
    rows = []
    on_tests = {t.get("name"): t for t in on.get("tests", [])}
    for t in off.get("tests", []):
        u = on_tests.get(t.get("name"), {})
        per = {}
        for name, x in (("off", t), ("on", u)):
            per[name] = {k: _num(x.get(f"ops_s_{k}")) for k in ("median", "min", "max")}
            per[name]["spread"] = _spread(x)
        rows.append({"name": t.get("name"), "label": t.get("label"), "unit": t.get("unit"),
                     "off": per["off"], "on": per["on"],
                     "ratio": _ratio(per["off"]["median"], per["on"]["median"])})
    m_off, m_on = _memory(off["idle_threads"]), _memory(on["idle_threads"])
    memory = {"threads": off["idle_threads"].get("threads"),
              "stack_kib": off["idle_threads"].get("stack_kib"),
              "off": m_off, "on": m_on,
              "delta_ratio": _ratio(m_off["kernel_stack_delta_kib"],
                                    m_on["kernel_stack_delta_kib"]),
              "saving_pct": _saving(m_off["kernel_stack_delta_kib"],
                                    m_on["kernel_stack_delta_kib"])}
    emulated = any(b["emulated"] for b in boots)
    notes = []
    if not m_on["dynamic_stack_counter"]:
        notes.append("the on boot's /proc/vmstat has no nr_dynamic_stack_pages: this "
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


def _fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:.{digits}f}" if digits else bench.fmt_num(v)


def _kib(v, digits=0):
    return "absent" if v is None else f"{v:.{digits}f}"


def markdown(d):
    """The combined Markdown: header, one table of tests and memory rows."""
    emul = f" — {EMULATED_NOTE}" if d.get("emulated") else ""
    tag = f", {EMULATED}" if d.get("emulated") else ""
    out = [f"# kml kstack-bench: dynamic kernel stacks off vs on{emul}", ""]
    out += bench.system_lines(d)
    for b in d["boots"]:
        out.append(f"- {b['name']} boot: kernel command line `{b['cmdline']}`")
    mem = d["memory"]
    out.append(f"- method: kml-ubench, BYTE UnixBench-style system tests, each run for "
               f"{d.get('duration_ms')} ms, {d.get('runs')} times, median ops/s (spread: "
               "the larger (max - min) / median of the two boots); kernel stack memory: "
               f"/proc/meminfo KernelStack growth while {mem.get('threads')} threads with "
               f"{mem.get('stack_kib')} KiB pthread stacks block in read() on a pipe; "
               "one boot per column")
    out.append("")
    out.append(f"| Test | off{tag} | on{tag} | on/off | spread / saving |")
    out.append("|---|---:|---:|---:|---:|")
    for r in d["rows"]:
        spreads = [x for x in (r["off"]["spread"], r["on"]["spread"]) if x is not None]
        out.append(f"| {r['name']}: {r['label']} ({r['unit']}/s) | "
                   f"{_fmt(r['off']['median'])} | {_fmt(r['on']['median'])} | "
                   f"{_fmt(r['ratio'], 2) if r['ratio'] else '–'} | "
                   + (f"{100 * max(spreads):.1f}%" if spreads else "–") + " |")
    n = mem.get("threads")
    off, on = mem["off"], mem["on"]
    saving = mem.get("saving_pct")
    sav = f"saving {saving:.1f}%" if saving is not None else "–"
    out.append(f"| KernelStack growth, {n} idle threads (KiB) | "
               f"{_kib(off['kernel_stack_delta_kib'])} | {_kib(on['kernel_stack_delta_kib'])} | "
               f"{_fmt(mem.get('delta_ratio'), 2) if mem.get('delta_ratio') else '–'} | "
               f"{sav} |")
    out.append(f"| KernelStack per idle thread (KiB) | "
               f"{_kib(off['kernel_stack_per_thread_kib'], 2)} | "
               f"{_kib(on['kernel_stack_per_thread_kib'], 2)} | | |")
    out.append(f"| KernelStack returned after the join (KiB) | "
               f"{_kib(off['kernel_stack_returned_kib'])} | "
               f"{_kib(on['kernel_stack_returned_kib'])} | | |")
    out.append(f"| nr_dynamic_stack_pages growth, {n} idle threads (KiB) | "
               f"{_kib(off['dynamic_stack_delta_kib'])} | {_kib(on['dynamic_stack_delta_kib'])} "
               "| | |")
    out += ["", "on/off: the on boot's figure / the off boot's (ops/s above 1: faster "
            "with dynamic kernel stacks). Saving: (off - on) / off of the KernelStack "
            "growth. absent: the kernel does not report the counter.", ""]
    if d.get("notes"):
        out += ["Notes:", ""] + [f"{i}. {x}" for i, x in enumerate(d["notes"], 1)] + [""]
    return "\n".join(out).rstrip() + "\n"


def save(data, table):
    """Write the JSON and Markdown to build/bench/; the common path stem."""
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    stem = paths.BENCH_OUT / ("kstack-" + time.strftime("%Y%m%d-%H%M%S"))
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    stem.with_suffix(".md").write_text(table)
    return stem
