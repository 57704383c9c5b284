"""Cycle estimates for ./kml pathlen's counted paths: per-instruction
costs of the costly instruction kinds (insn.COSTLY) per micro-architecture
family, each with its source, and the arithmetic that turns a counted
path into an estimate.

Everything here is an ESTIMATE, not a measurement: the machine this runs
on has no KVM and its guests run under QEMU TCG, which models no cycles.
A figure is used only where a published source gives one (SOURCES);
where none does, the kind is "no published figure": no cost is added for
it (it counts as an ordinary instruction) and it is listed as unpriced,
so the estimate is a lower bound for such paths.  Every other instruction counts CPI cycles (an assumption, stated
with the estimate).  REP string iterations (rep_iterations) are left out:
no source here gives a per-byte figure for REP STOSB on these cores.
Nothing here talks to a VM.
"""
import re

CPI = 1.0       # assumed cycles per ordinary instruction (see SOURCES["cpi"])

FAMILIES = {
    "skylake": "Skylake-SP / Cascade Lake (Intel Xeon Scalable, 1st and 2nd generation)",
    "icelake": "Ice Lake-SP (Intel Xeon Scalable, 3rd generation)",
    "zen2": "Zen 2 (AMD EPYC 7002, Rome)",
    "zen3": "Zen 3 (AMD EPYC 7003, Milan)",
}

# QEMU -cpu model names (qemu-system-x86_64 -cpu help) -> family
_MODEL_FAMILY = (
    (r"(Skylake|Cascadelake|Cooperlake)-", "skylake"),
    (r"Icelake-", "icelake"),
    (r"EPYC-Rome", "zen2"),
    (r"EPYC-Milan", "zen3"),
)

SOURCES = {
    "cpi": "assumption of this tool: 1 cycle per instruction for every instruction "
           "without a published figure (no per-path source; Garloff's getppid of 120 "
           "cycles without PTI on Skylake-SP implies about 0.5 cycles per instruction "
           "for the unmitigated entry path, so CPI 1 overstates simple paths)",
    "G": "Kurt Garloff, 2018, getppid in cycles on a Skylake-SP KVM guest: 120 without "
         "PTI, 520 with PTI and PCID, 1150 with PTI without PCID; 2380-3100 with IBRS "
         "in the kernel (as summarised in the project's shared/reference.md, "
         "'System call cost on x86-64')",
    "P": "Linux, Documentation/arch/x86/pti.rst, 'Overhead': a CR3 write costs "
         "'on the order of a hundred cycles'",
    "A": "Agner Fog, 'Instruction tables' (Skylake section): MFENCE reciprocal "
         "throughput about 33 clock cycles, LFENCE about 4, CPUID about 100-250",
}

# kind (as insn.msr_label() writes it; "serializing:cpuid" for CPUID) ->
# (cycles, source, how the figure follows from the source)
_INTEL_COMMON = {
    "MFENCE": (33, "A", "reciprocal throughput"),
    "LFENCE": (4, "A", "reciprocal throughput"),
    "serializing:cpuid": (100, "A", "lower end of 100-250"),
}
COSTS = {
    "skylake": {
        "CR3 write": (200, "G", "(520 - 120) / 2: PTI's two CR3 writes per system call, "
                                "with PCID, the trampoline code included"),
        "WRMSR 0x48 (SPEC_CTRL)": (930, "G", "(2380 - 520) / 2: IBRS's two SPEC_CTRL "
                                             "writes per system call, lower end"),
        **_INTEL_COMMON,
    },
    "icelake": {
        "CR3 write": (100, "P", "order of magnitude, not per family"),
        "serializing:cpuid": _INTEL_COMMON["serializing:cpuid"],
    },
    "zen2": {
        "CR3 write": (100, "P", "order of magnitude, not per family"),
    },
    "zen3": {
        "CR3 write": (100, "P", "order of magnitude, not per family"),
    },
}
# The costly kinds without a published per-family figure (left out of sums)
UNPRICED = ("SYSRET", "SWAPGS", "IRET", "POPF", "STAC", "CLAC", "VERW", "RDMSR",
            "WRMSR (other MSRs)", "CR4 write", "CR write", "serializing (LIDT, INVLPG, ...)",
            "SYSCALL")


def family_of(model):
    """The cost family of a QEMU CPU model, or None (max, and models
    without figures here)."""
    for rx, fam in _MODEL_FAMILY:
        if re.match(rx, model or ""):
            return fam
    return None


def _key(item):
    """The COSTS key of one costly instruction of a summary."""
    kind = item["kind"]
    if kind == "serializing" and item.get("insn", "").split(" ")[0] == "cpuid":
        return "serializing:cpuid"
    return kind


def price(item, family):
    """(cycles, source) of one costly instruction ({"kind", "insn"}), or
    (None, None) without a published figure."""
    c = COSTS.get(family, {}).get(_key(item))
    return (c[0], c[1]) if c else (None, None)


def estimate(cell, family):
    """The estimate of one counted path (a pathlen cell: instructions and
    its costly instructions): {"cycles", "ordinary", "priced", "unpriced",
    "sources", "cpi"}.  cycles = ordinary instructions x CPI + the
    published costs of the priced ones; unpriced: {kind: n} of costly
    instructions without a figure (counted as ordinary instructions, at
    CPI: no published cost is added for them)."""
    priced, unpriced, sources, extra = 0, {}, {"cpi"}, 0
    for item in cell.get("costly", []):
        cycles, src = price(item, family)
        if cycles is None:
            unpriced[item["kind"]] = unpriced.get(item["kind"], 0) + 1
        else:
            priced += 1
            extra += cycles
            sources.add(src)
    ordinary = cell["instructions"] - priced
    return {"cycles": round(ordinary * CPI + extra), "ordinary": ordinary, "priced": priced,
            "priced_cycles": extra, "unpriced": unpriced, "cpi": CPI,
            "sources": sorted(sources)}


def table(family):
    """[{kind, cycles, source, how}] of a family, for the report."""
    return [{"kind": "CPUID (serializing)" if k == "serializing:cpuid" else k,
             "cycles": c, "source": s, "how": how}
            for k, (c, s, how) in COSTS.get(family, {}).items()]
