"""A small client of the GDB remote serial protocol, for QEMU's gdb stub.

Only what ./kml pathlen and the vCPU state sampler (cpustate.py) need:
halt, the list of threads (one per vCPU), breakpoints, single steps of
one vCPU, registers (their layout read from the stub's target
description), memory, the QEMU single-step flags (qqemu.sstep), detach.
Packets are framed and checked here; no gdb process is involved.

QEMU stops the whole VM when a client connects and resumes it when the
client detaches.  A vCont action for one thread runs that vCPU alone; the
others stay stopped.
"""
import re
import socket
import time

from .paths import KmlError

# QEMU's single-step flags (gdbstub.c): step, no interrupts, no timers
SSTEP_ENABLE, SSTEP_NOIRQ, SSTEP_NOTIMER = 1, 2, 4
SSTEP_WANTED = SSTEP_ENABLE | SSTEP_NOIRQ | SSTEP_NOTIMER
_ESCAPED = b"#$}*"


class StubError(KmlError):
    """The stub answered with an error, or not in time."""


def checksum(data):
    return sum(data) & 0xFF


def escape(data):
    """Binary-escape the bytes the protocol reserves ('}' then c ^ 0x20)."""
    out = bytearray()
    for c in data:
        out += bytes([0x7D, c ^ 0x20]) if c in _ESCAPED else bytes([c])
    return bytes(out)


def frame(payload):
    """$payload#cs for a str or bytes payload."""
    data = escape(payload.encode() if isinstance(payload, str) else payload)
    return b"$" + data + b"#" + f"{checksum(data):02x}".encode()


def decode(data):
    """A packet body as sent: undo '}' escapes and run-length encoding
    (c*N repeats c N - 29 more times)."""
    out, i = bytearray(), 0
    while i < len(data):
        c = data[i]
        if c == 0x7D and i + 1 < len(data):
            out.append(data[i + 1] ^ 0x20)
            i += 2
        elif c == 0x2A and out and i + 1 < len(data):
            out += bytes([out[-1]]) * (data[i + 1] - 29)
            i += 2
        else:
            out.append(c)
            i += 1
    return bytes(out)


def split_packets(buf):
    """([packet bodies], rest of buf) from received bytes: '+', '-' and
    anything before a '$' are skipped; a packet with a bad checksum is an
    error."""
    out = []
    while True:
        start = buf.find(b"$")
        if start < 0:
            return out, b""
        end = buf.find(b"#", start)
        if end < 0 or len(buf) < end + 3:
            return out, buf[start:]
        body, cs = buf[start + 1:end], buf[end + 1:end + 3]
        if int(cs, 16) != checksum(body):
            raise StubError(f"bad checksum in packet {body[:40]!r}")
        out.append(decode(body))
        buf = buf[end + 3:]


def le_hex(text):
    """An integer from little-endian hex bytes ("7856341200000000")."""
    return int.from_bytes(bytes.fromhex(text), "little") if text else 0


class StopReply:
    """A stop reply: T05thread:01;... or S05, W00 (exited), X09."""

    def __init__(self, text):
        self.text = text
        self.kind = text[:1]
        self.signal = int(text[1:3], 16) if len(text) >= 3 and self.kind in "TSWX" else None
        self.info = dict(kv.split(":", 1) for kv in text[3:].split(";")
                         if ":" in kv) if self.kind == "T" else {}

    @property
    def thread(self):
        return self.info.get("thread")

    @property
    def exited(self):
        return self.kind in ("W", "X")

    def __repr__(self):
        return f"StopReply({self.text!r})"


