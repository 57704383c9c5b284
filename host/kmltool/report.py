"""Render combined results as Markdown and save them with their JSON.

The commands combine their runs into one dict (bench.combine,
kstackbench.combine); this module turns such a dict into the Markdown
that ./kml prints, and save() writes both to build/bench/.  Nothing here
boots or parses guest output.
"""
import json
import time

from . import paths
from .guestrun import Status

EMULATED_NOTE = ("EMULATED (QEMU TCG software emulation; not hardware timings; "
                 "compare ratios only)")
KSTACK_EMULATED = "emulated (TCG)"
KSTACK_EMULATED_NOTE = ("emulated (TCG): QEMU software emulation, not hardware timings; "
                        "compare ratios only")


def save(data, table, prefix=""):
    """Write data (JSON) and table (Markdown) to build/bench/PREFIXstamp.*;
    the common path stem."""
    paths.BENCH_OUT.mkdir(parents=True, exist_ok=True)
    stem = paths.BENCH_OUT / (prefix + time.strftime("%Y%m%d-%H%M%S"))
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    stem.with_suffix(".md").write_text(table)
    return stem


# ---- common pieces ---------------------------------------------------

def fmt_num(v):
    """About 3-4 significant digits, like kml-bench."""
    if v < 1:
        return f"{v:.3f}"
    if v < 10:
        return f"{v:.2f}"
    if v < 100:
        return f"{v:.1f}"
    return f"{v:.0f}"


def cell(c, key, notes=None, where="", div=1):
    """A table cell: the number, or why there is none (a numbered note
    with the reason when notes is a list)."""
    st = c.get("status")
    if st == Status.OK and c.get(key) is not None:
        return fmt_num(c[key] / div)
    if st == Status.NOT_RUN:
        return "n/a"
    if st in (Status.UNAVAILABLE, Status.ERROR):
        return "–"          # the whole run: see the list of runs
    word = {Status.SKIPPED: "skipped", Status.FAILED: "FAILED"}.get(st, str(st))
    if notes is not None and c.get("reason"):
        notes.append(f"{where}: {word}: {c['reason']}")
        return f"{word} [{len(notes)}]"
    return word


def system_lines(d):
    """The Markdown list items that describe the machine of a result d
    (accel, cpu, online cpus, kernel)."""
    return [f"- accel: {d.get('accel')}"
            + (" (QEMU TCG software emulation)" if d.get("emulated") else ""),
            f"- cpu: {d.get('cpu')}",
            f"- online cpus: {d.get('ncpus')}",
            f"- kernel: {d.get('kernel')}"]


def run_line(r):
    """A list item for one run: name, title, command, and its status
    unless ok."""
    line = f"  - {r['name']}: {r['title']}, `{r['program']} {' '.join(r['args'])}`"
    res = r.get("result")
    if res and res.get("tsc_ghz"):
        line += f"; tsc {res['tsc_ghz']:.3f} GHz"
    if r["status"] != Status.OK:
        line += f" — **{r['status']}**: {r['reason']}"
    return line


def notes_lines(notes):
    return ["Notes:", ""] + [f"{i}. {n}" for i, n in enumerate(notes, 1)] + [""] \
        if notes else []


def _speedup(s):
    return f" {s:.2f} |" if s else " – |"


# ---- ./kml bench -----------------------------------------------------

