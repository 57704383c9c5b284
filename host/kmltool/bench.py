"""./kml bench: kml-bench in three modes in one boot, combined.

The modes:

  user            an ordinary process: /usr/bin/kml-bench (CPL 3)
  kernel-syscall  a copy in /trusted, in kernel mode (CPL 0); system calls
                  with the `syscall` instruction (the C library)
  kernel-call     the same copy with --path call: system calls through
                  libkml's call path (__vdso_kml_syscall)

The guest runs the three one after the other (progress on the console
stream), then prints each mode's exit status, JSON and error lines between
markers.  The host checks that each mode ran where it should (CPL), and
prints and saves one combined table: ns and cycles per mode, the speed-ups
user/kernel-syscall and user/kernel-call, and the seed layouts (KML paper
Table 2, usermode-kernel thesis Table 6.1) with the three modes.

A mode that cannot run here (kml-bench exit status 3: the /trusted copy
runs in user mode because of kml=off, or the kernel has no
__vdso_kml_syscall) is reported as unavailable, with the reason.
"""
import json
import subprocess
import sys
from dataclasses import dataclass, field

from .paths import KmlError

MARK = "===KML-BENCH==="
SCHEMA = "kml-bench-modes/1"
EXIT_UNAVAILABLE = 3        # kml-bench: the mode asked for is not available
EMULATED_NOTE = ("EMULATED (QEMU TCG software emulation; not hardware timings; "
                 "compare ratios only)")


@dataclass(frozen=True)
class Mode:
    name: str
    title: str
    program: str
    args: tuple
    cpl: int


MODES = (
    Mode("user", "ordinary process", "/usr/bin/kml-bench",
         ("--expect-mode", "user", "--path", "syscall"), 3),
    Mode("kernel-syscall", "kernel mode (/trusted copy), syscall instruction",
         "/trusted/kml-bench", ("--expect-mode", "kernel", "--path", "syscall"), 0),
    Mode("kernel-call", "kernel mode (/trusted copy), call path (__vdso_kml_syscall)",
         "/trusted/kml-bench", ("--expect-mode", "kernel", "--path", "call"), 0),
)
SPEEDUPS = (("user", "kernel-syscall"), ("user", "kernel-call"))


def _q(s):
    """Single-quote s for sh."""
    return "'" + s.replace("'", "'\\''") + "'"


def guest_script(user_prog="/usr/bin/kml-bench", trusted="/trusted", tmp="/tmp"):
    """The guest shell script; the common kml-bench options come as "$@".
    (The paths are parameters only so that tests can run it elsewhere.)"""
    copy = f"{trusted}/kml-bench"
    progs = {"/usr/bin/kml-bench": user_prog, "/trusted/kml-bench": copy}
    lines = [
        f"cp {_q(user_prog)} {_q(copy)} && chmod 755 {_q(copy)} || "
        f"{{ echo 'kml bench: cannot copy kml-bench into {trusted}' >&2; exit 125; }}",
        # mode NAME PROGRAM ARGS...: progress (stderr) streams and is kept
        'mode() { name=$1; shift; echo "== kml-bench, mode $name: $*"; '
        f'{{ "$@" -v --label "$name" --json "{tmp}/kb-$name.json" 2>&1 >/dev/null; '
        f'echo $? >"{tmp}/kb-$name.rc"; }} | tee "{tmp}/kb-$name.err"; }}',
    ]
    for m in MODES:
        lines.append(f"mode {m.name} {_q(progs[m.program])} "
                     f"{' '.join(map(_q, m.args))} \"$@\"")
    for m in MODES:
        n = m.name
        lines += [
            f'echo "{MARK} begin {n} $(cat {tmp}/kb-{n}.rc)"',
            f'echo "{MARK} json {n}"; cat {tmp}/kb-{n}.json 2>/dev/null; echo',
            f'echo "{MARK} stderr {n}"; tail -n 5 {tmp}/kb-{n}.err',
            f'echo "{MARK} end {n}"',
        ]
    lines.append("exit 0")
    return "\n".join(lines) + "\n"


