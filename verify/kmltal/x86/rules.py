"""The rules: a small type system over x86-64 machine code.

See docs/verification.md, "Verified programs: the rules", for the prose and
the soundness argument.  In brief:

* A *register type* is an interval of unsigned 64-bit values with a known
  alignment, :class:`Ty` ``[lo, hi] / 2^al``.  ``ANY`` is ``[0, 2^64-1]``.
* The *abstract state* maps the 16 general registers to types.  At every
  *reset point* -- a bundle start (any 32-byte aligned address: the target
  of every masked indirect transfer) and every direct-branch target -- the
  state is ``GAMMA0``: RSP has the stack type ``I_SP = [G, TOP]``, every
  other register is ``ANY``.  Within a bundle the state flows forward
  through the instructions (straight-line code: no join is needed).
* The judgement for an instruction ``Gamma |- i : Gamma'`` checks the
  instruction against the state before it and computes the state after it:
  every memory operand's effective address must provably lie in
  ``[0, LIMIT)`` (lower half, or the non-canonical hole, which faults);
  RSP may change only by the forms of :func:`_rsp_update`; indirect
  transfers need a register of type ``[0, 2^32) / 2^5``; direct transfers
  go to instruction starts; only allow-listed instructions occur.
* A successful access to ``[ea, ea+n)`` *refines* the base register of its
  operand: every mapped address lies in ``[G, TOP)``, so after the access
  ``G <= ea`` and ``ea + n <= TOP``.  This is how ``sub $k, %rsp`` followed
  by a probe, and a pop or push, re-establish ``I_SP``.

Constants (the kernel invariants that give them meaning are in the docs):

``G``      64 KiB: the kernel never maps anything below G for the process.
``TOP``    2^56: the kernel never maps anything for the process at or
           above TOP (TASK_SIZE_MAX is 2^47 - 4096 with 4-level paging,
           2^56 - 4096 with 5-level).
``LIMIT``  2^63 + 2^62: an access that starts below LIMIT and is at most
           2^40 bytes long ends below 2^64 - 2^56, the first upper-half
           address under 5-level paging (2^64 - 2^47 under 4-level).
"""

from typing import NamedTuple

from .decode import GPR64, LEGACY_PREFIXES, Imm, Mem, OtherReg, Reg, scan_prefixes

BUNDLE = 32
G = 1 << 16
TOP = 1 << 56
LIMIT = (1 << 63) + (1 << 62)
TEXT_LIMIT = 1 << 32
U64 = (1 << 64) - 1

# ---------------------------------------------------------------- rule names

RULES = {
    "elf": "the file is a 64-bit x86-64 ELF executable (ET_EXEC)",
    "static": "no PT_INTERP, no PT_DYNAMIC: statically linked",
    "segments": "exactly one executable PT_LOAD, not writable, memsz == filesz, "
                "no other segment shares its pages, no executable stack, "
                "every PT_LOAD in [G, TOP)",
    "text-range": "the executable pages lie in [G, 4 GiB)",
    "entry": "the entry point is a bundle start in the text",
    "decode": "every byte of the executable pages decodes (objdump), no "
              "instruction is longer than 15 bytes or truncated",
    "bundle": "no instruction crosses a 32-byte bundle boundary",
    "prefix": "no REX before a legacy prefix, each legacy prefix at most once "
              "(0x66 repeated only in NOPs), at most one of F2/F3, at most one "
              "segment prefix, no legacy prefix on a control transfer",
    "privileged": "no privileged or state-changing system instruction",
    "instruction": "only allow-listed instructions",
    "segment": "no GS override and no segment register operand; an FS "
               "override only on a provably non-negative address",
    "memory": "every memory operand's effective address lies in [0, LIMIT)",
    "stack": "RSP changes only by push/pop/call, add/sub/lea/and with "
             "immediates, or a move from a register of stack type, never "
             "wraps, and is in I_SP = [G, TOP] at every reset point, "
             "transfer and system call",
    "direct-target": "a direct jump or call targets an instruction start of the text",
    "indirect": "indirect jmp/call only through a register of type "
                "[0, 2^32) aligned to 32 (e.g. after `and $-32, %r11d`); "
                "no memory-indirect, far or RIP-changing system transfer",
    "call-align": "every call ends at a bundle end, so the return address "
                  "is a bundle start",
    "ret": "no ret: return with pop %r11; and $-32, %r11d; jmp *%r11",
}


class Violation(Exception):
    """A rule broken by the instruction at ``offset``."""

    def __init__(self, rule, message, offset=None):
        assert rule in RULES, rule
        super().__init__(message)
        self.rule = rule
        self.message = message
        self.offset = offset


# ---------------------------------------------------------------- types


class Ty(NamedTuple):
    """A register type: values in ``[lo, hi]``, all multiples of ``2**al``."""
    lo: int
    hi: int
    al: int = 0

    def __str__(self):
        if self == ANY:
            return "Any"
        a = f"/2^{self.al}" if self.al else ""
        return f"[{self.lo:#x}, {self.hi:#x}]{a}"

    def within(self, lo, hi):
        return lo <= self.lo and self.hi <= hi


