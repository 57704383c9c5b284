"""pytest setup for the verification tests (verify/ is on sys.path:
pytest.ini): shared, session-cached fixtures (scans of system binaries, crafted
programs built with gcc)."""
import shutil
import subprocess
from pathlib import Path

import pytest

from kmlverify import scanner

VERIFY = Path(__file__).resolve().parents[1]
REPO = VERIFY.parent


def need_tool(name):
    """Skip the test unless ``name`` is on PATH."""
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed")


@pytest.fixture(scope="session")
def scans():
    """``scans(path, follow_libs=True)``: scanner reports; each file is
    disassembled once per session (libraries are shared by many programs)."""
    cache = {}

    def get(path, follow_libs=True):
        return scanner.scan([path], follow_libs=follow_libs, cache=cache)
    return get


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory):
    """A temporary directory for programs compiled during the session."""
    return tmp_path_factory.mktemp("kmlverify-build")


@pytest.fixture(scope="session")
def compile_c(build_dir):
    """``compile_c(name, source, *flags)``: build C ``source`` with gcc into
    the session's build directory (skip if gcc is missing)."""
    def build(name, source, *flags):
        need_tool("gcc")
        out = build_dir / name
        src = build_dir / f"{name}.c"
        src.write_text(source)
        proc = subprocess.run(["gcc", "-O1", "-o", str(out), str(src), *flags],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"gcc failed: {proc.stderr}")
        return out
    return build
