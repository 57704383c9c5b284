"""./kml bench: kml-bench in three modes and kml-iobench in two, in one
boot, combined.

The latency modes (run specs, see guestrun.py):

  user            an ordinary process: /usr/bin/kml-bench (CPL 3)
  kernel-syscall  a copy in /trusted, in kernel mode (CPL 0); system calls
                  with the `syscall` instruction (the C library)
  kernel-call     the same copy with --path call: system calls through
                  libkml's call path (__vdso_kml_syscall)

Each writes its JSON (--json), which comes back in its result block; its
progress streams.  The host checks that each mode ran where it should
(CPL, path) and combines them into one table: ns and cycles per mode, the
speed-ups user/kernel-syscall and user/kernel-call, and the seed layouts
(KML paper Table 2, usermode-kernel thesis Table 6.1) with the three modes
(report.bench_markdown renders it).

A mode that cannot run here (exit status 3: the /trusted copy runs in
user mode because of kml=off, or the kernel has no __vdso_kml_syscall) is
reported as unavailable, with the reason.

The file I/O part (unless --no-io), in the same boot after the latency
modes: kml-iobench (IOzone-style write, re-write, read, re-read of 16 KiB
to 512 KiB files with 16 KiB records) as an ordinary process and from
/trusted in kernel mode, on tmpfs (/tmp) and on ext4 (a disk image made on
the host with mkfs.ext4 and attached as virtio-blk /dev/vda).  The host
checks the CPL and the file system of each run: KiB/s per file system,
size and operation in both modes and the ratio kernel/user.
"""
import subprocess
from dataclasses import dataclass, replace

from .guestrun import Mode, Spec, Status, check
from .paths import KmlError
from .qemu import MKFS_EXT4
from .util import number

SCHEMA = "kml-bench-modes/1"
LATENCY = dict(collect="--json", quiet=True)    # how the benchmarks report

MODES = (
    Spec("user", Mode.USER, "/usr/bin/kml-bench",
         ("--expect-mode", "user", "--path", "syscall"), title="ordinary process",
         **LATENCY),
    Spec("kernel-syscall", Mode.KERNEL, "/usr/bin/kml-bench",
         ("--expect-mode", "kernel", "--path", "syscall"),
         title="kernel mode (/trusted copy), syscall instruction", **LATENCY),
    Spec("kernel-call", Mode.KERNEL, "/usr/bin/kml-bench",
         ("--expect-mode", "kernel", "--path", "call"),
         title="kernel mode (/trusted copy), call path (__vdso_kml_syscall)", **LATENCY),
)
SPEEDUPS = (("user", "kernel-syscall"), ("user", "kernel-call"))


@dataclass(frozen=True)
class IoFs:
    name: str           # the file system type kml-iobench must report
    dir: str            # the directory it writes in
    setup: str          # guest shell command that makes dir ready
    disk: bool = False  # it needs the disk image


IO_SCHEMA = "kml-iobench/1"
IO_DISK_MIB = 64            # the ext4 image (sparse; a 512 KiB file needs little)
IO_DISK_FS = "ext4"
IO_FS = (
    IoFs("tmpfs", "/tmp/kml-io", "mkdir -p /tmp/kml-io"),
    IoFs("ext4", "/mnt/ext4", "mkdir -p /mnt/ext4 && mount -t ext4 /dev/vda /mnt/ext4",
         disk=True),
)
IO_MODES = (
    Spec("user", Mode.USER, "/usr/bin/kml-iobench", ("--expect-mode", "user"),
         title="ordinary process", **LATENCY),
    Spec("kernel", Mode.KERNEL, "/usr/bin/kml-iobench", ("--expect-mode", "kernel"),
         title="kernel mode (/trusted copy)", **LATENCY),
)
IO_OPS = ("write", "re-write", "read", "re-read")


def io_run_name(fs, mode):
    return f"io-{fs.name}-{mode.name}"


def specs(options=(), io_options=None, io_fs=IO_FS):
    """The runs of one ./kml bench: the three latency modes with options
    (kml-bench's --quick, --only); then, unless io_options is None,
    kml-iobench in both modes on each file system in io_fs."""
    out = [m.with_options(*options, "-v", "--label", m.name) for m in MODES]
    for fs in io_fs if io_options is not None else ():
        for m in IO_MODES:
            name = io_run_name(fs, m)
            out.append(m.with_options(*io_options, "--dir", fs.dir, "-v", "--label", name,
                                      name=name, setup=fs.setup,
                                      disk=(IO_DISK_MIB, IO_DISK_FS) if fs.disk else None))
    return out


def mode_status(mode, run):
    """(Status, reason) for one latency mode."""
    status, why = check(mode, run)
    if status not in (Status.OK, Status.FAILED):
        return status, why
    doc = run.doc
    want_path = "call" if "call" in mode.args else "syscall"
    if doc.get("path") != want_path:
        return Status.ERROR, f"measured path {doc.get('path')!r}, expected {want_path!r}"
    if want_path == "call" and doc.get("call_path") is not True:
        return Status.ERROR, "--path call without the call path"
    if status == Status.FAILED:
        return Status.FAILED, "some rows failed (see the table)"
    return Status.OK, None