ANY = Ty(0, U64, 0)
U32 = Ty(0, (1 << 32) - 1, 0)
I_SP = Ty(G, TOP, 0)


def exact(v):
    v &= U64
    return Ty(v, v, min(63, _tz(v)))


def _tz(v):
    if v == 0:
        return 63
    return (v & -v).bit_length() - 1


def ty(lo, hi, al=0):
    """A type from integer bounds; ``ANY`` when the range wraps."""
    if lo < 0 or hi > U64 or lo > hi:
        return ANY
    return Ty(lo, hi, min(al, 63))


GAMMA0 = {r: (I_SP if r == "rsp" else ANY) for r in GPR64}


def state_str(state):
    return ", ".join(f"{r}: {state[r]}" for r in GPR64 if state[r] != ANY)


# ---------------------------------------------------------------- instruction classes

PRIVILEGED = {
    "cli", "sti", "hlt", "popf", "popfq", "popfw", "iret", "iretd", "iretq", "iretw",
    "sysret", "sysretq", "sysexit", "sysexitq", "sysenter", "int", "int1", "int3",
    "into", "icebp", "lgdt", "lidt", "lldt", "ltr", "sgdt", "sidt", "sldt", "str",
    "smsw", "lmsw", "clts", "invd", "wbinvd", "wbnoinvd", "invlpg", "invlpga",
    "invpcid", "invept", "invvpid", "rdmsr", "wrmsr", "rdmsrlist", "wrmsrlist",
    "wrmsrns", "rdpmc", "swapgs", "rdfsbase", "rdgsbase", "wrfsbase", "wrgsbase",
    "xsetbv", "xrstors", "xrstors64", "xsaves", "xsaves64", "in", "ins", "insb",
    "insw", "insd", "out", "outs", "outsb", "outsw", "outsd", "clac", "stac",
    "monitor", "mwait", "monitorx", "mwaitx", "rsm", "lar", "lsl", "verr", "verw",
    "ljmp", "lcall", "lret", "retf", "lretq", "lss", "lfs", "lgs", "les", "lds",
    "vmcall", "vmlaunch", "vmresume", "vmxoff", "vmxon", "vmread", "vmwrite",
    "vmptrld", "vmptrst", "vmclear", "vmfunc", "vmrun", "vmload", "vmsave", "vmmcall",
    "vmgexit", "stgi", "clgi", "skinit", "encls", "enclu", "enclv", "pconfig",
    "pvalidate", "rmpadjust", "rmpupdate", "psmash", "rmpquery", "tdcall", "seamcall",
    "seamret", "seamops", "getsec", "ptwrite", "hreset", "loadiwkey", "senduipi",
    "uiret", "clui", "stui", "testui", "umonitor", "umwait", "tpause", "wrssd",
    "wrssq", "wrussd", "wrussq", "incsspd", "incsspq", "rdsspd", "rdsspq", "saveprevssp",
    "rstorssp", "setssbsy", "clrssbsy", "erets", "eretu", "lkgs", "fred",
    "rdpkru", "wrpkru", "xsave", "xsave64", "xsaveopt", "xsaveopt64", "xsavec",
    "xsavec64", "xrstor", "xrstor64", "fxsave", "fxsave64", "fxrstor", "fxrstor64",
    "enter", "leave", "xlat", "xlatb", "pushf", "pushfq", "pushfw", "fnsave", "frstor",
    "fldenv", "fnstenv", "xbegin", "xend", "xabort", "xtest", "cldemote", "movdir64b",
    "enqcmd", "enqcmds", "serialize", "invlpgb", "tlbsync", "rdpru",
}
# Not all of the above are privileged in user mode; those that are not
# (enter, leave, xlat, pushf, x87 environment, TSX, ...) are simply not
# needed and are kept out of the allow-list for simplicity.  The rule name
# reported for them is still "privileged" only for the truly privileged
# ones, see _PRIV_TRUE.
_NOT_TRULY_PRIV = {"enter", "leave", "xlat", "xlatb", "pushf", "pushfq", "pushfw",
                   "fnsave", "frstor", "fldenv", "fnstenv", "xbegin", "xend", "xabort",
                   "xtest", "cldemote", "movdir64b", "xsave", "xsave64", "xsaveopt",
                   "xsaveopt64", "xsavec", "xsavec64", "xrstor", "xrstor64", "fxsave",
                   "fxsave64", "fxrstor", "fxrstor64", "lar", "lsl", "verr", "verw",
                   "serialize", "rdpkru", "wrpkru", "umonitor", "umwait", "tpause",
                   "ptwrite"}

JCC = {"jo", "jno", "jb", "jae", "je", "jne", "jbe", "ja", "js", "jns", "jp", "jnp",
       "jl", "jge", "jle", "jg", "jc", "jnc", "jz", "jnz", "jnb", "jnae", "jna", "jnbe",
       "jpe", "jpo", "jnge", "jnl", "jng", "jnle", "jrcxz", "jecxz",
       "loop", "loope", "loopne", "loopz", "loopnz"}

