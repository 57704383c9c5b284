"""Unit tests: the guest image (host/kmltool/initramfs.py): the staging
tree is copied as it is, dynamically linked programs get their interpreter
and libraries (resolved statically, as ldd would), the inputs digest."""
import os
import re
import subprocess

import pytest

from kmltool import initramfs
from kmltool.cpio import Archive
from kmltool.paths import KmlError


@pytest.fixture(scope="module")
def dyn(tmp_path_factory):
    d = tmp_path_factory.mktemp("dyn")
    (d / "h.c").write_text('#include <stdio.h>\nint main(void) { puts("hi"); return 0; }\n')
    subprocess.run(["gcc", "-O2", "-o", str(d / "h"), str(d / "h.c")], check=True)
    return d / "h"


def ldd(path):
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    return sorted(m.group(1) for m in re.finditer(r"(?:=>\s*)?(/\S+)\s+\(0x", out))


def test_shared_libs_match_ldd(dyn, tmp_path):
    libs = initramfs.shared_libs(dyn)
    assert sorted(g for g, _ in libs) == ldd(dyn)
    assert all(os.path.isfile(h) for _, h in libs)
    static = tmp_path / "s"
    subprocess.run(["gcc", "-static", "-o", str(static), "-x", "c", "-"],
                   input="int main(void) { return 0; }\n", text=True, check=True)
    assert initramfs.shared_libs(static) == []
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    assert initramfs.shared_libs(script) == []


def test_missing_library_is_an_error(tmp_path):
    lib = tmp_path / "libkmlgone.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), "-x", "c", "-"],
                   input="int gone(void) { return 1; }\n", text=True, check=True)
    prog = tmp_path / "p"
    subprocess.run(["gcc", "-o", str(prog), "-x", "c", "-", "-x", "none", str(lib)],
                   input="int gone(void); int main(void) { return gone(); }\n",
                   text=True, check=True)
    lib.unlink()
    with pytest.raises(KmlError, match="libkmlgone.so"):
        initramfs.shared_libs(prog)


def test_add_tree_copies_modes_links_and_libraries(dyn, tmp_path):
    root = tmp_path / "root"
    (root / "usr/lib/kml").mkdir(parents=True)
    (root / "trusted").mkdir(mode=0o755)
    (root / "init").write_text("#!/bin/sh\n")
    (root / "init").chmod(0o755)
    (root / "usr/lib/kml/data").write_text("x")
    (root / "usr/lib/kml/data").chmod(0o644)
    (root / "trusted/h").write_bytes(dyn.read_bytes())
    (root / "trusted/h").chmod(0o755)
    os.symlink("/usr/lib/kml/data", root / "usr/lib/kml/link")
    arc = Archive()
    initramfs.add_tree(arc, root)
    entries = {name: mode for name, mode, *_ in arc._entries}
    assert entries["init"] == 0o100755 and entries["usr/lib/kml/data"] == 0o100644
    assert entries["trusted"] == 0o40755 and entries["usr/lib/kml/link"] == 0o120777
    for lib in ldd(dyn):
        assert lib.lstrip("/") in entries


def test_inputs_digest_follows_the_staging_tree(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").write_text("1")
    d1 = initramfs.inputs_digest(root)
    assert initramfs.inputs_digest(root) == d1
    (root / "b").mkdir()
    d2 = initramfs.inputs_digest(root)
    assert d2 != d1
    os.utime(root / "b", (1, 1))                # a directory's time does not count
    assert initramfs.inputs_digest(root) == d2
    (root / "a").write_text("22")
    assert initramfs.inputs_digest(root) != d2
