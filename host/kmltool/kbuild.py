"""Kernel configuration and build, out of tree, incremental, with ccache."""
import os
import re
import shutil

from . import paths, patches
from .paths import KmlError
from .util import digest, run, say

CONFIG_STAMP = ".kml-config-digest"


def parse_fragment(path):
    """Return {CONFIG_X: value} from a fragment ('n' for '=n' or 'is not set')."""
    want = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        m = re.match(r"# (CONFIG_\w+) is not set$", line)
        if m:
            want[m.group(1)] = "n"
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"(CONFIG_\w+)=(.*)$", line)
        if not m:
            raise KmlError(f"{path}:{n}: not a config line: {line!r}")
        want[m.group(1)] = m.group(2)
    return want


def parse_config(path):
    got = {}
    for line in path.read_text().splitlines():
        m = re.match(r"(CONFIG_\w+)=(.*)$", line)
        if m:
            got[m.group(1)] = m.group(2)
    return got


def check_config(fragment, config):
    """Options of the fragment that did not survive olddefconfig."""
    want, got = parse_fragment(fragment), parse_config(config)
    bad = []
    for key, val in want.items():
        have = got.get(key, "n")
        if have != val:
            bad.append(f"{key}={val} requested, got {key}={have}")
    return bad


def _make(tree, *targets, jobs=None):
    jobs = jobs or (os.cpu_count() or 1) + 1
    cmd = ["make", "-C", str(tree), f"O={paths.OBJ}", f"-j{jobs}",
           "LOCALVERSION=", *targets]
    if shutil.which("ccache"):
        cmd.insert(5, "CC=ccache gcc")
    run(cmd)


def configure(tree):
    frag = paths.CONFIG_FRAGMENT
    state = patches.load_state(tree) or {}
    want = digest(frag.read_bytes(), state.get("tarball"), state.get("series"),
                  patches.head(tree))
    stamp = paths.OBJ / CONFIG_STAMP
    config = paths.OBJ / ".config"
    if (config.exists() and stamp.exists() and stamp.read_text() == want
            and not check_config(frag, config)):
        return
    say("configuring: tinyconfig + kernel/config/kml.config")
    paths.OBJ.mkdir(parents=True, exist_ok=True)
    _make(tree, "tinyconfig")
    run([str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O",
         str(paths.OBJ), str(config), str(frag)], cwd=tree, capture=True)
    _make(tree, "olddefconfig")
    bad = check_config(frag, config)
    if bad:
        raise KmlError("kernel config: options of kernel/config/kml.config "
                       "were dropped (missing dependency?):\n  " + "\n  ".join(bad))
    stamp.write_text(want)


def build_kernel():
    tree = patches.ensure_tree()
    configure(tree)
    say(f"building the kernel in {paths.OBJ} (a clean build takes minutes)")
    _make(tree, "bzImage")
    say(f"kernel: {paths.BZIMAGE}")
    return paths.BZIMAGE


def kernel_release():
    rel = paths.OBJ / "include" / "config" / "kernel.release"
    return rel.read_text().strip() if rel.exists() else None
