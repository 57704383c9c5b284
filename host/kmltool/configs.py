"""Boot configurations: the one vocabulary of the VMs that commands boot.

A configuration (Config) is made of parts:

  kernel   which kernel boots (kbuild.KERNELS: default, debug, defconfig,
           debian)
  system   instead, the Debian system image (system.SYSTEMS) with its
           installed kernel package
  smp      vCPUs; None: the command's --smp
  pti      page-table isolation, "on" or "off" (pti=); None: as the kernel
           decides
  dks      demand-paged kernel stacks, "on" or "reclaim" (dynamic_kstacks=);
           None: whole stacks, the kernel's default
  generic  kernel-mode system calls on the generic path instead of the
           bypass (sysctl.kernel.kml_syscall_path=generic)
  kml_all  appliance mode: every process in kernel mode (kml=all)
  extra    other parameters a command sets (the appliance's
           kml.appliance=measure)

Its kernel command line (Config.append) is the parts' parameters in that
order; its name is made of the parts in the same order --
[KERNEL|SYSTEM-][smpN-][pti-X-][dks[-reclaim]-][generic-][appliance] --
unless a command names it otherwise (kstack-bench's off, on, reclaim).
Test ids (tests/guest/...[smp2-pti-on:...]), saved JSON and the docs use
these names, and tests/host/test_configs.py pins every name and command
line.

merge() is the one place where the user's --append meets a
configuration's own parameters: it adds the user's after them and refuses
one that sets a parameter the configuration sets itself.

The tables: TESTS (./kml test's matrix, DEFAULT_TESTS by default), SOAK
(SOAK_SHORT with --short), APPS (APPS_DEFAULT), KSTACK, PATHLEN, and
APPLIANCE (./kml appliance's image; ./kml run --appliance boots KML_ALL).
"""
import shlex
from dataclasses import dataclass

from .paths import KmlError

PTI = ("on", "off")
DKS = ("on", "reclaim")


@dataclass(frozen=True)
class Config:
    kernel: str = "default"
    system: str = None
    smp: int = None
    pti: str = None
    dks: str = None
    generic: bool = False
    kml_all: bool = False
    extra: tuple = ()
    name: str = ""              # "": made of the parts

    def __post_init__(self):
        if self.pti not in PTI + (None,) or self.dks not in DKS + (None,):
            raise ValueError(f"configuration: pti={self.pti!r}, dks={self.dks!r}")
        if not self.name:
            object.__setattr__(self, "name", self._name())

    def _name(self):
        parts = [self.system or (self.kernel if self.kernel != "default" else None),
                 self.smp and f"smp{self.smp}", self.pti and f"pti-{self.pti}",
                 self.dks and ("dks" if self.dks == "on" else f"dks-{self.dks}"),
                 self.generic and "generic", self.kml_all and "appliance"]
        return "-".join(p for p in parts if p)

    @property
    def append(self):
        """The configuration's own kernel command line."""
        words = [self.pti and f"pti={self.pti}",
                 self.dks and f"dynamic_kstacks={self.dks}",
                 self.generic and "sysctl.kernel.kml_syscall_path=generic",
                 self.kml_all and "kml=all", *self.extra]
        return " ".join(w for w in words if w)


def _key(word):
    return word.split("=", 1)[0]


def merge(own, user, who):
    """own's kernel command line (a Config or a string) followed by the
    user's --append; a KmlError naming who when the user's sets a
    parameter that own sets itself (a comparison or mode it would spoil).
    A parameter own does not set is the user's to add."""
    own = own.append if isinstance(own, Config) else own
    user = (user or "").strip()
    mine = {_key(w): w for w in own.split()}
    try:
        words = shlex.split(user)
    except ValueError:
        words = user.split()
    for word in words:
        if _key(word) in mine:
            raise KmlError(f"--append: {word}: {who} sets {mine[_key(word)]} itself "
                           f"(leave {_key(word)}= out)")
    return " ".join(x for x in (own, user) if x)


def table(*configs):
    """{name: Config}, in order; names must be unique."""
    out = {c.name: c for c in configs}
    if len(out) != len(configs):
        raise ValueError("configuration names must be unique")
    return out


# ./kml test: every guest test once per configuration
TESTS = table(
    Config(smp=2, pti="on"), Config(smp=2, pti="off"),
    Config(smp=1, pti="on"), Config(smp=1, pti="off"),
    # the same tests with demand-paged kernel stacks
    Config(smp=2, pti="on", dks="on"), Config(smp=2, pti="off", dks="on"),
    # and with kernel-mode system calls on the generic path instead of
    # the bypass, so that every guest test also runs against that path
    Config(smp=2, pti="on", dks="on", generic=True),
    # and with the fault-free variant: whole stacks, sleepers' cold pages
    # reclaimed
    Config(smp=2, pti="off", dks="reclaim"),
    # the debug kernel (full preemption, lockdep, DEBUG_ENTRY, ...), both
    # PTI modes, both stack modes; it does not offer the bypass, so its
    # kernel-mode system calls take the generic path
    Config("debug", smp=2, pti="on", dks="on"),
    Config("debug", smp=2, pti="off", dks="reclaim"),
    # the distribution-style kernel (./kml test --kernel defconfig)
    Config("defconfig", smp=2, pti="on"),
    Config("defconfig", smp=2, pti="off", dks="reclaim"),
    # Debian's own configuration (./kml test --kernel debian): its
    # mitigations, IBT, X86_DEBUG_FPU, context tracking built in
    Config("debian", smp=2, pti="on"),
    Config("debian", smp=2, pti="off", dks="on"))
DEFAULT_TESTS = ("smp2-pti-on", "smp2-pti-off", "smp2-pti-off-dks",
                 "smp2-pti-off-dks-reclaim", "debug-smp2-pti-on-dks",
                 "debug-smp2-pti-off-dks-reclaim")

# ./kml soak: one boot each, the command's --smp
SOAK = table(Config(pti="off"), Config(pti="on"),
             Config(pti="off", dks="on"), Config(pti="on", dks="on"),
             Config(pti="off", dks="reclaim"))
SOAK_SHORT = ("pti-on-dks", "pti-off", "pti-off-dks-reclaim")

# ./kml apps: the appliance configurations add a column with server and
# client both at CPL 0; debian-pti-off boots the Debian system (./kml run
# --system debian): systemd as PID 1, Debian's kernel package, the programs
# and libraries of its image
APPS = table(Config(pti="off"), Config(pti="on"),
             Config(pti="off", kml_all=True), Config(pti="on", kml_all=True),
             Config(system="debian", pti="off"))
APPS_DEFAULT = ("pti-off-appliance", "pti-on-appliance")

# ./kml kstack-bench: the same kernel without and with dynamic kernel
# stacks, pti as the kernel decides
KSTACK = table(Config(name="off"), Config(dks="on", name="on"),
               Config(dks="reclaim", name="reclaim"))

# ./kml pathlen: one boot per pti value
PATHLEN = table(Config(pti="off"), Config(pti="on"))

# ./kml run --appliance, and ./kml appliance's image
KML_ALL = Config(kml_all=True)
APPLIANCE = Config(kml_all=True, extra=("kml.appliance=measure",))