_CC = r"(o|no|b|ae|e|ne|be|a|s|ns|p|np|l|ge|le|g|c|nc|z|nz|nb|nae|na|nbe|pe|po|nge|nl|ng|nle)"

# Integer instructions: name -> how the first operand is used.
#   "w"  written (and read or not), "r" read only, "rw2" both operands written
INT_OPS = {
    "mov": "w", "movabs": "w", "movzx": "w", "movsx": "w", "movsxd": "w", "lea": "w",
    "add": "w", "sub": "w", "adc": "w", "sbb": "w", "and": "w", "or": "w", "xor": "w",
    "inc": "w", "dec": "w", "neg": "w", "not": "w", "imul": "w",
    "shl": "w", "shr": "w", "sar": "w", "sal": "w", "rol": "w", "ror": "w",
    "rcl": "w", "rcr": "w", "shld": "w", "shrd": "w", "bts": "w", "btr": "w",
    "btc": "w", "bsf": "w", "bsr": "w", "bswap": "w", "popcnt": "w", "lzcnt": "w",
    "tzcnt": "w", "adcx": "w", "adox": "w", "movbe": "w", "crc32": "w", "rdrand": "w",
    "rdseed": "w", "rdpid": "w", "movnti": "w",
    "cmp": "r", "test": "r", "bt": "r",
    "xchg": "rw2", "xadd": "rw2",
    "cmpxchg": "w", "cmpxchg8b": "w", "cmpxchg16b": "w",
    "mul": "r", "div": "r", "idiv": "r",
    "nop": "-", "endbr64": "-", "pause": "-", "lfence": "-", "mfence": "-",
    "sfence": "-", "clc": "-", "stc": "-", "cmc": "-", "cld": "-", "std": "-",
    "sahf": "-", "lahf": "-", "cbw": "-", "cwde": "-", "cdqe": "-", "cwd": "-",
    "cdq": "-", "cqo": "-", "cwtl": "-", "cltq": "-", "cpuid": "-", "rdtsc": "-",
    "rdtscp": "-", "xgetbv": "-", "ud2": "-", "ud1": "-", "ud0": "-",
    "prefetcht0": "-", "prefetcht1": "-", "prefetcht2": "-", "prefetchnta": "-",
    "prefetchw": "-", "prefetch": "-", "clflush": "-", "clflushopt": "-", "clwb": "-",
    "emms": "-", "ldmxcsr": "-", "stmxcsr": "-", "fnstcw": "-", "fldcw": "-",
    "fwait": "-",
    "push": "-", "pop": "w", "syscall": "-",
}
for _cc in _CC[1:-1].split("|"):
    INT_OPS["set" + _cc] = "w"
    INT_OPS["cmov" + _cc] = "w"

# Implicit general-register writes (besides the written operands).
IMPLICIT_WRITES = {
    "mul": ("rax", "rdx"), "div": ("rax", "rdx"), "idiv": ("rax", "rdx"),
    "cmpxchg": ("rax",), "cmpxchg8b": ("rax", "rdx"), "cmpxchg16b": ("rax", "rdx"),
    "cbw": ("rax",), "cwde": ("rax",), "cdqe": ("rax",), "cwtl": ("rax",), "cltq": ("rax",),
    "cwd": ("rdx",), "cdq": ("rdx",), "cqo": ("rdx",), "lahf": ("rax",),
    "cpuid": ("rax", "rbx", "rcx", "rdx"), "rdtsc": ("rax", "rdx"),
    "rdtscp": ("rax", "rdx", "rcx"), "xgetbv": ("rax", "rdx"),
    "syscall": ("rax", "rcx", "r11"),
    "loop": ("rcx",), "loope": ("rcx",), "loopne": ("rcx",), "loopz": ("rcx",),
    "loopnz": ("rcx",),
    "pcmpistri": ("rcx",), "pcmpestri": ("rcx",), "fnstsw": ("rax",),
    "movs": ("rsi", "rdi", "rcx"), "stos": ("rdi", "rcx"), "lods": ("rsi", "rax", "rcx"),
    "cmps": ("rsi", "rdi", "rcx"), "scas": ("rdi", "rcx"),
}
STRING_OPS = {"movs": ("rsi", "rdi"), "stos": ("rdi",), "lods": ("rsi",),
              "cmps": ("rsi", "rdi"), "scas": ("rdi",)}
# 32-bit destinations these always write (and so zero-extend) -- see the docs
# for why e.g. bsf/bsr and shifts by CL are not here.
U32_WRITERS = {"mov", "movzx", "movsx", "movsxd", "lea", "add", "sub", "adc", "sbb",
               "and", "or", "xor", "inc", "dec", "neg", "not", "imul", "bswap",
               "popcnt", "lzcnt", "tzcnt", "crc32", "movbe",
               "adcx", "adox"} | {"cmov" + c for c in _CC[1:-1].split("|")}