def bench_markdown(d):
    """./kml bench: header, mode list, latency table, seed layouts, file I/O."""
    emul = f" — {EMULATED_NOTE}" if d.get("emulated") else ""
    what = "system call latency in three modes" + (", file I/O" if d.get("io") else "")
    out = [f"# kml-bench: {what}{emul}", ""]
    out += system_lines(d)
    out.append(f"- cmdline: {d.get('cmdline')}")
    out.append(f"- method: {d.get('runs')} runs of about {d.get('run_ms')} ms per row and "
               "mode; median of the runs' mean time per operation; one boot")
    out.append("- modes:")
    out += [run_line(m) for m in d["modes"]]
    out.append("")

    names = [m["name"] for m in d["modes"]]
    pairs = [tuple(k.split("/")) for k in d["speedups"]]
    notes = []
    out += [f"## Results{emul}", ""]
    out.append("| Benchmark |" + "".join(f" {n} ns | {n} cycles |" for n in names)
               + "".join(f" {a}/{b} |" for a, b in pairs))
    out.append("|---|" + "---:|" * (2 * len(names) + len(pairs)))
    for r in d["rows"]:
        label = r["label"].replace("|", "\\|")
        if r["unit"] != "op":
            label += f" (per {r['unit']})"
        line = f"| {label} |"
        for n in names:
            c = r["modes"][n]
            line += f" {cell(c, 'ns_median', notes, n + ', ' + r['name'])} |"
            cyc = cell(c, "cycles_median")
            line += f" {cyc if c.get('status') == Status.OK else ''} |"
        line += "".join(_speedup(r["speedup"].get(f"{a}/{b}")) for a, b in pairs)
        out.append(line)
    out += ["", "Speed-up: user ns / kernel-mode ns (above 1: kernel mode is faster).", ""]
    out += notes_lines(notes)

    by_name = {r["name"]: r for r in d["rows"]}
    for lay in d.get("layouts", []):
        rows = [(t, by_name.get(n)) for t, n in lay.get("rows", [])]
        if not any(r for _, r in rows):
            continue
        unit, div = lay.get("unit", "ns"), lay.get("ns_per_unit", 1) or 1
        out += [f"## {lay.get('title')} ({unit}){emul}", ""]
        out.append("| Operation |" + "".join(f" {n} ({unit}) |" for n in names)
                   + "".join(f" {a}/{b} |" for a, b in pairs))
        out.append("|---|" + "---:|" * (len(names) + len(pairs)))
        for title, r in rows:
            line = f"| {title} |"
            for n in names:
                line += f" {cell(r['modes'][n], 'ns_median', div=div) if r else 'n/a'} |"
            line += "".join(_speedup(r["speedup"].get(f"{a}/{b}") if r else None)
                            for a, b in pairs)
            out.append(line)
        out.append("")
    if d.get("io"):
        out += io_markdown(d["io"], d.get("emulated"))
    return "\n".join(out).rstrip() + "\n"


def io_markdown(io, emulated):
    """The file I/O section of ./kml bench's Markdown."""
    emul = f" — {EMULATED_NOTE}" if emulated else ""
    out = [f"## File I/O throughput (kml-iobench): ordinary vs kernel-mode process{emul}", ""]
    if io.get("runs"):
        out.append(f"- method: IOzone-style, one file per size: write (a new file), "
                   f"re-write, read, re-read; {io.get('record_kib')} KiB records; loops of "
                   f"about {io.get('run_ms')} ms, best of {io.get('runs')} runs (highest "
                   "throughput); all data read back and checked after every loop")
        out.append(f"- timed: {io.get('timed')}")
    by_fs = {}
    for p in io["modes"]:
        by_fs.setdefault(p["fs"], []).append(p)
    for fs in io["filesystems"]:
        where = f"`{fs['dir']}`"
        mount = next((p["result"].get("mount") for p in by_fs.get(fs["name"], [])
                      if p["result"] and p["result"].get("mount")), None)
        if fs["name"] == io["disk"]["fs"]:
            where += (f", a {io['disk']['mib']} MiB image made on the host with "
                      f"`{io['disk']['mkfs']}`, {io['disk']['device']}")
        if mount:
            where += f", mounted {mount.get('source')} on {mount.get('point')} " \
                     f"({mount.get('options')})"
        out.append(f"- {fs['name']}: {where}")
    out.append("- runs:")
    out += [run_line(p) for p in io["modes"]]
    out += ["", "| File system | File size (KiB) | Operation | user KiB/s | kernel KiB/s "
            "| kernel/user |", "|---|---:|---|---:|---:|---:|"]
    notes = []
    for r in io["rows"]:
        line = f"| {r['fs']} | {r['size_kib']} | {r['op']} |"
        for m in ("user", "kernel"):
            c = r["modes"].get(m, {"status": Status.NOT_RUN})
            if c.get("status") == Status.OK and c.get("kib_s_best") is not None:
                line += f" {c['kib_s_best']:.0f} |"
            elif c.get("status") == Status.FAILED:
                # one note per reason and size: "not measured" repeats
                text = f"{m}, {r['fs']} {r['size_kib']} KiB: {c.get('reason')}"
                if text not in notes:
                    notes.append(text)
                line += f" FAILED [{notes.index(text) + 1}] |"
            else:
                line += f" {cell(c, 'kib_s_best')} |"
        out.append(line + _speedup(r["ratio"]))
    out += ["", "kernel/user: the kernel-mode process's throughput / the ordinary "
            "process's (above 1: kernel mode is faster).", ""]
    out += notes_lines(notes)
    return out


