"""Unit tests: the guest image (host/kmltool/initramfs.py): dynamically
linked programs get their interpreter and libraries, resolved statically
(as ldd would find them)."""
import os
import re
import subprocess

import pytest

from kmltool import initramfs
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
