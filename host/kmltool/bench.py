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

The file I/O part (unless --no-io), in the same boot after the latency
modes: kml-iobench (IOzone-style write, re-write, read, re-read of 16 KiB
to 512 KiB files with 16 KiB records) as an ordinary process and from
/trusted in kernel mode, on tmpfs (/tmp) and on ext4 (a disk image made on
the host with mkfs.ext4 and attached as virtio-blk /dev/vda).  The host
checks the CPL and the file system of each run and prints one table:
KiB/s per file system, size and operation in both modes and the ratio
kernel/user.
"""
import json
import subprocess
import sys
from dataclasses import dataclass, field

from .paths import KmlError
from .qemu import MKFS_EXT4

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


@dataclass(frozen=True)
class IoFs:
    name: str           # the file system type kml-iobench must report
    dir: str            # the directory it writes in
    setup: str          # guest shell command that makes dir ready


@dataclass(frozen=True)
class IoMode:
    name: str
    title: str
    program: str
    args: tuple
    cpl: int


IO_SCHEMA = "kml-iobench/1"
IO_NOT_RUN = "kml bench: "      # the guest script's prefix for a run not started
IO_DISK_MIB = 64            # the ext4 image (sparse; a 512 KiB file needs little)
IO_DISK_FS = "ext4"
IO_FS = (
    IoFs("tmpfs", "/tmp/kml-io", "mkdir -p /tmp/kml-io"),
    IoFs("ext4", "/mnt/ext4", "mkdir -p /mnt/ext4 && mount -t ext4 /dev/vda /mnt/ext4"),
)
IO_MODES = (
    IoMode("user", "ordinary process", "/usr/bin/kml-iobench", ("--expect-mode", "user"), 3),
    IoMode("kernel", "kernel mode (/trusted copy)", "/trusted/kml-iobench",
           ("--expect-mode", "kernel"), 0),
)
IO_OPS = ("write", "re-write", "read", "re-read")


def io_run_name(fs, mode):
    return f"io-{fs.name}-{mode.name}"


def _io_script(io_args, user_prog, trusted, tmp, io_fs):
    """The file I/O part of the guest script (after the latency modes)."""
    copy = f"{trusted}/kml-iobench"
    progs = {"/usr/bin/kml-iobench": user_prog, "/trusted/kml-iobench": copy}
    opts = " ".join(map(_q, io_args))
    lines = [
        # a failed copy fails the kernel-mode runs (exit status 127), not
        # the whole script: the latency results are in already
        f"cp {_q(user_prog)} {_q(copy)} && chmod 755 {_q(copy)} || "
        f"echo 'kml bench: cannot copy kml-iobench into {trusted}' >&2",
        # io NAME DIR PROGRAM ARGS...: progress (stderr) streams and is kept
        'io() { name=$1; dir=$2; shift 2; echo "== kml-iobench, $name: $* --dir $dir"; '
        f'{{ "$@" --dir "$dir" -v --label "$name" --json "{tmp}/kb-$name.json" '
        f'2>&1 >/dev/null; echo $? >"{tmp}/kb-$name.rc"; }} | tee "{tmp}/kb-$name.err"; }}',
        # notrun NAME WHY: a run that could not start (its directory is not ready)
        'notrun() { echo "== kml-iobench, $1: not run: $2"; '
        f'echo "{IO_NOT_RUN}not run: $2" >"{tmp}/kb-$1.err"; echo 125 >"{tmp}/kb-$1.rc"; }}',
    ]
    for fs in io_fs:
        err = f"{tmp}/kb-setup-{fs.name}.err"
        lines.append(f"if {{ {fs.setup}; }} 2>{_q(err)}; then")
        for m in IO_MODES:
            lines.append(f"  io {io_run_name(fs, m)} {_q(fs.dir)} {_q(progs[m.program])} "
                         f"{' '.join(map(_q, m.args))}{' ' + opts if opts else ''}")
        lines.append("else")
        lines.append(f"  why={_q(fs.setup + ' failed: ')}\"$(tr '\\n' ' ' <{_q(err)})\"")
        for m in IO_MODES:
            lines.append(f'  notrun {io_run_name(fs, m)} "$why"')
        lines.append("fi")
    return lines


def io_names(io_fs=IO_FS):
    return [io_run_name(fs, m) for fs in io_fs for m in IO_MODES]


def mode_function(what, tmp="/tmp"):
    """The guest shell function `mode NAME PROGRAM ARGS...`: runs the
    program with -v --label NAME --json TMP/kb-NAME.json; its progress
    (stderr) streams and is kept in kb-NAME.err, its exit status goes to
    kb-NAME.rc (report_lines() prints them)."""
    return ('mode() { name=$1; shift; echo "== ' + what + ', mode $name: $*"; '
            f'{{ "$@" -v --label "$name" --json "{tmp}/kb-$name.json" 2>&1 >/dev/null; '
            f'echo $? >"{tmp}/kb-$name.rc"; }} | tee "{tmp}/kb-$name.err"; }}')


def report_lines(names, tmp="/tmp"):
    """Guest shell lines that print each run's exit status, JSON and last
    error lines between markers, for parse_output()."""
    lines = []
    for n in names:
        lines += [
            f'echo "{MARK} begin {n} $(cat {tmp}/kb-{n}.rc)"',
            f'echo "{MARK} json {n}"; cat {tmp}/kb-{n}.json 2>/dev/null; echo',
            f'echo "{MARK} stderr {n}"; tail -n 5 {tmp}/kb-{n}.err',
            f'echo "{MARK} end {n}"',
        ]
    return lines


def guest_script(user_prog="/usr/bin/kml-bench", trusted="/trusted", tmp="/tmp",
                 io_args=None, io_prog="/usr/bin/kml-iobench", io_fs=IO_FS):
    """The guest shell script; the common kml-bench options come as "$@".
    io_args: None, no file I/O part; else kml-iobench's options (a list).
    (The paths and io_fs are parameters only so that tests can run it
    elsewhere.)"""
    copy = f"{trusted}/kml-bench"
    progs = {"/usr/bin/kml-bench": user_prog, "/trusted/kml-bench": copy}
    lines = [
        f"cp {_q(user_prog)} {_q(copy)} && chmod 755 {_q(copy)} || "
        f"{{ echo 'kml bench: cannot copy kml-bench into {trusted}' >&2; exit 125; }}",
        mode_function("kml-bench", tmp),
    ]
    for m in MODES:
        lines.append(f"mode {m.name} {_q(progs[m.program])} "
                     f"{' '.join(map(_q, m.args))} \"$@\"")
    names = [m.name for m in MODES]
    if io_args is not None:
        lines += _io_script(io_args, io_prog, trusted, tmp, io_fs)
        names += io_names(io_fs)
    lines += report_lines(names, tmp)
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


def combine(runs, io_fs=None):
    """The combined result: a dict (saved as JSON; markdown() prints it).
    io_fs: the file systems of the file I/O part (None: it did not run)."""
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
            "layouts": base.get("layouts", []), "modes": modes, "rows": rows,
            "io": combine_io(runs, io_fs) if io_fs is not None else None}


# ---- the file I/O part ------------------------------------------------

def io_status(fs, mode, run):
    """("ok"|"failed"|"unavailable"|"error", reason) for one kml-iobench run."""
    if run is None:
        return "error", "no output from this run (the guest script stopped early)"
    last = _last_line(run.stderr)
    if last.startswith(IO_NOT_RUN):
        return "error", last[len(IO_NOT_RUN):]
    if run.exit == EXIT_UNAVAILABLE:
        return "unavailable", last or "kml-iobench exit status 3"
    if run.exit not in (0, 1):
        return "error", f"kml-iobench exited with {run.exit}" + (f": {last}" if last else "")
    if run.doc is None:
        why = f"invalid JSON ({run.json_error})" if run.json_error else "no JSON"
        return "error", f"kml-iobench exited with {run.exit} but wrote {why}"
    doc = run.doc
    if doc.get("schema") != IO_SCHEMA:
        return "error", f"JSON schema {doc.get('schema')!r}, expected {IO_SCHEMA!r}"
    if doc.get("cpl") != mode.cpl:
        return "error", (f"ran at CPL {doc.get('cpl')}, expected CPL {mode.cpl} "
                         "(did --expect-mode not work?)")
    if doc.get("fs") != fs.name:
        return "error", (f"wrote on {doc.get('fs')!r} in {doc.get('dir')}, expected "
                         f"{fs.name} (is {fs.dir} what it should be?)")
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        return "error", "no results in the JSON"
    bad = [r for r in results if r.get("status") != "ok"]
    if run.exit == 1:
        if not bad:
            return "error", "kml-iobench exited with 1 but reports no failed result"
        own = [r for r in bad if not str(r.get("reason", "")).startswith("not measured")]
        r = (own or bad)[0]
        more = f" (and {len(bad) - 1} more failed results)" if len(bad) > 1 else ""
        return "failed", f"{r.get('size_kib')} KiB {r.get('op')}: {r.get('reason')}{more}"
    if bad:
        return "error", "kml-iobench exited with 0 but reports failed results"
    if doc.get("verified") is not True:
        return "error", "kml-iobench exited with 0 but did not verify the data"
    return "ok", None


def _io_cell(prog, size, op):
    if prog["result"] is None:
        return {"status": prog["status"], "reason": prog["reason"]}
    r = next((r for r in prog["result"].get("results", [])
              if r.get("size_kib") == size and r.get("op") == op), None)
    if r is None:
        return {"status": "not run", "reason": None}
    return {"status": r.get("status"), "reason": r.get("reason"),
            "kib_s_best": _num(r.get("kib_s_best")),
            "kib_s_median": _num(r.get("kib_s_median")),
            "ns_best": _num(r.get("ns_best")), "iters": _num(r.get("iters"))}


def combine_io(runs, io_fs=IO_FS):
    """The file I/O part of the combined result."""
    progs = []
    for fs in io_fs:
        for m in IO_MODES:
            name = io_run_name(fs, m)
            run = runs.get(name)
            status, reason = io_status(fs, m, run)
            progs.append({"name": name, "fs": fs.name, "dir": fs.dir, "mode": m.name,
                          "title": m.title, "program": m.program, "args": list(m.args),
                          "cpl": m.cpl, "exit_status": run.exit if run else None,
                          "status": status, "reason": reason,
                          "result": run.doc if run and status in ("ok", "failed") else None})
    rows = []
    for fs in io_fs:
        mine = [p for p in progs if p["fs"] == fs.name]
        sizes = []
        for p in mine:
            for r in (p["result"] or {}).get("results", []):
                if r.get("size_kib") not in sizes:
                    sizes.append(r.get("size_kib"))
        for size in sizes:
            for op in IO_OPS:
                cells = {p["mode"]: _io_cell(p, size, op) for p in mine}
                u, k = cells.get("user", {}), cells.get("kernel", {})
                ok = (u.get("status") == "ok" and k.get("status") == "ok"
                      and u.get("kib_s_best") and k.get("kib_s_best"))
                rows.append({"fs": fs.name, "size_kib": size, "op": op, "modes": cells,
                             "ratio": round(k["kib_s_best"] / u["kib_s_best"], 4)
                             if ok else None})
    base = next((p["result"] for p in progs if p["result"]), None) or {}
    return {"schema": "kml-bench-io/1", "ops": list(IO_OPS),
            "record_kib": base.get("record_kib"), "runs": base.get("runs"),
            "run_ms": base.get("run_ms"), "fsync": base.get("fsync"),
            "best": base.get("best"), "timed": base.get("timed"),
            "emulated": bool(base.get("emulated")),
            "filesystems": [{"name": fs.name, "dir": fs.dir, "setup": fs.setup}
                            for fs in io_fs],
            "disk": {"mib": IO_DISK_MIB, "fs": IO_DISK_FS, "device": "virtio-blk /dev/vda",
                     "mkfs": "mkfs.ext4 " + " ".join(MKFS_EXT4)},
            "modes": progs, "rows": rows}


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


def system_lines(d):
    """The Markdown list items that describe the machine of a result d
    (accel, cpu, online cpus, kernel)."""
    return [f"- accel: {d.get('accel')}"
            + (" (QEMU TCG software emulation)" if d.get("emulated") else ""),
            f"- cpu: {d.get('cpu')}",
            f"- online cpus: {d.get('ncpus')}",
            f"- kernel: {d.get('kernel')}"]


def markdown(d):
    """The combined Markdown: header, mode list, main table, seed layouts."""
    what = "system call latency in three modes" + (", file I/O" if d.get("io") else "")
    out = [f"# kml-bench: {what}{_emul(d)}", ""]
    out += system_lines(d)
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
    if d.get("io"):
        out += io_markdown(d["io"], d.get("emulated"))
    return "\n".join(out).rstrip() + "\n"


def io_markdown(io, emulated):
    """The file I/O section of the combined Markdown."""
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
    for p in io["modes"]:
        line = f"  - {p['name']}: {p['title']}, `{p['program']} {' '.join(p['args'])}`"
        if p["status"] != "ok":
            line += f" — **{p['status']}**: {p['reason']}"
        out.append(line)
    out += ["", "| File system | File size (KiB) | Operation | user KiB/s | kernel KiB/s "
            "| kernel/user |", "|---|---:|---|---:|---:|---:|"]
    notes = []
    for r in io["rows"]:
        line = f"| {r['fs']} | {r['size_kib']} | {r['op']} |"
        for m in ("user", "kernel"):
            c = r["modes"].get(m, {"status": "not run"})
            if c.get("status") == "ok" and c.get("kib_s_best") is not None:
                line += f" {c['kib_s_best']:.0f} |"
            elif c.get("status") == "failed":
                # one note per reason and size: "not measured" repeats
                text = f"{m}, {r['fs']} {r['size_kib']} KiB: {c.get('reason')}"
                if text not in notes:
                    notes.append(text)
                line += f" FAILED [{notes.index(text) + 1}] |"
            else:
                line += f" {_cell(c, 'kib_s_best')} |"
        line += f" {r['ratio']:.2f} |" if r["ratio"] else " – |"
        out.append(line)
    out += ["", "kernel/user: the kernel-mode process's throughput / the ordinary "
            "process's (above 1: kernel mode is faster).", ""]
    if notes:
        out += ["Notes:", ""] + [f"{i}. {n}" for i, n in enumerate(notes, 1)] + [""]
    return out


def exit_status(d):
    """0: every mode and file I/O run ok or unavailable; 1: one failed or
    had failed rows, or the ordinary process did not work."""
    bad = [m for m in d["modes"] if m["status"] in ("error", "rows failed")]
    if d["modes"][0]["status"] != "ok":
        return 1            # the ordinary process must always work
    io = d.get("io")
    if io:
        if any(p["status"] in ("error", "failed") for p in io["modes"]):
            return 1
        if any(p["mode"] == "user" and p["status"] != "ok" for p in io["modes"]):
            return 1
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