# ---- ./kml kstack-bench ----------------------------------------------

def _fmt(v, digits=0):
    if v is None:
        return "–"
    return f"{v:.{digits}f}" if digits else fmt_num(v)


def _kib(v, digits=0):
    return "absent" if v is None else f"{v:.{digits}f}"


def kstack_markdown(d):
    """./kml kstack-bench: header, one table of tests and memory rows."""
    emul = f" — {KSTACK_EMULATED_NOTE}" if d.get("emulated") else ""
    tag = f", {KSTACK_EMULATED}" if d.get("emulated") else ""
    out = [f"# kml kstack-bench: dynamic kernel stacks off vs on vs reclaim{emul}", ""]
    out += system_lines(d)
    for b in d["boots"]:
        out.append(f"- {b['name']} boot: kernel command line `{b['cmdline']}`")
    mem = d["memory"]
    out.append(f"- method: kml-ubench, BYTE UnixBench-style system tests, each run for "
               f"{d.get('duration_ms')} ms, {d.get('runs')} times, median ops/s (spread: "
               "the largest (max - min) / median of the boots); kernel stack memory: "
               f"/proc/meminfo KernelStack growth while {mem.get('threads')} threads with "
               f"{mem.get('stack_kib')} KiB pthread stacks block in read() on a pipe "
               "(reclaim: once KernelStack has stopped falling); one boot per column")
    out.append("")
    out.append(f"| Test | off{tag} | on{tag} | reclaim{tag} | on/off | reclaim/off "
               "| spread / saving |")
    out.append("|---|---:|---:|---:|---:|---:|---:|")
    for r in d["rows"]:
        rec = r.get("reclaim") or {}
        spreads = [x for x in (r["off"]["spread"], r["on"]["spread"], rec.get("spread"))
                   if x is not None]
        out.append(f"| {r['name']}: {r['label']} ({r['unit']}/s) | "
                   f"{_fmt(r['off']['median'])} | {_fmt(r['on']['median'])} | "
                   f"{_fmt(rec.get('median'))} | "
                   f"{_fmt(r['ratio'], 2) if r['ratio'] else '–'} | "
                   f"{_fmt(r.get('ratio_reclaim'), 2) if r.get('ratio_reclaim') else '–'} | "
                   + (f"{100 * max(spreads):.1f}%" if spreads else "–") + " |")
    n = mem.get("threads")
    off, on, rec = mem["off"], mem["on"], mem.get("reclaim") or {}
    has_rec = any(b["name"] == "reclaim" for b in d["boots"])

    def sav(key):
        v = mem.get(key)
        return f"{v:.1f}%" if v is not None else "–"

    def ratio(key):
        return _fmt(mem.get(key), 2) if mem.get(key) else "–"

    def rk(v, digits=0):
        """A reclaim cell: – when that boot did not run."""
        return _kib(v, digits) if has_rec else "–"

    out.append(f"| KernelStack growth, {n} idle threads (KiB) | "
               f"{_kib(off['kernel_stack_delta_kib'])} | {_kib(on['kernel_stack_delta_kib'])} | "
               f"{rk(rec.get('kernel_stack_delta_kib'))} | {ratio('delta_ratio')} | "
               f"{ratio('delta_ratio_reclaim')} | saving {sav('saving_pct')} / "
               f"{sav('saving_reclaim_pct')} |")
    out.append(f"| KernelStack per idle thread (KiB) | "
               f"{_kib(off['kernel_stack_per_thread_kib'], 2)} | "
               f"{_kib(on['kernel_stack_per_thread_kib'], 2)} | "
               f"{rk(rec.get('kernel_stack_per_thread_kib'), 2)} | | | |")
    out.append(f"| KernelStack returned after the join (KiB) | "
               f"{_kib(off['kernel_stack_returned_kib'])} | "
               f"{_kib(on['kernel_stack_returned_kib'])} | "
               f"{rk(rec.get('kernel_stack_returned_kib'))} | | | |")
    out.append(f"| dynamic_kstack_pages growth, {n} idle threads (KiB) | "
               f"{_kib(off['dynamic_stack_delta_kib'])} | {_kib(on['dynamic_stack_delta_kib'])} "
               f"| {rk(rec.get('dynamic_stack_delta_kib'))} | | | |")
    def ms(v):
        return "–" if v is None else f"{v:.0f}"

    out.append(f"| waking and joining the {n} idle threads (ms) | "
               f"{ms(off.get('release_ms'))} | {ms(on.get('release_ms'))} | "
               f"{ms(rec.get('release_ms'))} | | | |")

    def wk(m, kind):
        """median / max of one boot's wake-ups of a kind, in µs, or –."""
        w = ((m or {}).get("wake") or {}).get(kind) or {}
        if w.get("median_ns") is None or w.get("max_ns") is None:
            return "–"
        return f"{w['median_ns'] / 1e3:.0f} / {w['max_ns'] / 1e3:.0f}"

    wake = (off.get("wake") or {})
    trials = f"{wake['trials']:.0f} wake-ups" if wake.get("trials") else "wake-ups"
    for kind, text in (("warm", "a sleeper that just ran"),
                       ("reclaimed", "a sleeper whose stack pages were reclaimed (refill "
                                     "from the per-CPU pool)"),
                       ("deferred", "such a sleeper when the pools are empty (refill left to "
                                    "kstackd)")):
        out.append(f"| wake-up of {text}, median / max of {trials} (µs) | "
                   f"{wk(off, kind)} | {wk(on, kind)} | {wk(rec, kind)} | | | |")
    out += ["", "on/off, reclaim/off: that boot's figure / the off boot's (ops/s above 1: "
            "faster than with whole stacks). Saving: (off - x) / off of the KernelStack "
            "growth, for on / reclaim. absent: the kernel does not report the counter; "
            "–: no figure (the reclaim boot did not run, a test failed, or the kind "
            "exists only with dynamic_kstacks=reclaim). A wake-up: from writing to the "
            "pipe the sleeper (12 KiB of kernel stack used) blocks on to reading its "
            "answer.", ""]
    out += notes_lines(d.get("notes"))
    return "\n".join(out).rstrip() + "\n"


