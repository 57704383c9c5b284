"""Kernel configuration and build, out of tree, incremental, with ccache."""
import lzma
import os
import re
import shutil
from pathlib import Path

from . import paths, patches, signing
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


def check_config(fragments, config):
    """Options of the fragments (a later one overrides an earlier one) that
    did not survive olddefconfig."""
    want, got = {}, parse_config(config)
    for frag in fragments:
        want.update(parse_fragment(frag))
    bad = []
    for key, val in want.items():
        have = got.get(key, "n")
        if have != val:
            bad.append(f"{key}={val} requested, got {key}={have}")
    return bad


class DebianConfig:
    """A starting .config: Debian's own configuration for a 6.12 amd64
    flavour (package linux-config-6.12).  modules=False: every option
    that Debian builds as a module turned off (mod2noconfig), for a VM
    that boots without an initramfs of modules, what it needs built in by
    the fragment; modules=True: Debian's modules kept, for a package that
    boots installed machines."""

    def __init__(self, path=None, modules=False):
        self.path = Path(path or paths.DEBIAN_CONFIG)
        self.modules = modules

    def __str__(self):
        return f"Debian's {self.path.name}" + ("" if self.modules else " - modules")

    def identity(self):
        """What the configuration depends on: the file's content."""
        if not self.path.exists():
            raise KmlError(f"{self.path}: not found; ./kml setup installs "
                           "linux-config-6.12 (Debian's kernel configuration)")
        return self.path.read_bytes()

    def write(self, tree, k):
        text = lzma.decompress(self.identity()) if self.path.suffix == ".xz" \
            else self.identity()
        (k.obj / ".config").write_bytes(text)
        if not self.modules:
            make(tree, k, "mod2noconfig")


class Kernel:
    """One kernel built from the series: its config fragments, merged in
    order onto a starting .config, and its own out-of-tree build
    directory."""

    def __init__(self, name, fragments, obj, text, base=("tinyconfig",)):
        self.name, self.fragments, self.obj, self.text = name, fragments, obj, text
        # what writes the starting .config: make targets, or an object
        # with write(tree, kernel) and identity() (DebianConfig)
        self.base = base

    @property
    def bzimage(self):
        return self.obj / "arch" / "x86" / "boot" / "bzImage"

    @property
    def vmlinux(self):
        return self.obj / "vmlinux"

    def release(self):
        rel = self.obj / "include" / "config" / "kernel.release"
        return rel.read_text().strip() if rel.exists() else None


KERNELS = {
    "default": Kernel("default", [paths.CONFIG_FRAGMENT], paths.OBJ,
                      "the guest kernel: tinyconfig + kernel/config/kml.config"),
    "debug": Kernel("debug", [paths.CONFIG_FRAGMENT, paths.DEBUG_FRAGMENT],
                    paths.BUILD / "obj-debug",
                    "the same plus kernel/config/debug.config: full preemption, "
                    "lockdep, DEBUG_ENTRY with objtool's noinstr/unret validation, "
                    "DEBUG_VM, UBSAN_BOUNDS"),
    "defconfig": Kernel("defconfig", [paths.DEFCONFIG_FRAGMENT], paths.BUILD / "obj-defconfig",
                        "a distribution-style kernel: x86_64_defconfig + kvm_guest.config + "
                        "kernel/config/defconfig.config (FRED, Xen PV, SEV and modules "
                        "built in, decided at boot)",
                        base=("x86_64_defconfig", "kvm_guest.config")),
    "debian": Kernel("debian", [paths.DEBIAN_FRAGMENT], paths.BUILD / "obj-debian",
                     "Debian's kernel: Debian's own 6.12 amd64 configuration "
                     "(linux-config-6.12), modules turned off, + "
                     "kernel/config/debian.config (the VM's disk built in)",
                     base=(DebianConfig(),)),
    "cloud": Kernel("cloud", [paths.CLOUD_FRAGMENT], paths.BUILD / "obj-cloud",
                    "the package's kernel: Debian's 6.12 cloud-amd64 flavour "
                    "(linux-config-6.12) with its modules, + kernel/config/cloud.config",
                    base=(DebianConfig(paths.DEBIAN_CLOUD_CONFIG, modules=True),)),
}
DEFAULT = KERNELS["default"]


