"""A fake QEMU gdb stub on a socket pair, for the host tests of the
gdbstub clients (pathlen, cpustate)."""
import socket
import threading

from kmltool import gdbstub


class FakeSocketStub:
    """A stub on a socket pair: answers each request from a script.
    hello, if given, is sent first, as QEMU sends its stop reply when a
    client connects."""

    def __init__(self, answers, hello=None):
        self.a, self.b = socket.socketpair()
        self.answers = answers
        self.hello = hello
        self.got = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        if self.hello is not None:
            self.b.sendall(gdbstub.frame(self.hello))
        buf = b""
        while self.answers:
            buf += self.b.recv(4096)
            pkts, buf = gdbstub.split_packets(buf)
            for p in pkts:
                self.got.append(p.decode())
                self.b.sendall(b"+" + gdbstub.frame(self.answers.pop(0)))