# ---- ./kml pathlen ---------------------------------------------------

PATHLEN_VULNS = ("meltdown", "spectre_v2", "retbleed", "spec_rstack_overflow", "mds",
                 "mmio_stale_data", "tsa")


def _times(items):
    return [f"{k} ×{n}" if n > 1 else k for k, n in items]


def costly_text(c):
    """The costly instructions and mitigation thunks of a cell, counted."""
    if c.get("status") != Status.OK:
        return ""
    parts = _times(c.get("costly_counts", {}).items()) + _times(c.get("thunks", {}).items())
    return ", ".join(parts) or "none"


def _count(c, key="instructions"):
    """A count cell: the number, min–max when the samples differ, or why not
    ("–" without a cell: that pti value was not booted, --pti)."""
    if not c:
        return "–"
    if c.get("status") != Status.OK:
        return cell(c, key)
    if key == "instructions" and c["min"] != c["max"]:
        return f"{c['min']}–{c['max']}"
    return str(c[key])


def _total(c):
    """A total-count cell, marked when it does not compare with the
    ordinary process's."""
    return _count(c) + (" *not comparable*" if c.get("not_comparable") else "")


def _pair(r, key):
    return " / ".join(_count(r["cells"].get(p, {"status": Status.NOT_RUN}), key)
                      for p in ("off", "on"))