# Instructions whose memory operand is always accessed when they complete
# (used to refine the base register: see module doc).
REFINING = {"mov", "movzx", "movsx", "movsxd", "add", "sub", "adc", "sbb", "and", "or",
            "xor", "cmp", "test", "inc", "dec", "neg", "not", "xchg", "xadd",
            "movss", "movsd", "movaps", "movups", "movapd", "movupd", "movdqa",
            "movdqu", "movq", "movd"}

# SIMD / x87 families (register-to-register or ordinary memory operands).
import re as _re  # noqa: E402

_SIMD_RE = _re.compile(
    r"^("
    r"mov(aps|apd|ups|upd|dqa|dqu|dqa32|dqa64|dqu8|dqu16|dqu32|dqu64|ss|sd|d|q|"
    r"hps|lps|hpd|lpd|hlps|lhps|sldup|shdup|ddup|mskps|mskpd|ntps|ntpd|ntdq|ntdqa|sh|w)"
    r"|(add|sub|mul|div|min|max|sqrt|rcp|rsqrt|and|andn|or|xor|unpckh|unpckl|shuf|"
    r"blend|blendv|round|dp|hadd|hsub|addsub|fmadd\d*|fmsub\d*|fnmadd\d*|fnmsub\d*|"
    r"fmaddsub\d*|fmsubadd\d*|getexp|scalef|rndscale|range|reduce|fixupimm|perm|"
    r"permil|compress|expand|broadcast|insert|extract|cmp\w*)(ps|pd|ss|sd|ph|sh)"
    r"|u?comis[sdh]"
    r"|cvt\w+"
    r"|p(add|sub|mull|mulh|mulu|muludq|mulhrsw|madd|maddubsw|maddwd|avg|min|max|abs|"
    r"sign|and|andn|andd|andq|andnd|andnq|or|ord|orq|xor|xord|xorq|cmpeq|cmpgt|cmp|"
    r"sll|srl|sra|slld|sllq|sllw|srld|srlq|srlw|srad|sraw|sraq|sllv|srlv|srav|shuf|"
    r"unpck|pack|movmsk|extr|insr|movzx|movsx|alignr|test|testm|testnm|blend|"
    r"broadcast|perm|sadbw|minpos|hadd|hsub|clmul|ternlog|lzcnt|rol|ror|"
    r"movzb|movzw|movzd|movsb|movsw|movsd|movb|movw|movd|movq|shufb|shufd|shufhw|shuflw|"
    r"cmpistri|cmpestri|cmpistrm|cmpestrm|popcnt|conflict|expand|compress|opcnt)\w*"
    r"|aes\w+|sha\w+|gf2p8\w+|insertps|extractps|ptest|testps|testpd"
    r"|inserti\w+|insertf\w+|extracti\w+|extractf\w+|perm2\w+|broadcast\w+|k\w+"
    r")$")
_X87_RE = _re.compile(
    r"^f(ld|ld1|ldz|ldpi|ldl2e|ldl2t|ldlg2|ldln2|st|stp|ild|ist|istp|isttp|add|addp|"
    r"iadd|sub|subp|subr|subrp|isub|isubr|mul|mulp|imul|div|divp|divr|divrp|idiv|idivr|"
    r"chs|abs|sqrt|xch|com|comp|compp|ucom|ucomp|ucompp|comi|comip|ucomi|ucomip|"
    r"tst|xam|rndint|scale|prem|prem1|xtract|sin|cos|sincos|ptan|patan|2xm1|yl2x|"
    r"yl2xp1|nstsw|cmov\w+|free|incstp|decstp|nop|nclex|ninit)$")


def _classify(mnemonic):
    """"int", "simd", "x87", "string", "branch", or None (not allowed)."""
    if mnemonic in INT_OPS:
        return "int"
    if mnemonic in STRING_OPS:
        return "string"
    if mnemonic in JCC or mnemonic in ("jmp", "call", "ret"):
        return "branch"
    if mnemonic.startswith("maskmov"):      # stores through rdi, unchecked
        return None
    if _SIMD_RE.match(mnemonic):
        return "simd"
    if _X87_RE.match(mnemonic):
        return "x87"
    return None


# ---------------------------------------------------------------- judgement


class Context:
    """What the judgement needs beyond the state: the decoded text."""

    def __init__(self, starts, text_lo, text_hi, delta, stop=None):
        self.starts = starts          # set of instruction start offsets
        self.text_lo = text_lo        # file offsets of the validated range
        self.text_hi = text_hi
        self.delta = delta            # vaddr = offset + delta
        self.stop = stop              # the first instruction off the list, if any


class Outcome(NamedTuple):
    state: dict
    falls_through: bool       # False after jmp / indirect jmp
    direct_target: object     # file offset of a direct jump/call target or None


_PREFIX_CACHE = {}


