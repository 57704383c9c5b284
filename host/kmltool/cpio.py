"""Minimal writer for the "newc" cpio format the kernel unpacks as initramfs.

Written here rather than calling cpio(1) so that owners, modes and device
nodes are exact without root or fakeroot, and so that a per-run overlay can
be appended to the base archive (the kernel unpacks concatenated archives in
order; later entries replace earlier ones).
"""
import stat
from pathlib import PurePosixPath


class Archive:
    def __init__(self):
        self._entries = []     # (name, mode, uid, gid, data, rdev)
        self._names = set()
        self._ino = 0x1000

    def _parents(self, name):
        parts = PurePosixPath(name).parts[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d not in self._names:
                self._add(d, stat.S_IFDIR | 0o755, 0, 0, b"", (0, 0))

    def _add(self, name, mode, uid, gid, data, rdev):
        self._names.add(name)
        self._entries.append((name, mode, uid, gid, data, rdev))

    @staticmethod
    def _norm(name):
        name = str(PurePosixPath("/") / name).lstrip("/")
        if not name or ".." in PurePosixPath(name).parts:
            raise ValueError(f"bad archive path: {name!r}")
        return name

    def dir(self, name, mode=0o755, uid=0, gid=0):
        name = self._norm(name)
        self._parents(name)
        self._add(name, stat.S_IFDIR | mode, uid, gid, b"", (0, 0))

    def file(self, name, data, mode=0o644, uid=0, gid=0):
        name = self._norm(name)
        self._parents(name)
        self._add(name, stat.S_IFREG | mode, uid, gid, bytes(data), (0, 0))

    def symlink(self, name, target):
        name = self._norm(name)
        self._parents(name)
        self._add(name, stat.S_IFLNK | 0o777, 0, 0, target.encode(), (0, 0))

    def chardev(self, name, major, minor, mode=0o600):
        name = self._norm(name)
        self._parents(name)
        self._add(name, stat.S_IFCHR | mode, 0, 0, b"", (major, minor))

    def __contains__(self, name):
        return self._norm(name) in self._names

    def to_bytes(self):
        out = bytearray()
        for name, mode, uid, gid, data, rdev in self._entries + [
                ("TRAILER!!!", 0, 0, 0, b"", (0, 0))]:
            self._ino += 1
            nlink = 2 if stat.S_ISDIR(mode) else 1
            fields = (self._ino, mode, uid, gid, nlink, 0, len(data),
                      0, 0, rdev[0], rdev[1], len(name) + 1, 0)
            out += b"070701" + "".join(f"{f:08x}" for f in fields).encode()
            out += name.encode() + b"\0"
            out += b"\0" * (-len(out) % 4)
            out += data
            out += b"\0" * (-len(out) % 4)
        out += b"\0" * (-len(out) % 512)
        return bytes(out)