# What a CPU model under TCG cannot show (docs/pathlen.md)
TCG_CANNOT = ("under TCG the model has no spec-ctrl (SPEC_CTRL/PRED_CMD MSRs): the kernel "
              "cannot use IBRS, IBPB or STIBP, so no `WRMSR 0x48`/`0x49` appears; no PMU, "
              "no microcode (VERW runs but clears nothing: MD_CLEAR is not there), and the "
              "bug bits are the kernel's guess from the model's CPUID and the "
              "ARCH_CAPABILITIES QEMU offers")


def pathlen_header(d):
    out = ["# kml pathlen: instructions per system call, counted through QEMU's gdb stub",
           ""]
    out += system_lines(d)
    m = d.get("cpu_model")
    if m:
        fam = (d.get("estimates") or {}).get("title")
        out.append(f"- CPU model: `-cpu {m['name']}`"
                   + (f" (cost family: {fam})" if fam else " (no cost family: no cycle "
                      "estimates)")
                   + ("; QEMU: TCG does not support " + ", ".join(m["tcg_missing"])
                      if m.get("tcg_missing") else "; QEMU reported no missing feature"))
    for b in d["boots"]:
        v = b["vulnerabilities"]
        out.append(f"- pti={b['pti']} boot: `{b['cmdline']}`; "
                   + "; ".join(f"{k}: {v[k]}" for k in PATHLEN_VULNS if k in v))
        if b.get("cpu_bugs") is not None or b.get("cpu_model_name"):
            out.append(f"  - /proc/cpuinfo: model name `{b.get('cpu_model_name')}`; "
                       f"bugs `{b.get('cpu_bugs') or ''}`")
    out.append(f"- method: single steps of the measuring process's vCPU alone, interrupts "
               f"and timers masked (QEMU sstep flags {', '.join(map(str, d['sstep']))}); "
               f"from the `syscall` (or the `call` of `__vdso_kml_syscall`) to the "
               f"instruction after it; {d['skip']} hit(s) of each dropped, then "
               f"{d['samples']} counted; a REP string instruction counts once")
    if d.get("long_ops"):
        out.append(f"- long rows ({', '.join(d['long_ops'])}): no hit dropped first, "
                   f"{d.get('long_samples')} counted")
    if d.get("seconds") is not None:
        out.append(f"- time: {d['seconds']} s in all; counting per run (s): "
                   + ", ".join(f"{r['name']} {r['seconds']}" for r in d["runs"]
                               if r.get("seconds") is not None))
    out.append("- runs:")
    out += [run_line(r) for r in d["runs"]]
    return out + [""]


def _est(c):
    e = c.get("estimate") if c.get("status") == Status.OK else None
    return f"~{e['cycles']}" if e else "–"


def pathlen_estimates(d):
    """The cycle estimates' basis: the costs used, their sources, what is
    left out."""
    e = d.get("estimates")
    if not e:
        return []
    out = [f"## Cycle estimates for {e['title']} (ESTIMATES, not measurements)", "",
           f"est. cycles = (instructions − priced costly ones) × CPI {e['cpi']} + the "
           "published costs of the priced ones (a REP instruction counts once; its extra "
           "iterations add nothing). Costly kinds without a published figure add nothing "
           "beyond CPI: " + ", ".join(sorted({k for r in d["rows"]
                                                for c in r["cells"].values()
                                                for k in (c.get("estimate") or {})
                                                .get("unpriced", {})})) + ".", "",
           "| costly kind | cycles (estimate) | source | how |", "|---|---:|---|---|"]
    out += [f"| {x['kind']} | {x['cycles']} | {x['source']} | {x['how']} |"
            for x in e["costs"]]
    out += ["", "Sources:", ""] + [f"- [{k}] {v}" for k, v in e["sources"].items()]
    out += ["", f"What this model under TCG cannot show: {TCG_CANNOT}.", ""]
    return out