def _prefix_check(insn, is_transfer):
    """The prefix rule; it depends only on the bytes (memoized)."""
    key = (insn.raw, is_transfer)
    hit = _PREFIX_CACHE.get(key, key)
    if hit is key:
        try:
            _prefix_check_raw(insn, is_transfer)
            hit = None
        except Violation as v:
            hit = (v.rule, v.message)
        if len(_PREFIX_CACHE) < 1 << 16:
            _PREFIX_CACHE[key] = hit
    if hit is not None:
        raise Violation(*hit)


def _prefix_check_raw(insn, is_transfer):
    p = scan_prefixes(insn.raw)
    seen = {}
    for b in p.legacy:
        seen[b] = seen.get(b, 0) + 1
    if 0x65 in seen:
        raise Violation("segment", "GS segment override")
    for b, n in seen.items():
        if n > 1 and not (b == 0x66 and insn.mnemonic == "nop"):
            raise Violation("prefix", f"legacy prefix {b:#04x} repeated")
    if 0xF2 in seen and 0xF3 in seen:
        raise Violation("prefix", "both F2 and F3")
    if sum(seen.get(s, 0) for s in (0x2E, 0x36, 0x3E, 0x26, 0x64)) > 1:
        raise Violation("prefix", "more than one segment prefix")
    if is_transfer and p.legacy:
        raise Violation("prefix", "legacy prefix on a control transfer "
                                  "(decoders and CPUs disagree on e.g. 66 e9)")
    if any(w.startswith("rex") for w in insn.prefixes):
        raise Violation("prefix", "REX prefix that has no effect (misplaced)")
    if len(insn.raw) > 15:
        raise Violation("decode", "instruction longer than 15 bytes")
    if 0x64 in seen and not any(isinstance(o, Mem) for o in insn.operands):
        raise Violation("prefix", "FS prefix without a memory operand")
    if 0x67 in seen and insn.mnemonic not in ("nop",) and not any(
            isinstance(o, Mem) for o in insn.operands) and insn.mnemonic not in STRING_OPS:
        raise Violation("prefix", "address-size prefix without a memory operand")


def _ea(mem, state, next_vaddr):
    """The effective-address interval of ``mem`` (integers, unwrapped)."""
    if mem.addr32:
        return 0, (1 << 32) - 1
    if mem.absolute or (mem.base is None and mem.index is None):
        return mem.disp, mem.disp
    if mem.base == "rip":
        v = next_vaddr + mem.disp
        return v, v
    lo = hi = mem.disp
    if mem.base is not None:
        t = state[mem.base]
        lo, hi = lo + t.lo, hi + t.hi
    if mem.index is not None:
        t = state[mem.index]
        lo, hi = lo + t.lo * mem.scale, hi + t.hi * mem.scale
    return lo, hi


def check_mem(mem, state, next_vaddr, what="memory operand"):
    """The memory rule for one operand; return the EA interval."""
    if mem.seg == "gs":
        raise Violation("segment", "GS segment override")
    lo, hi = _ea(mem, state, next_vaddr)
    extra = TOP if mem.seg == "fs" else 0
    if lo < 0:
        raise Violation("memory", f"{what}: the address may be negative, i.e. wrap "
                                  f"into the upper half (lowest {_signed(lo)})")
    if hi + extra >= LIMIT:
        regs = [r for r in (mem.base, mem.index) if r and r != "rip"]
        why = "; ".join(f"{r}: {state[r]}" for r in regs) or "absolute address"
        raise Violation("memory", f"{what}: the address is not provably below "
                                  f"{LIMIT:#x} ({why})")
    return lo, hi


def _signed(v):
    return f"-{-v:#x}" if v < 0 else f"{v:#x}"


def _refine(state, mem, n=1):
    """After a successful access to ``[ea, ea+n)``: G <= ea <= TOP - n."""
    if mem.addr32 or mem.absolute or mem.seg == "fs" or mem.base in (None, "rip") \
            or mem.index is not None:
        return
    t = state[mem.base]
    lo = max(t.lo, G - mem.disp)
    hi = min(t.hi, TOP - n - mem.disp)
    if lo <= hi:
        state[mem.base] = Ty(lo, hi, t.al)


def _stack_access(state, delta_before, what):
    """Push (delta -8) or pop (delta 0) accesses [rsp+delta, rsp+delta+8)."""
    t = state["rsp"]
    lo, hi = t.lo + delta_before, t.hi + delta_before
    if lo < 0 or hi >= LIMIT:
        raise Violation("stack", f"{what}: RSP {t} may put the access outside "
                                 f"[0, {LIMIT:#x})")
    lo2 = max(t.lo, G - delta_before)
    hi2 = min(t.hi, TOP - 8 - delta_before)
    state["rsp"] = Ty(lo2, hi2, t.al) if lo2 <= hi2 else t


def require_isp(state, where):
    if not state["rsp"].within(I_SP.lo, I_SP.hi):
        raise Violation("stack", f"RSP must have the stack type [{G:#x}, {TOP:#x}] "
                                 f"{where}, but it is {state['rsp']} (probe it with an "
                                 f"access at (%rsp) first)")