def _record(spec, run, status, reason, **more):
    """One run in the combined result."""
    return {"name": spec.name, **more, "title": spec.title, "program": spec.path,
            "args": list(spec.args), "cpl": spec.cpl,
            "exit_status": run.exit if run else None, "status": status, "reason": reason,
            "result": run.doc if run and status in (Status.OK, Status.FAILED) else None}


def combine(runs, io_fs=None):
    """The combined result: a dict (saved as JSON; report.bench_markdown()
    prints it).  io_fs: the file systems of the file I/O part (None: it did
    not run)."""
    modes = [_record(m, runs.get(m.name), *mode_status(m, runs.get(m.name))) for m in MODES]
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
                per[x["name"]] = {"status": Status.NOT_RUN, "reason": None}
            else:
                per[x["name"]] = {"status": r.get("status"), "reason": r.get("reason"),
                                  "path": r.get("path"),
                                  "ns_median": number(r.get("ns_median")),
                                  "cycles_median": number(r.get("cycles_median"))}
        speed = {}
        for a, b in SPEEDUPS:
            na, nb = per[a].get("ns_median"), per[b].get("ns_median")
            ok = per[a]["status"] == Status.OK and per[b]["status"] == Status.OK and na and nb
            speed[f"{a}/{b}"] = round(na / nb, 4) if ok else None
        rows.append({"name": name, "label": label, "unit": unit, "modes": per,
                     "speedup": speed})
    return {"schema": SCHEMA, "emulated": bool(base.get("emulated")),
            "accel": base.get("accel"), "cpu": base.get("cpu"), "ncpus": base.get("ncpus"),
            "kernel": base.get("kernel"), "cmdline": base.get("cmdline"),
            "runs": base.get("runs"), "run_ms": base.get("run_ms"),
            "layouts": base.get("layouts", []), "modes": modes,
            "speedups": [f"{a}/{b}" for a, b in SPEEDUPS], "rows": rows,
            "io": combine_io(runs, io_fs) if io_fs is not None else None}


# ---- the file I/O part ------------------------------------------------

def io_status(fs, mode, run):
    """(Status, reason) for one kml-iobench run."""
    status, why = check(mode, run, schema=IO_SCHEMA)
    if status not in (Status.OK, Status.FAILED):
        return status, why
    doc = run.doc
    if doc.get("fs") != fs.name:
        return Status.ERROR, (f"wrote on {doc.get('fs')!r} in {doc.get('dir')}, expected "
                              f"{fs.name} (is {fs.dir} what it should be?)")
    results = doc.get("results")
    if not isinstance(results, list) or not results:
        return Status.ERROR, "no results in the JSON"
    bad = [r for r in results if r.get("status") != Status.OK]
    if status == Status.FAILED:
        if not bad:
            return Status.ERROR, "kml-iobench exited with 1 but reports no failed result"
        own = [r for r in bad if not str(r.get("reason", "")).startswith("not measured")]
        r = (own or bad)[0]
        more = f" (and {len(bad) - 1} more failed results)" if len(bad) > 1 else ""
        return Status.FAILED, f"{r.get('size_kib')} KiB {r.get('op')}: {r.get('reason')}{more}"
    if bad:
        return Status.ERROR, "kml-iobench exited with 0 but reports failed results"
    if doc.get("verified") is not True:
        return Status.ERROR, "kml-iobench exited with 0 but did not verify the data"
    return Status.OK, None


def _io_cell(prog, size, op):
    if prog["result"] is None:
        return {"status": prog["status"], "reason": prog["reason"]}
    r = next((r for r in prog["result"].get("results", [])
              if r.get("size_kib") == size and r.get("op") == op), None)
    if r is None:
        return {"status": Status.NOT_RUN, "reason": None}
    return {"status": r.get("status"), "reason": r.get("reason"),
            "kib_s_best": number(r.get("kib_s_best")),
            "kib_s_median": number(r.get("kib_s_median")),
            "ns_best": number(r.get("ns_best")), "iters": number(r.get("iters"))}


def combine_io(runs, io_fs=IO_FS):
    """The file I/O part of the combined result."""
    progs = []
    for fs in io_fs:
        for m in IO_MODES:
            name = io_run_name(fs, m)
            run = runs.get(name)
            progs.append(_record(replace(m, name=name), run, *io_status(fs, m, run),
                                 fs=fs.name, dir=fs.dir, mode=m.name))
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
                ok = (u.get("status") == Status.OK and k.get("status") == Status.OK
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


def exit_status(d):
    """0: every mode and file I/O run ok or unavailable; 1: one failed or
    had failed rows, or the ordinary process did not work."""
    bad = [m for m in d["modes"] if m["status"] in (Status.ERROR, Status.FAILED)]
    if d["modes"][0]["status"] != Status.OK:
        return 1            # the ordinary process must always work
    io = d.get("io")
    if io:
        if any(p["status"] in (Status.ERROR, Status.FAILED) for p in io["modes"]):
            return 1
        if any(p["mode"] == "user" and p["status"] != Status.OK for p in io["modes"]):
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