def pathlen_markdown(d):
    """./kml pathlen: header, the table, the costly instructions in order,
    notes on counts that differ between samples."""
    out = pathlen_header(d)
    est = bool(d.get("estimates"))
    out += ["| System call | Mode | outside (off / on) | inside (off / on) | total, pti=off "
            "| total, pti=on " + ("| est. cycles (off / on) " if est else "")
            + "| costly, pti=off | costly, pti=on |",
            "|---|---|---:|---:|---:|---:|" + ("---:|" if est else "") + "---|---|"]
    for r in d["rows"]:
        c = r["cells"]
        cyc = (f"{_est(c.get('off', {}))} / {_est(c.get('on', {}))} | " if est else "")
        out.append(f"| {r['op']} | {r['mode']} | {_pair(r, 'outside')} | "
                   f"{_pair(r, 'inside')} | {_total(c.get('off', {}))} | "
                   f"{_total(c.get('on', {}))} | {cyc}{costly_text(c.get('off', {}))} | "
                   f"{costly_text(c.get('on', {}))} |")
    out += ["", "Instructions executed from the entering instruction to the one after it "
            "(both user and kernel); outside: entry, exit and the vDSO, what kml changes, "
            "the figure to compare modes by; inside: in the system call's own function "
            "(`__x64_sys_NAME`; for kernel-kfunc the function behind the handle) and "
            "what it calls. Inside and outside are the shortest sample's; a total range is "
            "min–max over the samples (see the notes). A total marked *not comparable* "
            "belongs to a cell whose inside count is more than "
            f"{round(d.get('inside_tolerance', 0.05) * 100)} % from the ordinary process's (the "
            "notes say why)."
            + (" est. cycles: an ESTIMATE from the shortest sample (next section)." if est
               else ""), ""]
    out += pathlen_estimates(d)
    out += pathlen_details(d)
    return "\n".join(out).rstrip() + "\n"


def pathlen_details(d):
    """The costly instructions of each path in the order met, and notes."""
    out, notes = ["## Costly instructions in the order met", ""], []
    for r in d["rows"]:
        for pti, c in r["cells"].items():
            where = f"{r['op']}, {r['mode']}, pti={pti}"
            if c.get("status") != Status.OK:
                continue
            items = [f"{x['kind']} `{x['insn']}` at {x['at']}" for x in c["costly"]]
            out.append(f"- {where}: " + ("; ".join(items) or "none"))
            if c.get("not_comparable"):
                notes.append(f"{where}: not comparable: {c['not_comparable']}")
            if c.get("differs"):
                x = c["differs"]
                notes.append(f"{where}: {c['samples']} instructions in the samples; the "
                             f"longest parts from the shortest at instruction {x['step']} "
                             f"({x['b']} instead of {x['a']})")
    return out + [""] + notes_lines(notes)


# ---- ./kml bench --apps ----------------------------------------------

def _app_cell(m):
    """A median, or why there is none."""
    if m.get("status") == Status.OK and m.get("median") is not None:
        return fmt_num(m["median"])
    return {Status.FAILED: "FAILED", Status.UNAVAILABLE: "unavailable"}.get(
        m.get("status"), "–")