def _imm_signed(v, size):
    bits = size * 8
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _value_after(mn, ops, state, insn, next_vaddr):
    """The type of the first operand (a GPR) after ``mn``; precise for the
    forms the rules use, else Any / U32."""
    dst = ops[0]
    size = dst.size
    src = ops[1] if len(ops) > 1 else None
    cur = state[dst.canon]
    if size == 8:
        if mn in ("mov", "movabs"):
            if isinstance(src, Reg) and src.size == 8:
                return state[src.canon]
            if isinstance(src, Imm):
                return exact(src.value)
        if mn == "lea" and isinstance(src, Mem):
            if src.addr32:
                return U32
            if src.base == "rip" and not src.absolute:
                return exact(next_vaddr + src.disp)
            lo, hi = _ea(src, state, next_vaddr)
            al = 0
            if src.base and src.index is None:
                al = min(state[src.base].al, _tz(src.disp & U64))
            return ty(lo, hi, al)
        if mn in ("add", "sub") and src is not None:
            if isinstance(src, Imm):
                k = _imm_signed(src.value, 8)
                k = k if mn == "add" else -k
                return ty(cur.lo + k, cur.hi + k, min(cur.al, _tz(k & U64)))
            if isinstance(src, Reg) and src.size == 8:
                s = state[src.canon]
                if mn == "add":
                    return ty(cur.lo + s.lo, cur.hi + s.hi, min(cur.al, s.al))
                return ty(cur.lo - s.hi, cur.hi - s.lo, min(cur.al, s.al))
        if mn == "and" and isinstance(src, Imm):
            m = src.value & U64
            if m < 1 << 63:
                return Ty(0, min(cur.hi, m), max(cur.al, _tz(m)))
            inv = (~m) & U64
            if inv & (inv + 1) == 0:          # m = -2^k: round down
                k = inv.bit_length()
                return Ty((cur.lo >> k) << k, (cur.hi >> k) << k, max(cur.al, k))
            return ty(max(0, cur.lo - inv), cur.hi, max(cur.al, _tz(m)))
        if mn == "btr" and isinstance(src, Imm) and src.value & 63 == 63:
            if cur.hi < 1 << 63:
                return cur
            return Ty(0, (1 << 63) - 1, cur.al)
        if mn == "shr" and isinstance(src, Imm) and src.value & 63:
            n = src.value & 63
            return Ty(cur.lo >> n, cur.hi >> n, max(0, cur.al - n))
        if mn in ("movzx",):
            return Ty(0, (1 << (8 * _src_size(src))) - 1) if _src_size(src) else ANY
        return ANY
    if size == 4:
        if mn == "mov" and isinstance(src, Imm):
            return exact(src.value & 0xFFFFFFFF)
        if mn == "mov" and isinstance(src, Reg) and src.size == 4:
            s = state[src.canon]
            return s if s.hi < 1 << 32 else U32
        if mn in ("xor", "sub") and isinstance(src, Reg) and src.canon == dst.canon:
            return exact(0)
        if mn == "and" and isinstance(src, Imm):
            m = src.value & 0xFFFFFFFF
            hi = min(m, cur.hi) if cur.hi < 1 << 32 else m
            return Ty(0, hi, max(_tz(m) if m else 63, cur.al if cur.hi < 1 << 32 else 0))
        if mn == "movzx":
            return Ty(0, (1 << (8 * _src_size(src))) - 1) if _src_size(src) else U32
        if mn in ("shl", "shr", "sar", "rol", "ror", "sal") and isinstance(src, Imm) \
                and src.value & 31:
            if mn == "shr" and cur.hi < 1 << 32:
                n = src.value & 31
                return Ty(cur.lo >> n, cur.hi >> n)
            return U32
        if mn in U32_WRITERS:
            return U32
        return ANY
    return ANY


def _src_size(src):
    if isinstance(src, (Reg, Mem)):
        return src.width if isinstance(src, Mem) else src.size
    return 0


def _rsp_update(insn, state, next_vaddr):
    """The allowed explicit writes of RSP; raise otherwise."""
    mn, ops = insn.mnemonic, insn.operands
    dst = ops[0]
    if dst.size != 8:
        raise Violation("stack", f"{dst.name} written: a partial write of RSP")
    if mn in ("add", "sub", "lea", "mov", "and") and len(ops) == 2:
        src = ops[1]
        if mn == "mov" and not isinstance(src, Reg):
            raise Violation("stack", "RSP loaded from memory or an immediate")
        if mn in ("add", "sub") and isinstance(src, Mem):
            raise Violation("stack", "RSP changed by a memory operand")
        if mn == "and" and not isinstance(src, Imm):
            raise Violation("stack", "RSP masked by a non-immediate")
        if mn == "lea" and (not isinstance(src, Mem) or src.base == "rip" or src.addr32):
            raise Violation("stack", "RSP set by a RIP-relative or 32-bit lea")
        t = _value_after(mn, ops, state, insn, next_vaddr)
        if t == ANY or t.hi >= LIMIT:
            raise Violation("stack", f"`{insn.text}` may set RSP anywhere "
                                     f"(wrap-around or an untyped source)")
        return t
    raise Violation("stack", f"`{mn}` may set RSP arbitrarily")