class StreamUntil:
    """A qemu.boot() stream callback: passes output through until the
    first marker (the JSON sections after it are for the host only)."""

    def __init__(self, out=None, mark=MARK):
        self.out = out or sys.stdout.buffer
        self.mark = mark.encode()
        self.buf = b""
        self.done = False

    def __call__(self, data):
        if self.done:
            return
        self.buf += data
        i = self.buf.find(self.mark)
        if i >= 0:
            self._write(self.buf[:i])
            self.done = True
            self.buf = b""
            return
        keep = len(self.mark) - 1       # a marker may be split across reads
        if len(self.buf) > keep:
            self._write(self.buf[:-keep])
            self.buf = self.buf[-keep:]

    def _write(self, data):
        if data:
            self.out.write(data)
            self.out.flush()


@dataclass
class ModeRun:
    name: str
    exit: int = None
    doc: dict = None
    stderr: str = ""
    json_error: str = ""
    lines: list = field(default_factory=list)


def parse_output(text):
    """{mode name: ModeRun} from the guest output."""
    runs, cur, part = {}, None, None
    for line in text.splitlines():
        line = line.rstrip("\r")
        if line.startswith(MARK):
            words = line[len(MARK):].split()
            if len(words) >= 2 and words[0] == "begin":
                cur = runs[words[1]] = ModeRun(words[1])
                try:
                    cur.exit = int(words[2]) if len(words) > 2 else None
                except ValueError:
                    cur.exit = None
                part = None
            elif len(words) == 2 and cur and words[1] == cur.name and words[0] == "end":
                _finish(cur)
                cur = part = None
            elif len(words) == 2 and cur and words[1] == cur.name:
                part = words[0]
                if part == "json":
                    cur.lines = []
            continue
        if cur is None:
            continue
        if part == "json":
            cur.lines.append(line)
        elif part == "stderr":
            cur.stderr += line + "\n"
    if cur is not None:
        _finish(cur)
    return runs


def _finish(run):
    text = "\n".join(run.lines).strip()
    run.lines = []
    if text:
        try:
            run.doc = json.loads(text)
        except ValueError as e:
            run.json_error = str(e)


