"""The rules for verified x86-64 programs (kmltal.x86): conforming programs
pass, a hand-written violation of every rule is refused with that rule's
name at the right offset, and seeded mutants of the conforming programs are
refused or still satisfy an independent, simpler re-check."""
import platform
import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from kmltal import cli
from kmltal.x86 import RULES, check_file, checker, decode, rules

CORPUS = Path(__file__).resolve().parent / "x86"
OK = sorted(p.stem for p in CORPUS.glob("ok_*.s"))
BAD = sorted(p.stem for p in CORPUS.glob("bad_*.s"))


def need_binutils():
    for tool in ("as", "ld", "objdump", "nm"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (binutils)")


def headers(src):
    out = {}
    for line in src.read_text().splitlines():
        m = re.match(r"#\s*(expect|exit|ld|offset|patch):\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def phdr_offset(data, spec):
    """``phdr:N``, ``phdr:last`` or ``phdr:text`` -> file offset of that header."""
    _, phdrs = checker.read_elf_any(data)
    which = spec.split(":", 1)[1]
    if which == "last":
        return phdrs[-1].at
    if which == "text":
        return next(p.at for p in phdrs if p.type == 1 and p.flags & 1)
    return phdrs[int(which)].at


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("kmltal-x86")
    cache = {}

    def get(name, source=None):
        need_binutils()
        if name in cache:
            return cache[name]
        src = CORPUS / f"{name}.s"
        if source is not None:
            src = out_dir / f"{name}.s"
            src.write_text(source)
        h = headers(src)
        obj, exe = out_dir / f"{name}.o", out_dir / name
        subprocess.run(["as", "-I", str(CORPUS), "-o", str(obj), str(src)], check=True,
                       capture_output=True)
        subprocess.run(["ld", "-static", *h.get("ld", "").split(), "-o", str(exe), str(obj)],
                       check=True, capture_output=True)
        if "patch" in h:
            where, hexbytes = h["patch"].split()
            data = bytearray(exe.read_bytes())
            at = phdr_offset(bytes(data), where) if where.startswith("phdr") else int(where, 0)
            patch = bytes.fromhex(hexbytes)
            data[at:at + len(patch)] = patch
            exe.write_bytes(bytes(data))
        syms = {}
        nm = subprocess.run(["nm", str(obj if "patch" in h else exe)], capture_output=True,
                            text=True)
        for line in nm.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                syms[parts[2]] = int(parts[0], 16)
        cache[name] = (exe, h, syms)
        return cache[name]
    return get


def text_delta(path):
    entry, phdrs = checker.read_elf_any(Path(path).read_bytes())
    t = next(p for p in phdrs if p.type == 1 and p.flags & 1)
    return t.vaddr - t.offset


# ---------------------------------------------------------------- conforming


@pytest.mark.parametrize("name", OK)
def test_conforming_program_passes(build, name):
    exe, h, _ = build(name)
    r = check_file(str(exe))
    assert r.ok, r.line()
    assert r.instructions > 0 and r.bundles == 128


@pytest.mark.parametrize("name", [n for n in OK if n != "ok_misc"])
def test_conforming_program_runs(build, name):
    """The discipline's sequences (masked returns, calls at bundle ends,
    probes) really work: run the programs natively (user mode)."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("needs x86-64 Linux")
    exe, h, _ = build(name)
    proc = subprocess.run([str(exe)], capture_output=True, timeout=10)
    assert proc.returncode == int(h["exit"])


# ---------------------------------------------------------------- violations


def test_every_rule_has_a_violation_in_the_corpus():
    expected = {headers(CORPUS / f"{n}.s")["expect"] for n in BAD}
    assert expected == set(RULES)


@pytest.mark.parametrize("name", BAD)
def test_violation_is_refused_with_its_rule_and_offset(build, name):
    exe, h, syms = build(name)
    r = check_file(str(exe))
    assert not r.ok, f"{name} was accepted"
    assert r.rule == h["expect"], r.line()
    if "offset" in h:
        spec = h["offset"]
        data = exe.read_bytes()
        want = phdr_offset(data, spec) if spec.startswith("phdr") else int(spec, 0)
        assert r.offset == want, r.line()
    else:
        bad = syms["bad"]
        assert r.vaddr == bad, r.line()
        assert r.offset == bad - text_delta(exe), r.line()


PRIVILEGED = ["hlt", "sti", "iretq", "sysretq", "sysenter", "int $0x80", "int3",
              "in $0x60, %al", "out %al, $0x80", "lgdt (%rsp)", "lidt (%rsp)", "wrmsr",
              "rdmsr", "rdpmc", "mov %cr0, %rax", "mov %rax, %dr7", "invlpg (%rsp)",
              "swapgs", "wrfsbase %rax", "wrgsbase %rax", "rdgsbase %rax", "xsetbv",
              "xrstors (%rsp)", "clac", "stac", "vmcall", "vmlaunch", "encls", "wbinvd",
              "clts", "ljmp *(%rsp)", "lret", "monitor", "mwait", "ltr %ax", "lldt %ax",
              "sgdt (%rsp)", "smsw %eax", "lss (%rsp), %esp", "invpcid (%rsp), %rax",
              "pconfig", "xsaves (%rsp)"]


@pytest.mark.parametrize("insn", PRIVILEGED)
def test_privileged_instructions_are_refused(build, insn):
    name = "gen_priv_" + re.sub(r"\W+", "_", insn)
    src = (f'        .include "kml.inc"\n        KBEGIN\n        .globl _start\n_start:\n'
           f'        nop\nbad:    {insn}\n        KEXIT $0\n        KEND\n')
    exe, _, syms = build(name, src)
    r = check_file(str(exe))
    assert not r.ok and r.vaddr == syms["bad"], r.line()
    assert r.rule in ("privileged", "indirect", "stack"), r.line()


# ---------------------------------------------------------------- units


def test_wraparound_of_a_small_base_is_caught():
    """base 0 (type exact 0) + disp -8 wraps to the upper half."""
    state = dict(rules.GAMMA0)
    state["rax"] = rules.exact(0)
    mem = decode.parse_operand("QWORD PTR [rax-0x8]")
    with pytest.raises(rules.Violation) as e:
        rules.check_mem(mem, state, 0x401000)
    assert e.value.rule == "memory"
    ok = decode.parse_operand("QWORD PTR [rax+0x8]")
    assert rules.check_mem(ok, state, 0x401000) == (8, 8)


def test_low_base_u32_index_positive_disp_stays_below_limit():
    state = dict(rules.GAMMA0)
    state["rsi"] = rules.Ty(0, (1 << 63) - 1)
    state["rcx"] = rules.U32
    mem = decode.parse_operand("DWORD PTR [rsi+rcx*8+0x7fffffff]")
    lo, hi = rules.check_mem(mem, state, 0x401000)
    assert hi < rules.LIMIT and hi + (1 << 20) < (1 << 64) - (1 << 56)


def test_limit_is_below_the_upper_half_in_both_paging_modes():
    for bits in (47, 56):
        upper = (1 << 64) - (1 << bits)
        assert rules.LIMIT + (1 << 40) <= upper
        assert rules.TOP >= 1 << bits or bits == 56


def test_mask_types():
    st = dict(rules.GAMMA0)

    def after(text):
        _, mn, ops = decode.parse_text(text)
        return rules._value_after(mn, ops, st, None, 0x401000)
    assert after("and r11d,0xffffffe0") == rules.Ty(0, 0xffffffe0, 5)
    assert after("btr rdi,0x3f") == rules.Ty(0, (1 << 63) - 1, 0)
    assert after("shr rax,0x1").hi == (1 << 63) - 1
    assert after("mov ecx,ecx") == rules.U32
    assert after("bsf eax,ecx") == rules.ANY          # may leave the upper half
    assert after("add rax,0x8") == rules.ANY          # Any + 8 may wrap


def test_parse_objdump_operands():
    pre, mn, ops = decode.parse_text("rep stos BYTE PTR es:[rdi],al")
    assert pre == ("rep",) and mn == "stos" and ops[0].base == "rdi"
    _, mn, ops = decode.parse_text("mov    rax,QWORD PTR [rip+0x10]        # 0x106c")
    assert ops[1].base == "rip" and ops[1].disp == 0x10
    _, _, ops = decode.parse_text("movzx  edi,BYTE PTR [rip+0xfffffffffffffff8]  # 401000")
    assert ops[1].base == "rip" and ops[1].disp == -8
    _, _, ops = decode.parse_text("mov    eax,DWORD PTR [eax*4-0x8]")
    assert ops[1].addr32 and ops[1].disp == -8


# ---------------------------------------------------------------- command line


def test_cli_exit_codes(build, capsys, tmp_path):
    good, _, _ = build("ok_syscall")
    bad, _, _ = build("bad_ret")
    assert cli.main(["x86", str(good)]) == 0
    assert re.fullmatch(rf"{re.escape(str(good))}: ok \(\d+ instructions, 128 bundles\)",
                        capsys.readouterr().out.strip())
    assert cli.main(["x86", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert re.search(r": offset 0x[0-9a-f]+ \(vaddr 0x[0-9a-f]+\): ret: ", out)
    assert cli.main(["x86", str(tmp_path / "missing")]) == 2
    assert cli.main(["x86"]) == 2
    junk = tmp_path / "junk"
    junk.write_text("not an elf\n")
    assert cli.main(["x86", str(junk)]) == 1
    assert ": offset 0x0" in capsys.readouterr().out


def test_cli_module_entry(build):
    good, _, _ = build("ok_array_loop")
    proc = subprocess.run(["python3", "-m", "kmltal", "x86", str(good)], capture_output=True,
                          text=True, cwd=str(Path(__file__).resolve().parents[1]))
    assert proc.returncode == 0 and proc.stdout.startswith(f"{good}: ok")


# ---------------------------------------------------------------- mutation

DENY = {"ret", "iret", "iretq", "cli", "sti", "hlt", "popf", "popfq", "syscall_bad",
        "sysret", "swapgs", "wrmsr", "rdmsr", "lgdt", "lidt", "int", "int3", "in", "out",
        "wrfsbase", "wrgsbase", "xsetbv", "invlpg", "clac", "stac", "leave", "enter",
        "lret", "ljmp", "lcall", "pop %rsp"}
_ATT_MEM = re.compile(r"(%[a-z]s:)?(-?0x[0-9a-f]+|-?\d+)?\((%[a-z0-9]+)?(?:,(%[a-z0-9]+)"
                      r"(?:,(\d))?)?\)")


def independent_recheck(path):
    """A simpler, syntactic re-check with a different decoding path (AT&T
    syntax through kmlverify's disassembler).  Returns a list of problems."""
    from kmlverify.disasm import disassemble
    entry, phdrs = checker.read_elf_any(Path(path).read_bytes())
    t = next(p for p in phdrs if p.type == 1 and p.flags & 1)
    lo = t.offset & ~4095
    hi = lo + (((t.vaddr + t.filesz + 4095) & ~4095) - (t.vaddr & ~4095))
    delta = (t.vaddr & ~4095) - lo
    insns = list(disassemble(str(path), lo, hi))
    starts = {i.offset for i in insns}
    targets = set()
    for x in insns:
        w = x.text.split()
        if len(w) > 1 and (w[0].startswith("j") or w[0] == "call") \
                and re.fullmatch(r"[0-9a-f]+", w[1]):
            targets.add(int(w[1], 16))
    problems = []
    masked = {}          # register -> how it was typed in this bundle
    bundle = None
    for k, i in enumerate(insns):
        n = len(i.raw.split())
        va = i.offset + delta
        if va // 32 != (va + n - 1) // 32:
            problems.append(f"{i.offset:#x} crosses a bundle")
        if va // 32 != bundle:
            bundle, masked = va // 32, {}
        words = i.text.split()
        while words and words[0] in ("rep", "repz", "repnz", "lock", "addr32", "data16",
                                     "cs", "ds", "fs"):
            words = words[1:]
        mn = re.sub(r"[bwlq]$", "", words[0]) if words else ""
        ops = words[1] if len(words) > 1 else ""
        if mn in DENY or words[0] in DENY or "%gs:" in i.text or "%cr" in i.text \
                or "%dr" in i.text:
            problems.append(f"{i.offset:#x} denied: {i.text}")
        if (mn.startswith("j") or mn == "call") and re.fullmatch(r"[0-9a-f]+( <.*>)?", ops):
            if int(ops.split()[0], 16) not in starts:
                problems.append(f"{i.offset:#x} target not a start: {i.text}")
            masked = {}
        if mn in ("jmp", "call") and ops.startswith("*"):
            reg = ops[1:]
            if "(" in ops or masked.get(reg) != "code":
                problems.append(f"{i.offset:#x} unmasked indirect: {i.text}")
            if i.offset in targets:
                problems.append(f"{i.offset:#x} mask skippable")
        if mn not in ("nop", "lea", "nopw", "nopl") and "(" in ops:
            for m in _ATT_MEM.finditer(ops):
                seg, disp, base, index = m.group(1), m.group(2), m.group(3), m.group(4)
                d = int(disp, 0) if disp else 0
                if index in ("%riz", "%eiz"):
                    index = None
                a32 = (base or "").startswith("%e") or (base or "").endswith("d")
                if a32:
                    continue
                if base == "%rip":
                    if va + n + d < 0:
                        problems.append(f"{i.offset:#x} rip wraps")
                    continue
                if base is None and index is None:
                    if d < 0:
                        problems.append(f"{i.offset:#x} negative absolute")
                    continue
                if base == "%rsp" or masked.get(base) == "stack":
                    ok_base = d >= -0x10000
                else:
                    ok_base = base in masked and d >= 0 or base is None
                if index is not None and masked.get(index) not in ("u32", "code"):
                    ok_base = False
                if not ok_base:
                    problems.append(f"{i.offset:#x} memory operand not masked: {i.text}")
        # what this instruction makes of its destination (AT&T: last operand)
        dst = ops.split(",")[-1] if ops else ""
        if dst.startswith("%"):
            src = ops.split(",")[0]
            r64 = {"%e" + x: "%r" + x for x in ("ax", "bx", "cx", "dx", "si", "di", "sp", "bp")}
            r64.update({f"%r{x}d": f"%r{x}" for x in range(8, 16)})
            if dst in r64:
                aligned = mn == "and" and src.startswith("$0x") and (
                    int(src[1:], 16) % 32 == 0 or masked.get(r64[dst]) == "code")
                masked[r64[dst]] = "code" if aligned else "u32"
            elif mn == "and" and src == "$0xffffffffffffffe0" \
                    and masked.get(dst) in ("code", "u32", "const"):
                masked[dst] = "code"
            elif mn == "lea" and "%rip" in src:
                m = re.match(r"(-?0x[0-9a-f]+)\(%rip\)", src)
                v = va + n + (int(m.group(1), 0) if m else 0)
                masked[dst] = "code" if v % 32 == 0 and 0 <= v < 1 << 32 else "const"
            elif mn == "mov" and src == "%rsp":
                masked[dst] = "stack"
            elif mn == "btr" and src == "$0x3f" or mn == "shr" or \
                    (mn == "and" and src.startswith("$0x") and len(src) <= 11) or \
                    (mn in ("mov", "movabs") and src.startswith("$")):
                masked[dst] = "low"
            else:
                masked.pop(dst, None)
        for r in ("%rax", "%rcx", "%rdx", "%rbx", "%rsi", "%rdi", "%r11"):
            if mn in ("cpuid", "rdtsc", "syscall", "mul", "div", "cmpxchg16b", "movs",
                      "stos", "cltq", "cqto", "cltd") and r in masked:
                masked.pop(r)
    return problems


def _mutants(exe, rng, count):
    data = exe.read_bytes()
    delta = text_delta(exe)
    code_end = 0x1000
    insns = decode.decode_file(str(exe), 0x1000, 0x2000)
    # the program proper: up to the page padding
    for i in reversed(insns):
        if i.mnemonic != "nop" or i.raw != b"\x90":
            code_end = i.end
            break
    branches = [i for i in insns if i.offset < code_end and i.operands
                and isinstance(i.operands[0], decode.Imm)
                and (i.mnemonic in rules.JCC or i.mnemonic in ("jmp", "call"))]
    inserts = [b"\xfa", b"\xf4", b"\x9d", b"\xc3", b"\x0f\x30", b"\x0f\x01\xf8",
               b"\x0f\x22\xd8", b"\xcd\x80", b"\x65\x48\x8b\x00", b"\x48\x89\xc4",
               b"\xff\xe0", b"\x48\x8b\x00"]
    for n in range(count):
        m = bytearray(data)
        kind = n % 4
        if kind == 0:                       # flip bits in the program
            at = rng.randrange(0x1000, code_end)
            m[at] ^= 1 << rng.randrange(8)
        elif kind == 1:                     # random byte
            at = rng.randrange(0x1000, code_end)
            m[at] = rng.randrange(256)
        elif kind == 2:                     # insert a privileged/unsafe sequence
            ins = rng.choice(inserts)
            at = rng.randrange(0x1000, code_end)
            m[at:at + len(ins)] = ins
        else:                               # retarget a direct branch
            b = rng.choice(branches) if branches else None
            if b is None:
                continue
            at = b.end - (4 if len(b.raw) >= 5 else 1)
            size = 4 if len(b.raw) >= 5 else 1
            rel = int.from_bytes(m[at:at + size], "little", signed=True) + rng.randint(-40, 40)
            try:
                m[at:at + size] = rel.to_bytes(size, "little", signed=True)
            except OverflowError:
                continue
        assert delta
        yield kind, bytes(m)


@pytest.mark.parametrize("name", OK)
def test_mutants_are_refused_or_still_conform(build, tmp_path, name):
    exe, _, _ = build(name)
    assert independent_recheck(exe) == []          # the re-check accepts the original
    rng = random.Random(f"kml-x86-{name}")
    refused = accepted = 0
    for n, (kind, data) in enumerate(_mutants(exe, rng, 60)):
        path = tmp_path / f"m{n}"
        path.write_bytes(data)
        r = check_file(str(path))                  # never raises
        assert r.rule is None or r.rule in RULES
        if r.ok:
            accepted += 1
            problems = independent_recheck(path)
            assert problems == [], (kind, problems)
        else:
            refused += 1
    assert refused > 0
