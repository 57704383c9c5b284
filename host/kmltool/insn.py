"""What a traced instruction path is made of: symbols, disassembly, the
costly instructions and where the instructions fall.

./kml pathlen records, for every instruction it single-steps, the
registers before it executes (RIP, RSP, RCX) and the instruction's bytes
as the guest has them (boot-time patched code included: alternatives,
static calls, return thunks).  This module turns such a trace into
figures: the instruction count (a REP string instruction counts once;
its extra iterations are counted apart), how many instructions run inside
the system call's own function (__x64_sys_NAME, or the kernel function
kml-pathlen calls through a handle, and what it calls) and outside it, the functions they belong to, and the costly instructions met
(CR3 and CR4 writes, WRMSR with its MSR, IRET, SYSRET, SWAPGS, VERW,
fences, serializing instructions, STAC/CLAC, RDMSR, POPF) and the
indirect-branch mitigation code run (retpoline and return thunks,
return untraining, clear_bhb_loop).  Nothing here talks to a VM.
"""
import bisect
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass

from .paths import KmlError

KERNEL_START = 0xFFFF800000000000       # the upper half: kernel addresses
# A system call's own function, or the kernel function kml-pathlen --path
# kfunc calls through a handle to do the same work
OWN_FUNCTION = re.compile(r"(__x64_sys_\w+|__do_sys_\w+|ksys_read|ksys_write|futex_wake)$")
MITIGATION = re.compile(r"(__x86_indirect_\w*thunk\w*|__x86_return_thunk|\w+_return_thunk"
                        r"|\w*untrain_ret\w*|clear_bhb_loop|entry_ibpb|write_ibpb)$")
# kind, pattern on the normalised AT&T text (objdump), first match wins
COSTLY = (
    ("CR3 write", r"mov %\w+,%cr3"),
    ("CR4 write", r"mov %\w+,%cr4"),
    ("CR write", r"mov %\w+,%cr\d+"),
    ("WRMSR", r"wrmsr"),
    ("RDMSR", r"rdmsr"),
    ("IRET", r"iret[wlq]?"),
    ("SYSRET", r"sysret[lq]?"),
    ("SWAPGS", r"swapgs"),
    ("VERW", r"verw .*"),
    ("LFENCE", r"lfence"),
    ("MFENCE", r"mfence"),
    ("serializing", r"(cpuid|serialize|lgdt|lidt|lldt|ltr|invd|wbinvd|invlpg|invpcid)\b.*"
                    r"|mov %\w+,%db\d"),
    ("STAC", r"stac"),
    ("CLAC", r"clac"),
    ("POPF", r"popf[wlq]?"),
)
_COSTLY = [(k, re.compile(p + "$")) for k, p in COSTLY]
MSR_NAMES = {0x48: "SPEC_CTRL", 0x49: "PRED_CMD", 0x10B: "FLUSH_CMD", 0x6E0: "TSC_DEADLINE",
             0x830: "x2APIC_ICR", 0xC0000080: "EFER", 0xC0000081: "STAR",
             0xC0000082: "LSTAR", 0xC0000084: "FMASK", 0xC0000100: "FS_BASE",
             0xC0000101: "GS_BASE", 0xC0000102: "KERNEL_GS_BASE", 0xC0000103: "TSC_AUX",
             0x6A2: "S_CET", 0xDA0: "XSS", 0x1B: "APIC_BASE"}
SLOT = 64               # bytes per instruction in the disassembler's input
MAX_INSN = 15
NOP = 0x90


@dataclass(frozen=True)
class Step:
    """The registers before one single step."""
    rip: int
    rsp: int
    rcx: int


# ---- symbols ----------------------------------------------------------

class Symbols:
    """Text symbols, sorted, for naming addresses (function+offset)."""

    def __init__(self, pairs=()):
        pairs = sorted(pairs)
        self.addrs = [a for a, _ in pairs]
        self.names = [n for _, n in pairs]

    @classmethod
    def from_nm(cls, text, offset=0):
        """From `nm` output ("ADDR TYPE NAME"), text symbols only, moved by offset."""
        pairs = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                pairs.append((int(parts[0], 16) + offset, parts[2]))
        return cls(pairs)

    @classmethod
    def of_file(cls, path, offset=0):
        p = subprocess.run(["nm", "--defined-only", str(path)], capture_output=True, text=True)
        if p.returncode != 0:
            raise KmlError(f"nm {path} failed: {p.stderr.strip()}")
        return cls.from_nm(p.stdout, offset)

    def merged(self, other):
        return Symbols(list(zip(self.addrs, self.names)) + list(zip(other.addrs, other.names)))

    def address(self, name):
        return self.addrs[self.names.index(name)] if name in self.names else None

    def lookup(self, addr):
        """(name, offset) of the symbol at or below addr, or ("?", addr)."""
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0 or (addr >= KERNEL_START > self.addrs[i]):
            return ("?", addr)      # no symbol, or only a user one below a kernel address
        return (self.names[i], addr - self.addrs[i])

    def name(self, addr):
        return self.lookup(addr)[0]

    def where(self, addr):
        name, off = self.lookup(addr)
        return f"{name}+{off:#x}" if name != "?" else f"{addr:#x}"


# ---- disassembly ------------------------------------------------------