class _Fall(NamedTuple):
    state: object = None
    falls_through: bool = True
    direct_target: object = None


_FALL = _Fall()


def vector_encoding(raw):
    """``"vex"``, ``"evex"`` or ``"xop"`` if ``raw`` is so encoded, else None.

    After any run of legacy and REX prefix bytes: in 64-bit mode C4 and C5
    always start a VEX prefix and 62 an EVEX one; 8F starts an XOP prefix
    unless its next byte has ModRM.reg 0 (pop r/m).
    """
    i = 0
    while i < len(raw) and (raw[i] in LEGACY_PREFIXES or 0x40 <= raw[i] <= 0x4F):
        i += 1
    b = raw[i] if i < len(raw) else None
    if b in (0xC4, 0xC5):
        return "vex"
    if b == 0x62:
        return "evex"
    if b == 0x8F and i + 1 < len(raw) and raw[i + 1] & 0x38:
        return "xop"
    return None


def encoding_checks(insn, raw=None):
    """The refusals no state can change: a VEX/EVEX/XOP encoding, an
    instruction the decoder cannot read, one off the allow-list, prefixes
    that decoders read differently.  Returns the class of an allowed
    instruction ("int", "simd", "x87", "string", "branch", or "nop").

    ``raw``: the text's bytes from the instruction's start (at most 16, not
    past the text), if the caller has them.  The encoding test reads them
    rather than the decoder's instruction, so that it does not depend on
    where the decoder ends an instruction it cannot read."""
    enc = vector_encoding(insn.raw if raw is None else raw)
    if enc:
        raise Violation("instruction", f"{enc.upper()}-encoded instructions (AVX, "
                                       f"AVX-512, BMI, XOP) are not on the allow-list")
    if not insn.mnemonic:
        raise Violation("decode", f"undecodable bytes ({insn.error}): {insn.text}")
    mn, ops = insn.mnemonic, insn.operands
    if mn == "nop":                      # padding: no access, no effect
        _prefix_check(insn, False)
        return "nop"
    if mn in PRIVILEGED:
        rule = "instruction" if mn in _NOT_TRULY_PRIV else "privileged"
        raise Violation(rule, f"`{mn}` is not allowed"
                        + (" (privileged or system state)" if rule == "privileged" else ""))
    if mn in ("jmpw", "callw", "retw", "jmpq", "callq", "retq"):
        raise Violation("prefix" if 0x66 in scan_prefixes(insn.raw).legacy else "indirect",
                        f"`{mn}`: operand-size prefix on a control transfer (CPUs "
                        f"differ: Intel ignores 66 on near branches, AMD truncates RIP)")
    cls = _classify(mn)
    for o in ops:
        if isinstance(o, OtherReg) and o.kind == "segment":
            raise Violation("segment" if mn == "mov" else "instruction",
                            f"segment register operand {o.name}")
        if isinstance(o, OtherReg) and o.kind == "system":
            raise Violation("privileged", f"control/debug register operand {o.name}")
    if cls is None:
        raise Violation("instruction", f"`{mn}` is not on the allow-list")
    _prefix_check(insn, cls == "branch")
    return cls


def allowed_encoding(insn, raw=None):
    """Does ``insn`` pass :func:`encoding_checks`?  The walk's first pass
    stops at the first instruction that does not: no decoder's reading of
    the bytes after it can matter (see checker.check_insns)."""
    try:
        encoding_checks(insn, raw)
    except Violation:
        return False
    return True


