"""./kml appliance: a single-service VM image, every process at CPL 0.

The appliance image is the guest kernel (tinyconfig + kml.config: the
project's smallest kernel) and a gzip-compressed initramfs holding
nothing but kml-appinit as /init (guest/appliance/kml-appinit.c, static), the
service with its shared libraries, and /etc/appliance (the service's
port, how to check it, its argv).  Booted with kml=all, init and the service run in
kernel mode; kml-appinit starts the service, waits until it answers
(redis: PING gets +PONG) and reports when (CLOCK_BOOTTIME: since the
kernel started).  With kml.appliance=measure it also checks the service
(SET/GET), stops it and powers off.

The comparison: the same service started the same way (kml-appinit
--here) as the command of the normal guest image (busybox, the test
programs, guest/init's set-up; kml=on, so the service is an ordinary
process), same kernel, same QEMU options.  Per image: its sizes, and per
boot the kernel's time to the service's first answer and the host's
time from QEMU's start to the ready line.  Rounds alternate the images.
"""
import gzip
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from . import apps, configs, initramfs, kbuild, paths, qemu
from .cpio import Archive
from .paths import KmlError
from .util import say

SCHEMA = "kml-appliance/1"
APPINIT = "kml-appinit"                     # in paths.GUEST_OUT, /usr/lib/kml on the normal image
READY = re.compile(r"^kml-appinit: ready service=(\S+) pid=(\d+) port=(\d+) "
                   r"boottime_ms=([0-9.]+) init_ms=([0-9.]+) kernelmode=(-?\d+) "
                   r"init_cpl=(\d)\s*$", re.M)


@dataclass(frozen=True)
class Service:
    name: str
    host: str           # the program on the host
    guest: str          # where it goes in the image
    args: tuple
    port: int
    check: str          # redis or tcp (kml-appinit)

    def config(self):
        """/etc/appliance: "PORT CHECK", then the argv, one per line."""
        return "".join(f"{x}\n" for x in (f"{self.port} {self.check}", self.guest,
                                          *self.args))


SERVICES = {
    # Debian's /usr/bin/redis-server is a link to redis-check-rdb (redis-tools)
    "redis": Service("redis", "/usr/bin/redis-check-rdb", "/usr/bin/redis-server",
                     apps.REDIS_ARGS, apps.REDIS_PORT, "redis"),
}


def image_path(service):
    return paths.BUILD / "appliance" / f"{service.name}.cpio.gz"


def image_archive(service, appinit=None):
    """The appliance initramfs as an Archive."""
    appinit = Path(appinit or paths.GUEST_OUT / APPINIT)
    if not appinit.is_file():
        raise KmlError(f"no {appinit}: run ./kml build")
    arc = Archive()
    for d in ("dev", "proc", "sys", "tmp", "etc"):
        arc.dir(d, mode=0o1777 if d == "tmp" else 0o755)
    arc.chardev("dev/console", 5, 1)
    arc.chardev("dev/null", 1, 3, mode=0o666)
    initramfs.add_host_file(arc, appinit, "init", mode=0o755)
    initramfs.add_host_file(arc, service.host, service.guest, mode=0o755)
    arc.file("etc/appliance", service.config().encode())
    return arc


def build_image(service):
    """The image, gzip-compressed (the kernel unpacks it: CONFIG_RD_GZIP);
    (path, uncompressed size)."""
    out = image_path(service)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = image_archive(service).to_bytes()
    out.write_bytes(gzip.compress(data, 9, mtime=0))
    return out, len(data)


def parse_ready(text):
    """The ready line's fields, or None."""
    m = READY.search(text)
    if not m:
        return None
    return {"service": m[1], "pid": int(m[2]), "port": int(m[3]),
            "boottime_ms": float(m[4]), "init_ms": float(m[5]),
            "kernelmode": int(m[6]), "init_cpl": int(m[7])}


class _Clock:
    """A stream callback noting when the ready line arrived."""

    def __init__(self):
        self.text, self.ready_at = "", None

    def __call__(self, data):
        self.text += data.decode(errors="replace")
        if self.ready_at is None and READY.search(self.text):
            self.ready_at = time.monotonic()


def one_boot(kind, service, kernel, image, conf, opts):
    """Boot one image; the boot's record."""
    clock = _Clock()
    if kind == "appliance":
        append = configs.merge(configs.APPLIANCE, opts["append"], "appliance")
        res = qemu.boot([], append=append, initrd=image, stream=clock, kernel=kernel,
                        smp=opts["smp"], mem=opts["mem"], timeout=opts["timeout"],
                        accel=opts["accel"])
    else:
        res = qemu.boot([f"/usr/lib/kml/{APPINIT}", "--here", "/root/appliance.conf"],
                        adds=[f"{service.host}:{service.guest}",
                              f"{conf}:/root/appliance.conf"],
                        append=opts["append"], stream=clock, kernel=kernel, smp=opts["smp"],
                        mem=opts["mem"], timeout=opts["timeout"], accel=opts["accel"])
    ready = parse_ready(clock.text)
    rec = {"image": kind, "status": res.status, "problems": res.problems,
           "timed_out": res.timed_out, "ready": ready, "rundir": _shown(res.rundir),
           "wall_ms": ((clock.ready_at - res.started) * 1e3
                       if clock.ready_at and res.started else None)}
    why = res.verdict()
    if not why and not ready:
        why = "no ready line from kml-appinit"
    rec["error"] = why
    return rec