def _last_line(s):
    lines = [line.strip() for line in s.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def mode_status(mode, run):
    """("ok"|"rows failed"|"unavailable"|"error", reason) for one mode."""
    if run is None:
        return "error", "no output from this mode (the guest script stopped early)"
    if run.exit == EXIT_UNAVAILABLE:
        return "unavailable", _last_line(run.stderr) or "kml-bench exit status 3"
    if run.exit not in (0, 1):
        return "error", (f"kml-bench exited with {run.exit}"
                         + (f": {_last_line(run.stderr)}" if run.stderr.strip() else ""))
    if run.doc is None:
        why = f"invalid JSON ({run.json_error})" if run.json_error else "no JSON"
        return "error", f"kml-bench exited with {run.exit} but wrote {why}"
    doc = run.doc
    if doc.get("cpl") != mode.cpl:
        return "error", (f"ran at CPL {doc.get('cpl')}, expected CPL {mode.cpl} "
                         "(did --expect-mode not work?)")
    want_path = "call" if "call" in mode.args else "syscall"
    if doc.get("path") != want_path:
        return "error", f"measured path {doc.get('path')!r}, expected {want_path!r}"
    if want_path == "call" and doc.get("call_path") is not True:
        return "error", "--path call without the call path"
    if run.exit == 1:
        return "rows failed", "some rows failed (see the table)"
    return "ok", None


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def combine(runs):
    """The combined result: a dict (saved as JSON; markdown() prints it)."""
    modes = []
    for m in MODES:
        run = runs.get(m.name)
        status, reason = mode_status(m, run)
        modes.append({"name": m.name, "title": m.title, "program": m.program,
                      "args": list(m.args), "cpl": m.cpl,
                      "exit_status": run.exit if run else None,
                      "status": status, "reason": reason,
                      "result": run.doc if run and status in ("ok", "rows failed") else None})
    base = next((x["result"] for x in modes if x["result"]), None)
    if base is None:
        why = "; ".join(f"{x['name']}: {x['status']}: {x['reason']}" for x in modes)
        raise KmlError(f"bench: no mode produced results ({why})")
    # rows in the order of the first result, then any others
    order, info = [], {}
    for x in modes:
        for r in (x["result"] or {}).get("rows", []):
            if r.get("name") not in info:
                order.append(r["name"])
                info[r["name"]] = (r.get("label", r["name"]), r.get("unit", "op"))
    rows = []
    for name in order:
        label, unit = info[name]
        per = {}
        for x in modes:
            r = next((r for r in (x["result"] or {}).get("rows", []) if r.get("name") == name),
                     None)
            if x["result"] is None:
                per[x["name"]] = {"status": x["status"], "reason": x["reason"]}
            elif r is None:
                per[x["name"]] = {"status": "not run", "reason": None}
            else:
                per[x["name"]] = {"status": r.get("status"), "reason": r.get("reason"),
                                  "path": r.get("path"),
                                  "ns_median": _num(r.get("ns_median")),
                                  "cycles_median": _num(r.get("cycles_median"))}
        speed = {}
        for a, b in SPEEDUPS:
            na, nb = per[a].get("ns_median"), per[b].get("ns_median")
            ok = per[a]["status"] == "ok" and per[b]["status"] == "ok" and na and nb
            speed[f"{a}/{b}"] = round(na / nb, 4) if ok else None
        rows.append({"name": name, "label": label, "unit": unit, "modes": per,
                     "speedup": speed})
    return {"schema": SCHEMA, "emulated": bool(base.get("emulated")),
            "accel": base.get("accel"), "cpu": base.get("cpu"), "ncpus": base.get("ncpus"),
            "kernel": base.get("kernel"), "cmdline": base.get("cmdline"),
            "runs": base.get("runs"), "run_ms": base.get("run_ms"),
            "layouts": base.get("layouts", []), "modes": modes, "rows": rows}


def fmt_num(v):
    """About 3-4 significant digits, like kml-bench."""
    if v < 1:
        return f"{v:.3f}"
    if v < 10:
        return f"{v:.2f}"
    if v < 100:
        return f"{v:.1f}"
    return f"{v:.0f}"


def _cell(c, key, notes=None, where="", div=1):
    """A table cell: the number, or why there is none (a numbered note
    with the reason when notes is a list)."""
    st = c.get("status")
    if st == "ok" and c.get(key) is not None:
        return fmt_num(c[key] / div)
    if st == "not run":
        return "n/a"
    if st in ("unavailable", "error"):
        return "–"          # the whole mode: see the list of modes
    word = {"skipped": "skipped", "failed": "FAILED"}.get(st, str(st))
    if notes is not None and c.get("reason"):
        notes.append(f"{where}: {word}: {c['reason']}")
        return f"{word} [{len(notes)}]"
    return word


def _emul(d):
    return f" — {EMULATED_NOTE}" if d.get("emulated") else ""


def markdown(d):
    """The combined Markdown: header, mode list, main table, seed layouts."""
    out = [f"# kml-bench: system call latency in three modes{_emul(d)}", ""]
    out.append(f"- accel: {d.get('accel')}"
               + (" (QEMU TCG software emulation)" if d.get("emulated") else ""))
    out.append(f"- cpu: {d.get('cpu')}")
    out.append(f"- online cpus: {d.get('ncpus')}")
    out.append(f"- kernel: {d.get('kernel')}")
    out.append(f"- cmdline: {d.get('cmdline')}")
    out.append(f"- method: {d.get('runs')} runs of about {d.get('run_ms')} ms per row and "
               "mode; median of the runs' mean time per operation; one boot")
    out.append("- modes:")
    for m in d["modes"]:
        line = f"  - {m['name']}: {m['title']}, `{m['program']} {' '.join(m['args'])}`"
        res = m.get("result")
        if res and res.get("tsc_ghz"):
            line += f"; tsc {res['tsc_ghz']:.3f} GHz"
        if m["status"] != "ok":
            line += f" — **{m['status']}**: {m['reason']}"
        out.append(line)
    out.append("")

    names = [m["name"] for m in d["modes"]]
    notes = []
    out += [f"## Results{_emul(d)}", ""]
    head = "| Benchmark |"
    for n in names:
        head += f" {n} ns | {n} cycles |"
    for a, b in SPEEDUPS:
        head += f" {a}/{b} |"
    out.append(head)
    out.append("|---|" + "---:|" * (2 * len(names) + len(SPEEDUPS)))
    for r in d["rows"]:
        label = r["label"].replace("|", "\\|")
        if r["unit"] != "op":
            label += f" (per {r['unit']})"
        line = f"| {label} |"
        for n in names:
            c = r["modes"][n]
            where = f"{n}, {r['name']}"
            line += f" {_cell(c, 'ns_median', notes, where)} |"
            cyc = _cell(c, "cycles_median")
            line += f" {cyc if c.get('status') == 'ok' else ''} |"
        for a, b in SPEEDUPS:
            s = r["speedup"].get(f"{a}/{b}")
            line += f" {s:.2f} |" if s else " – |"
        out.append(line)
    out.append("")
    out.append("Speed-up: user ns / kernel-mode ns (above 1: kernel mode is faster).")
    out.append("")
    if notes:
        out += ["Notes:", ""] + [f"{i}. {n}" for i, n in enumerate(notes, 1)] + [""]

    by_name = {r["name"]: r for r in d["rows"]}
    for lay in d.get("layouts", []):
        rows = [(t, by_name.get(n)) for t, n in lay.get("rows", [])]
        if not any(r for _, r in rows):
            continue
        unit, div = lay.get("unit", "ns"), lay.get("ns_per_unit", 1) or 1
        out += [f"## {lay.get('title')} ({unit}){_emul(d)}", ""]
        out.append("| Operation |" + "".join(f" {n} ({unit}) |" for n in names)
                   + "".join(f" {a}/{b} |" for a, b in SPEEDUPS))
        out.append("|---|" + "---:|" * (len(names) + len(SPEEDUPS)))
        for title, r in rows:
            line = f"| {title} |"
            for n in names:
                line += f" {_cell(r['modes'][n], 'ns_median', div=div) if r else 'n/a'} |"
            for a, b in SPEEDUPS:
                s = r["speedup"].get(f"{a}/{b}") if r else None
                line += f" {s:.2f} |" if s else " – |"
            out.append(line)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def exit_status(d):
    """0: every mode ok or unavailable; 1: a mode failed or had failed rows."""
    bad = [m for m in d["modes"] if m["status"] in ("error", "rows failed")]
    if d["modes"][0]["status"] != "ok":
        return 1            # the ordinary process must always work
    return 1 if bad else 0


def bench_rows(program):
    """Row names from `kml-bench --list` (a static x86-64 program: it runs
    on the host too); None when it cannot be run here."""
    try:
        p = subprocess.run([str(program), "--list"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def check_only(only, program):
    """Reject an --only list with unknown rows before booting."""
    names = [n for n in only.split(",")]
    if not any(names) or any(not n for n in names):
        raise KmlError(f"--only {only!r}: a comma-separated list of benchmark rows")
    known = bench_rows(program)
    if known is None:
        return
    bad = [n for n in names if n not in known]
    if bad:
        raise KmlError(f"--only: unknown benchmark row(s) {', '.join(bad)}; "
                       f"valid: {' '.join(known)}")

