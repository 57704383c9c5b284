"""Helpers for the host tests that run guest programs on this machine:
build one from guest/ (static, x86-64: it runs here too), or write a
stand-in script."""
import os
import subprocess

from conftest import ROOT
from kmltool import paths


def build(tmp_path_factory, name):
    """guest/Makefile's program `name`, built in a fresh directory; its path."""
    o = tmp_path_factory.mktemp("guest")
    p = subprocess.run(["make", "-s", "-C", str(ROOT / "guest"), f"O={o}",
                        f"KSFT={paths.TREE / 'tools' / 'testing' / 'selftests'}",
                        f"-j{os.cpu_count() or 1}", f"{o}/{name}"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return o / name


def fake_program(path, text):
    """An executable script at path (a stand-in for a guest program)."""
    path.write_text(text)
    path.chmod(0o755)
    return path