def apps_markdown(d):
    """./kml bench --apps: one table of every configuration, the runs'
    problems, the seed's find and iperf layouts."""
    emul = f" — {EMULATED_NOTE}" if d.get("emulated") else ""
    out = [f"# Applications: ordinary process vs kernel mode{emul}", ""]
    out.append(f"- accel: {d.get('accel')}"
               + (" (QEMU TCG software emulation)" if d.get("emulated") else ""))
    for c in d["configs"]:
        s = c.get("system") or {}
        out.append(f"- {c['name']}: kernel {s.get('kernel')}, {s.get('ncpus')} CPUs "
                   f"({s.get('cpu')}), command line `{s.get('cmdline')}`")
    out.append(f"- method: one boot per configuration; {d['rounds']} round(s), in each "
               f"{d['pairs'] // d['rounds']} set(s) of runs per application (one run per "
               "mode, back to back, which first rotating); the server in the mode "
               "named (checked: KernelMode in /proc/PID/status), its client an ordinary "
               "process, except in the appliance column (kml=all: server and client at "
               "CPL 0; the ordinary server and the other clients keep user mode with "
               f"no_new_privs); medians of the {d['pairs']} runs per mode")
    out.append("")
    out += ["| Application | Measure | Configuration | ordinary | kernel mode (/trusted) "
            "| appliance | speed-up /trusted | pairs: median (range) | speed-up appliance "
            "| pairs: median (range) |",
            "|---|---|---|---:|---:|---:|---:|---|---:|---|"]
    problems = []

    def spread(pairs, median):
        ok = [x for x in pairs if x]
        return f"{median:.2f} ({min(ok):.2f}–{max(ok):.2f})" if ok else "–"
    for c in d["configs"]:
        modes = c.get("modes", ["user", "kernel"])
        for r in c["apps"]:
            has_all = "all" in modes
            cells = [r["name"], f"{r['metric']} ({r['unit']})", c["name"],
                     _app_cell(r["user"]), _app_cell(r["kernel"]),
                     _app_cell(r["all"]) if has_all else "–",
                     _speedup(r["speedup"]).strip(" |"),
                     spread(r["pair_speedups"], r["pair_median"]),
                     _speedup(r.get("speedup_all")).strip(" |") if has_all else "–",
                     spread(r["pair_speedups_all"], r["pair_median_all"])
                     if has_all else "–"]
            out.append("| " + " | ".join(cells) + " |")
            for m in modes:
                if r[m]["status"] != Status.OK:
                    problems.append(f"- {c['name']} {r['name']} {m}: **{r[m]['status']}**: "
                                    f"{r[m]['reason']}")
    out += ["", "Speed-up: kernel mode (or appliance) / ordinary for throughput, ordinary / "
            "kernel mode for time, of the medians (above 1: kernel mode is faster); "
            "pairs: the same for each set of runs, their median and range.", ""]
    if problems:
        out += ["Runs without a result:", ""] + problems + [""]
    for app, title, unit, div in (("find", "Table 6.2: find application benchmark", "ms", 1),
                                  ("iperf3", "Table 6.3: iperf application benchmark",
                                   "Gbits/s", 1000)):
        rows = [(c["name"], r) for c in d["configs"] for r in c["apps"]
                if r["name"] == app and r["user"]["median"] and r["kernel"]["median"]]
        if not rows:
            continue
        out += [f"## Seed 001 layout, {title}{emul}", ""]
        native = "Time" if unit == "ms" else "Native"
        out += [f"| Benchmark | {native} ({unit}) | Modified ({unit}) | Difference ({unit}) "
                "| % Benefit |", "|---|---:|---:|---:|---:|"]
        for name, r in rows:
            u, k = r["user"]["median"] / div, r["kernel"]["median"] / div
            diff = u - k if unit == "ms" else k - u
            label = "find" if app == "find" else "TCP Throughput"
            out.append(f"| {label}, {name} | {fmt_num(u)} | {fmt_num(k)} | {diff:.3g} | "
                       f"{diff / u * 100:+.1f} |")
        out += ["", "Native: an ordinary process; Modified: kernel mode; % Benefit: the "
                "difference in % of Native, as the seed computes it.", ""]
    return "\n".join(out).rstrip() + "\n"