def judge(insn, state, ctx):
    """``state |- insn : state'``.  Returns an :class:`Outcome` (the state is
    updated in place) or raises :class:`Violation`."""
    cls = encoding_checks(insn)
    if cls == "nop":
        return _FALL
    mn, ops = insn.mnemonic, insn.operands
    next_vaddr = insn.end + ctx.delta

    if cls == "branch":
        return _judge_branch(insn, state, ctx)

    mems = [o for o in ops if isinstance(o, Mem)]
    if mn not in ("nop", "lea"):
        for m in mems:
            check_mem(m, state, next_vaddr)
    if any(m.seg == "gs" for m in mems):
        raise Violation("segment", "GS segment override")

    if cls == "string":
        if insn.prefixes and set(insn.prefixes) - {"rep", "repz", "repnz", "repe",
                                                   "repne", "addr32"}:
            raise Violation("prefix", "string instruction with a segment prefix")
        a32 = 0x67 in scan_prefixes(insn.raw).legacy
        for r in STRING_OPS[mn]:
            t = U32 if a32 else state[r]
            if t.hi >= 1 << 63:
                raise Violation("memory", f"`{mn}` walks from {r} of type {t}: bit 63 "
                                          f"must be provably clear (mask it, or use "
                                          f"the 0x67 prefix)")
        for r in IMPLICIT_WRITES[mn]:
            state[r] = ANY
        return Outcome(state, True, None)

    # stack instructions
    if mn == "push":
        if mems:
            raise Violation("instruction", "push from memory is not allowed")
        if 0x66 in scan_prefixes(insn.raw).legacy or (ops and isinstance(ops[0], Reg)
                                                      and ops[0].size != 8):
            raise Violation("stack", "16-bit push: RSP moves by 2, not 8")
        _stack_access(state, -8, "push")
        state["rsp"] = ty(state["rsp"].lo - 8, state["rsp"].hi - 8, 0)
        return Outcome(state, True, None)
    if mn == "pop":
        if mems or not ops or not isinstance(ops[0], Reg) or ops[0].size != 8:
            raise Violation("instruction", "pop only into a 64-bit register")
        if ops[0].canon == "rsp":
            raise Violation("stack", "pop %rsp sets RSP arbitrarily")
        _stack_access(state, 0, "pop")
        state["rsp"] = ty(state["rsp"].lo + 8, state["rsp"].hi + 8, 0)
        state[ops[0].canon] = ANY
        return Outcome(state, True, None)
    if mn == "syscall":
        require_isp(state, "at a system call")
        for r in IMPLICIT_WRITES[mn]:
            state[r] = ANY
        return Outcome(state, True, None)

    # written registers
    usage = INT_OPS.get(mn, "w")
    if mn == "imul" and len(ops) == 1:
        usage = "r"             # imul r/m: the operand is a source (edx:eax = eax * r/m)
    written = []
    if ops and usage in ("w", "rw2") and isinstance(ops[0], Reg):
        written.append(ops[0])
    if usage == "rw2" and len(ops) > 1 and isinstance(ops[1], Reg):
        written.append(ops[1])
    implicit = IMPLICIT_WRITES.get(mn, ())
    if mn == "imul" and len(ops) == 1:
        implicit = ("rax", "rdx")
    if "rsp" in implicit:
        raise Violation("stack", f"`{mn}` writes RSP")

    new = {}
    for w in written:
        if w.canon == "rsp":
            if usage == "rw2" or cls != "int":
                raise Violation("stack", f"`{mn}` may set RSP arbitrarily")
            new["rsp"] = _rsp_update(insn, state, next_vaddr)
        elif cls == "int" and w is ops[0] and usage == "w":
            new[w.canon] = _value_after(mn, ops, state, insn, next_vaddr)
        else:
            new[w.canon] = U32 if (w.size == 4 and cls == "int"
                                   and mn in U32_WRITERS and usage == "w") else ANY
    # refinement by the access (before the register updates: the address
    # was computed from the old values)
    if mn in REFINING:
        for m in mems:
            _refine(state, m, max(1, m.width))
    for r in implicit:
        state[r] = ANY
    state.update(new)
    return Outcome(state, True, None)


def _judge_branch(insn, state, ctx):
    mn, ops = insn.mnemonic, insn.operands
    if mn == "ret":
        raise Violation("ret", "ret takes its target from memory; use "
                               "pop %r11; and $-32, %r11d; jmp *%r11")
    if len(ops) != 1:
        raise Violation("indirect", f"odd operands for {mn}")
    op = ops[0]
    if mn == "call" and (insn.end + ctx.delta) % BUNDLE:
        raise Violation("call-align", "the call does not end at a bundle end: its "
                                      "return address would not be a bundle start")
    if isinstance(op, Imm):
        target = op.value
        if ctx.stop is not None and ctx.stop < target < ctx.text_hi:
            raise Violation("direct-target", f"target {target + ctx.delta:#x} lies past "
                                             f"the first instruction off the allow-list, "
                                             f"at {ctx.stop + ctx.delta:#x}")
        if not (ctx.text_lo <= target < ctx.text_hi) or target not in ctx.starts:
            raise Violation("direct-target", f"target {target + ctx.delta:#x} is not an "
                                             f"instruction start of the text")
        require_isp(state, "at a transfer")
        for r in IMPLICIT_WRITES.get(mn, ()):
            state[r] = ANY
        if mn == "call":
            _stack_access(state, -8, "call")
            state["rsp"] = ty(state["rsp"].lo - 8, state["rsp"].hi - 8)
        return Outcome(state, mn != "jmp", target)
    if mn not in ("jmp", "call"):
        raise Violation("indirect", f"{mn} with a non-immediate target")
    if isinstance(op, Mem):
        raise Violation("indirect", "memory-indirect transfer: the target is untyped")
    if not isinstance(op, Reg) or op.size != 8:
        raise Violation("indirect", "far or odd indirect transfer")
    t = state[op.canon]
    if t.hi >= TEXT_LIMIT or t.al < 5:
        raise Violation("indirect", f"target register {op.name} has type {t}; it needs "
                                    f"[0, 2^32) aligned to 32 (and $-32, %{op.canon}d "
                                    f"just before, in the same bundle)")
    require_isp(state, "at a transfer")
    if mn == "call":
        _stack_access(state, -8, "call")
        state["rsp"] = ty(state["rsp"].lo - 8, state["rsp"].hi - 8)
    return Outcome(state, mn != "jmp", None)