def kernel(name=None):
    """The Kernel called name (default: the guest kernel)."""
    if name is None:
        return DEFAULT
    if name not in KERNELS:
        raise KmlError(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")
    return KERNELS[name]


def make(tree, k, *targets, jobs=None, env=None, capture=False):
    """make TARGETS in kernel k's build directory, with ccache if there is
    one; env: the environment (default: this process's); capture: keep
    the output (in the error, on failure) instead of printing it."""
    jobs = jobs or (os.cpu_count() or 1) + 1
    cmd = ["make", "-C", str(tree), f"O={k.obj}", f"-j{jobs}",
           "LOCALVERSION=", *targets]
    if shutil.which("ccache"):
        cmd.insert(5, "CC=ccache gcc")
        env = ccache_env(os.environ if env is None else env)
    return run(cmd, env=env, capture=capture)


def ccache_env(environ):
    """ccache settings under which another checkout of the project (a CI
    clone) finds what this one compiled: paths below the build directory
    are hashed relative to it, and the working directory is not hashed
    (it only changes DW_AT_comp_dir in the debug information).  Settings
    the user made in the environment win."""
    env = dict(environ)
    env.setdefault("CCACHE_BASEDIR", str(paths.BUILD))
    env.setdefault("CCACHE_NOHASHDIR", "1")
    return env


def fragments(k):
    """k's fragments, and the one that makes a kernel with
    KML_SIGNED_PROGRAMS trust this build directory's signing key."""
    frags = list(k.fragments)
    if any(parse_fragment(f).get("CONFIG_KML_SIGNED_PROGRAMS") == "y" for f in frags):
        frags.append(signing.fragment())
    return frags


def configure(tree, k):
    frags = fragments(k)
    names = " + ".join([*map(str, k.base), *(os.path.relpath(f, paths.ROOT) for f in frags)])
    state = patches.load_state(tree) or {}
    bases = [b if isinstance(b, str) else b.identity() for b in k.base]
    want = digest(*bases, *(f.read_bytes() for f in frags), state.get("tarball"),
                  state.get("series"), patches.head(tree))
    stamp = k.obj / CONFIG_STAMP
    config = k.obj / ".config"
    if (config.exists() and stamp.exists() and stamp.read_text() == want
            and not check_config(frags, config)):
        return
    say(f"configuring the {k.name} kernel: {names}")
    k.obj.mkdir(parents=True, exist_ok=True)
    for base in k.base:
        if isinstance(base, str):
            make(tree, k, base)
        else:
            base.write(tree, k)
    run([str(tree / "scripts/kconfig/merge_config.sh"), "-m", "-O",
         str(k.obj), str(config), *map(str, frags)], cwd=tree, capture=True)
    make(tree, k, "olddefconfig")
    bad = check_config(frags, config)
    if bad:
        raise KmlError(f"kernel config: options of {names} "
                       "were dropped (missing dependency?):\n  " + "\n  ".join(bad))
    stamp.write_text(want)


def build_kernel(k=DEFAULT):
    tree = patches.ensure_tree()
    configure(tree, k)
    say(f"building the {k.name} kernel in {k.obj} (a clean build takes minutes)")
    make(tree, k, "bzImage")
    if parse_config(k.obj / ".config").get("CONFIG_NOINSTR_VALIDATION") == "y":
        check_noinstr(k)        # the debug kernel (DEBUG_ENTRY), defconfig too
    say(f"kernel: {k.bzimage}")
    return k.bzimage


def kernel_release(k=DEFAULT):
    return k.release()


def objtool_vmlinux_args(config):
    """The arguments the kernel's build gives objtool for vmlinux.o
    (scripts/Makefile.vmlinux_o) when CONFIG_NOINSTR_VALIDATION is set."""
    cfg = parse_config(config)
    if cfg.get("CONFIG_NOINSTR_VALIDATION") != "y":
        raise KmlError(f"{config}: CONFIG_NOINSTR_VALIDATION is not set")
    args = ["--noinstr"]
    if "y" in (cfg.get("CONFIG_MITIGATION_UNRET_ENTRY"), cfg.get("CONFIG_MITIGATION_SRSO")):
        args.append("--unret")
    return args + ["--link", "--dry-run"]


def objtool_warnings(text):
    """The warning lines of objtool's output."""
    return [line.strip() for line in text.splitlines() if "warning: objtool:" in line]


def check_noinstr(k):
    """Validate vmlinux.o again, as the build does: code that runs before
    the kernel's state is set up (noinstr) calls nothing instrumentable,
    and every entry path untrains the return predictor before its first
    RET.  The build only prints these warnings when it relinks; this runs
    every time and fails on any."""
    objtool = k.obj / "tools" / "objtool" / "objtool"
    vmlinux_o = k.obj / "vmlinux.o"
    args = objtool_vmlinux_args(k.obj / ".config")
    p = run([str(objtool), *args, str(vmlinux_o)], capture=True, check=False)
    warnings = objtool_warnings((p.stdout or "") + (p.stderr or ""))
    if p.returncode != 0 or warnings:
        raise KmlError(f"objtool {' '.join(args)} vmlinux.o (exit status {p.returncode}):"
                       "\n  " + "\n  ".join(warnings or ["(no warning printed)"]))
    say(f"objtool {' '.join(args[:-2])}: vmlinux.o validated, no warnings")