def parse_layout(docs, root="target.xml"):
    """[(name, bytes)] of the registers in the order of the g packet, from
    the target description (docs: {file name: xml text}, following
    xi:include).  Read with regular expressions: QEMU's target.xml uses
    the xi: prefix without declaring it, which XML parsers reject.
    Comments are dropped first: QEMU's i386-64bit.xml has registers
    commented out (ss_base, ds_base, es_base) between gs and fs_base."""
    out = []
    text = re.sub(r"<!--.*?-->", "", docs[root], flags=re.S)
    for tag, attrs in re.findall(r"<(xi:include|reg)\b([^>]*)>", text):
        a = dict(re.findall(r'([\w:-]+)="([^"]*)"', attrs))
        if tag == "reg":
            out.append((a["name"], int(a["bitsize"]) // 8))
        else:
            out += parse_layout(docs, a["href"])
    return out


def unpack_regs(layout, text):
    """{name: int} from a g packet's hex text (as far as it goes)."""
    regs, pos = {}, 0
    for name, size in layout:
        chunk = text[pos:pos + 2 * size]
        if len(chunk) < 2 * size or "x" in chunk:
            break
        regs[name] = le_hex(chunk)
        pos += 2 * size
    return regs


class Stub:
    """A connection to a gdb stub (a unix socket path, or host:port)."""

    def __init__(self, sock, timeout=30):
        self.sock = sock
        self.timeout = timeout
        self.buf = b""
        self.pending = []           # packets received, not yet read
        self.acks = True
        self.layout = None

    @classmethod
    def connect(cls, address, timeout=30, wait=10):
        """Connect (retrying for up to wait seconds while the stub starts)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                if ":" in str(address):
                    host, port = str(address).rsplit(":", 1)
                    s = socket.create_connection((host or "localhost", int(port)))
                else:
                    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    s.connect(str(address))
                return cls(s, timeout)
            except OSError as e:
                if time.monotonic() > deadline:
                    raise StubError(f"cannot connect to the gdb stub at {address}: {e}")
                time.sleep(0.1)

    def close(self):
        self.sock.close()

    # ---- packets ----
    def send(self, payload):
        self.sock.sendall(frame(payload))

    def recv(self, timeout=None):
        """The next packet's body (str); acknowledged in ack mode."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            pkts, self.buf = split_packets(self.buf)
            self.pending += pkts
            if self.acks and pkts:
                self.sock.sendall(b"+" * len(pkts))
            if self.pending:
                return self.pending.pop(0).decode("latin-1")
            left = deadline - time.monotonic()
            if left <= 0:
                raise StubError("the gdb stub did not answer in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                raise StubError("the gdb stub closed the connection")
            self.buf += data

    def request(self, payload, timeout=None):
        """Send a packet and return the answer; 'Exx' is an error."""
        self.send(payload)
        reply = self.recv(timeout)
        if re.fullmatch(r"E[0-9a-fA-F]{2}", reply):
            raise StubError(f"{payload[:40]}: the stub answered {reply}")
        return reply

    def ok(self, payload):
        reply = self.request(payload)
        if reply != "OK":
            raise StubError(f"{payload[:40]}: the stub answered {reply!r}, not OK")

    # ---- session ----
    def start(self, settle=2):
        """Features, no-ack mode, the register layout; the stop reason.
        QEMU stops the VM when a client connects and says so at once
        (T02): that notification is read first (waiting up to settle
        seconds), so that it is not taken for the answer to a request."""
        try:
            self.recv(settle)
        except StubError:
            pass
        self.request("qSupported:xmlRegisters=i386")
        if self.request("QStartNoAckMode") == "OK":
            self.acks = False
        self.layout = parse_layout(self.target_description())
        return StopReply(self.request("?"))

    def target_description(self):
        docs, todo = {}, ["target.xml"]
        while todo:
            name = todo.pop()
            docs[name] = self.read_xfer(name)
            todo += [h for h in re.findall(r'href="([^"]+)"', docs[name]) if h not in docs]
        return docs

    def read_xfer(self, name):
        text, off = "", 0
        while True:
            reply = self.request(f"qXfer:features:read:{name}:{off:x},ffb")
            text += reply[1:]
            off += len(reply) - 1
            if reply[:1] != "m":
                return text

    def sstep_flags(self, want=SSTEP_WANTED):
        """QEMU's single-step flags after making sure want's are set."""
        flags = int(self.request("qqemu.sstep"), 16)
        if flags & want != want:
            self.ok(f"Qqemu.sstep={flags | want:x}")
            flags = int(self.request("qqemu.sstep"), 16)
        return flags

    def threads(self):
        """The stub's thread ids (QEMU: one per vCPU, in vCPU order), from
        qfThreadInfo and qsThreadInfo until the list ends ('l')."""
        out, reply = [], self.request("qfThreadInfo")
        while reply.startswith("m"):
            out += [t for t in reply[1:].split(",") if t]
            reply = self.request("qsThreadInfo")
        if reply != "l":
            raise StubError(f"qfThreadInfo: the stub answered {reply!r}, not a thread list")
        return out

    def regs(self):
        return unpack_regs(self.layout, self.request("g"))

    def set_reg(self, name, value):
        """Write one register of the selected vCPU (its number: its place
        in the target description)."""
        names = [n for n, _ in self.layout]
        size = dict(self.layout)[name]
        self.ok(f"P{names.index(name):x}={value.to_bytes(size, 'little').hex()}")

    def read(self, addr, size):
        return bytes.fromhex(self.request(f"m{addr:x},{size:x}"))

    def write(self, addr, data):
        self.ok(f"M{addr:x},{len(data):x}:{data.hex()}")

    def set_break(self, addr):
        self.ok(f"Z0,{addr:x},1")

    def clear_break(self, addr):
        self.ok(f"z0,{addr:x},1")

    def select(self, thread):
        self.ok(f"Hg{thread}")

    def step(self, thread):
        """Execute one instruction on thread's vCPU alone; the stop reply."""
        return StopReply(self.request(f"vCont;s:{thread}"))

    def cont(self):
        self.send("vCont;c")

    def wait_stop(self, timeout):
        return StopReply(self.recv(timeout))

    def detach(self):
        self.send("D")
        try:
            self.recv(5)
        except StubError:
            pass