def blob(code):
    """(bytes, [rip]) for the disassembler: each instruction's bytes in a
    SLOT of its own, padded with one-byte NOPs, so that whatever follows
    an instruction decodes back into step before the next slot."""
    rips = sorted(code)
    out = bytearray()
    for rip in rips:
        b = bytes(code[rip][:MAX_INSN])
        out += b + bytes([NOP]) * (SLOT - len(b))
    return bytes(out), rips


_OBJDUMP_LINE = re.compile(r"^\s*([0-9a-f]+):\t[0-9a-f ]+\t(.*)$")


def parse_objdump(text, rips):
    """{rip: instruction text} from objdump's listing of blob()'s bytes."""
    out = {}
    for line in text.splitlines():
        m = _OBJDUMP_LINE.match(line)
        if m:
            off = int(m.group(1), 16)
            if off % SLOT == 0 and off // SLOT < len(rips):
                out[rips[off // SLOT]] = normalise(m.group(2))
    return out


def normalise(text):
    """objdump's text without comments and symbol hints, single spaces."""
    text = re.sub(r"\s+#.*$", "", text)
    text = re.sub(r"\s*<[^>]*>", "", text)
    return re.sub(r"\s+", " ", text).strip()


def disassemble(code):
    """{rip: instruction text (AT&T)} for {rip: bytes}, with one objdump run."""
    if not code:
        return {}
    data, rips = blob(code)
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(data)
        f.flush()
        p = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
                            "--insn-width=16", f.name], capture_output=True, text=True)
    if p.returncode != 0:
        raise KmlError(f"objdump failed: {p.stderr.strip()}")
    return parse_objdump(p.stdout, rips)


# ---- classification ---------------------------------------------------

def mnemonic(text):
    """The instruction without prefixes (rep, lock, cs/ds, notrack...)."""
    words = text.split(" ")
    while len(words) > 1 and words[0] in ("rep", "repz", "repe", "repnz", "repne", "lock",
                                          "cs", "ds", "es", "ss", "fs", "gs", "notrack",
                                          "bnd", "data16", "addr32", "rex", "rex.w"):
        words = words[1:]
    return " ".join(words)


def is_rep(text):
    return text.split(" ", 1)[0] in ("rep", "repz", "repe", "repnz", "repne")


def costly_kind(text):
    """The costly kind of an instruction text, or None."""
    core = mnemonic(text)
    return next((k for k, rx in _COSTLY if rx.match(core)), None)


def msr_label(kind, ecx):
    """"WRMSR 0x48 (SPEC_CTRL)" for an MSR access, else kind."""
    if kind not in ("WRMSR", "RDMSR") or ecx is None:
        return kind
    msr = ecx & 0xFFFFFFFF
    name = MSR_NAMES.get(msr)
    return f"{kind} {msr:#x}" + (f" ({name})" if name else "")


def executions(steps, insns):
    """[(Step, iterations)]: consecutive steps of one REP instruction at
    the same RIP are one execution (single-stepping stops after each
    iteration)."""
    out = []
    for s in steps:
        if out and out[-1][0].rip == s.rip and is_rep(insns.get(s.rip, "")):
            out[-1][1] += 1
        else:
            out.append([s, 1])
    return [(s, n) for s, n in out]


def own_flags(execs, syms):
    """For each execution: is it inside a system call's own function
    (entered at its first instruction; inside while RSP is at or below
    the RSP it was entered with)?"""
    out, entry = [], None
    for s, _ in execs:
        if entry is not None and (s.rsp > entry or s.rip < KERNEL_START):
            entry = None
        if entry is None and s.rip >= KERNEL_START:
            name, off = syms.lookup(s.rip)
            if off == 0 and OWN_FUNCTION.match(name):
                entry = s.rsp
        out.append(entry is not None)
    return out


def summarize(steps, insns, syms):
    """The figures of one traced path (see the module docstring)."""
    execs = executions(steps, insns)
    own = own_flags(execs, syms)
    user = sum(1 for s, _ in execs if s.rip < KERNEL_START)
    costly, thunks, funcs, prev = [], Counter(), Counter(), None
    for (s, _), inside in zip(execs, own):
        name = syms.name(s.rip)
        funcs[name] += 1
        if MITIGATION.match(name) and name != prev:
            thunks[name] += 1
        prev = name
        text = insns.get(s.rip, "?")
        kind = costly_kind(text)
        if kind:
            costly.append({"kind": msr_label(kind, s.rcx), "at": syms.where(s.rip),
                           "insn": text, "own": inside})
    inside = sum(own)
    return {"instructions": len(execs), "steps": len(steps),
            "rep_iterations": len(steps) - len(execs), "inside": inside,
            "outside": len(execs) - inside, "user": user,
            "kernel_outside": len(execs) - inside - user,
            "own_functions": sorted({syms.name(s.rip) for (s, _), o in zip(execs, own)
                                     if o and OWN_FUNCTION.match(syms.name(s.rip))}),
            "costly_counts": dict(Counter(c["kind"] for c in costly)),
            "costly": costly, "thunks": dict(thunks),
            "functions": funcs.most_common()}


def first_difference(a, b, syms):
    """Where two traces of one path part: {"step", "a", "b"} (the
    functions and offsets each reached there; "(end)": it had ended), or
    None when they are the same."""
    for i in range(max(len(a), len(b))):
        x = a[i].rip if i < len(a) else None
        y = b[i].rip if i < len(b) else None
        if x != y:
            return {"step": i, "a": syms.where(x) if x is not None else "(end)",
                    "b": syms.where(y) if y is not None else "(end)"}
    return None