def _shown(path):
    """path relative to the repository when it is inside it (saved results
    should not name this machine's directories)."""
    try:
        return str(Path(path).resolve().relative_to(paths.ROOT))
    except ValueError:
        return str(path)


def measure(service, rounds, opts, kernel=None):
    """Build the image, boot both images rounds times (alternating); the
    result (SCHEMA)."""
    kernel = kernel or kbuild.kernel(None)
    opts = dict(opts, accel=opts["accel"] or qemu.choose_accel())
    image, raw = build_image(service)
    conf = paths.BUILD / "appliance" / f"{service.name}.conf"
    conf.write_text(service.config())
    sizes = {"bzimage": kernel.bzimage.stat().st_size, "appliance": image.stat().st_size,
             "appliance_uncompressed": raw, "normal": paths.INITRAMFS.stat().st_size}
    boots = []
    for r in range(rounds):
        order = ("appliance", "normal") if r % 2 == 0 else ("normal", "appliance")
        for kind in order:
            say(f"appliance: round {r + 1}/{rounds}: {kind} image")
            rec = one_boot(kind, service, kernel, image, conf, opts)
            rec["round"] = r + 1
            boots.append(rec)
    return {"schema": SCHEMA, "service": service.name, "kernel": kernel.name,
            "rounds": rounds, "append": opts["append"], "accel": opts["accel"],
            "emulated": opts["accel"] != "kvm", "sizes": sizes, "boots": boots,
            "image": _shown(image)}


def summary(data):
    """Per image: medians of the boots that worked, and the counts."""
    out = {}
    for kind in ("appliance", "normal"):
        ok = [b for b in data["boots"] if b["image"] == kind and not b["error"]]
        out[kind] = {
            "boots": len([b for b in data["boots"] if b["image"] == kind]),
            "ok": len(ok),
            "boottime_ms": statistics.median(b["ready"]["boottime_ms"] for b in ok)
            if ok else None,
            "wall_ms": statistics.median(b["wall_ms"] for b in ok if b["wall_ms"])
            if ok and all(b["wall_ms"] for b in ok) else None,
            "kernelmode": sorted({b["ready"]["kernelmode"] for b in ok}),
            "init_cpl": sorted({b["ready"]["init_cpl"] for b in ok}),
        }
    return out


def exit_status(data):
    """0: every boot reached its service, the appliance's at CPL 0."""
    s = summary(data)
    bad = [b for b in data["boots"] if b["error"]]
    return 1 if bad or s["appliance"]["kernelmode"] != [1] else 0


def _mib(n):
    return f"{n / 2**20:.1f} MiB"


def markdown(data):
    s = summary(data)
    z = data["sizes"]
    lab = "emulated: QEMU TCG; " if data["emulated"] else ""
    rows = [
        ("appliance (kml=all; /init = kml-appinit, the service; gzip, "
         f"{_mib(z['appliance_uncompressed'])} unpacked)", "appliance", z["appliance"]),
        ("normal image (kml=on; guest/init, busybox, test programs; not compressed)",
         "normal", z["normal"]),
    ]
    out = [f"Appliance: {data['service']} ({lab}median of {data['rounds']} boots per "
           f"image, alternating; kernel {data['kernel']}, bzImage {_mib(z['bzimage'])})",
           "",
           "| image | initramfs | kernel + initramfs | boot to service (kernel clock, ms) "
           "| QEMU start to service (host, ms) | service KernelMode | init CPL | boots ok |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for title, kind, size in rows:
        m = s[kind]

        def f(v):
            return f"{v:.0f}" if v is not None else "-"
        out.append(f"| {title} | {_mib(size)} | {_mib(size + z['bzimage'])} | "
                   f"{f(m['boottime_ms'])} | {f(m['wall_ms'])} | "
                   f"{','.join(map(str, m['kernelmode'])) or '-'} | "
                   f"{','.join(map(str, m['init_cpl'])) or '-'} | {m['ok']}/{m['boots']} |")
    for b in data["boots"]:
        if b["error"]:
            out.append(f"- FAILED: {b['image']} boot of round {b['round']}: {b['error']} "
                       f"({b['rundir']})")
    return "\n".join(out) + "\n"
