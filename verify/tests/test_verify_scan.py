"""The ELF reader and the admission scan on real and crafted binaries."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kmlverify import elf, policy, scanner

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None,
                                reason="objdump (binutils) is not installed")
REPO = Path(__file__).resolve().parents[2]
BUSYBOX = "/bin/busybox"
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"

# (label, instruction, mnemonic objdump prints, encoding prefix, severity)
BAD = [
    ("b_hlt", "hlt", "hlt", "f4", policy.WARNING),
    ("b_cli", "cli", "cli", "fa", policy.ERROR),
    ("b_sti", "sti", "sti", "fb", policy.ERROR),
    ("b_popf", "popfq", "popf", "9d", policy.ERROR),
    ("b_wrmsr", "wrmsr", "wrmsr", "0f 30", policy.ERROR),
    ("b_rdmsr", "rdmsr", "rdmsr", "0f 32", policy.ERROR),
    ("b_cr3", "mov %rax,%cr3", "mov", "0f 22 d8", policy.ERROR),
    ("b_cr0", "mov %cr0,%rax", "mov", "0f 20 c0", policy.ERROR),
    ("b_dr7", "mov %rax,%db7", "mov", "0f 23 f8", policy.ERROR),
    ("b_swapgs", "swapgs", "swapgs", "0f 01 f8", policy.ERROR),
    ("b_iretq", "iretq", "iretq", "48 cf", policy.ERROR),
    ("b_sysretq", "sysretq", "sysretq", "48 0f 07", policy.ERROR),
    ("b_sysenter", "sysenter", "sysenter", "0f 34", policy.ERROR),
    ("b_int80", "int $0x80", "int", "cd 80", policy.ERROR),
    ("b_mov_ds", "mov %ax,%ds", "mov", "8e d8", policy.ERROR),
    ("b_mov_ss", "mov %eax,%ss", "mov", "8e d0", policy.ERROR),
    ("b_pop_fs", "pop %fs", "pop", "0f a1", policy.ERROR),
    ("b_lss", "lss (%rax),%esp", "lss", "0f b2 20", policy.ERROR),
    ("b_lgdt", "lgdt (%rax)", "lgdt", "0f 01 10", policy.ERROR),
    ("b_lidt", "lidt (%rax)", "lidt", "0f 01 18", policy.ERROR),
    ("b_lldt", "lldt %ax", "lldt", "0f 00 d0", policy.ERROR),
    ("b_ltr", "ltr %ax", "ltr", "0f 00 d8", policy.ERROR),
    ("b_outb", "outb %al,$0x80", "out", "e6 80", policy.ERROR),
    ("b_inb", "inb $0x60,%al", "in", "e4 60", policy.ERROR),
    ("b_outdx", "out %al,(%dx)", "out", "ee", policy.ERROR),
    ("b_ljmp", "ljmp *(%rax)", "ljmp", "ff 28", policy.ERROR),
    ("b_lcall", "lcall *(%rax)", "lcall", "ff 18", policy.ERROR),
    ("b_lretq", "lretq", "lretq", "48 cb", policy.ERROR),
    ("b_invd", "invd", "invd", "0f 08", policy.ERROR),
    ("b_wbinvd", "wbinvd", "wbinvd", "0f 09", policy.ERROR),
    ("b_invlpg", "invlpg (%rax)", "invlpg", "0f 01 38", policy.ERROR),
    ("b_clts", "clts", "clts", "0f 06", policy.ERROR),
    ("b_xsetbv", "xsetbv", "xsetbv", "0f 01 d1", policy.ERROR),
    ("b_stac", "stac", "stac", "0f 01 cb", policy.ERROR),
]

# Instructions an ordinary kernel-mode process may execute.
ALLOWED = ["syscall", "int3", "ud2", "cpuid", "rdtsc", "xgetbv", "pause",
           "mov %fs:0x28,%rax", "mov %rax,%fs:0x10", "mov %fs,%eax", "mov %ds,(%rax)",
           "push %fs", "pop %rax", "rdfsbase %rax", "rdgsbase %rax", "wrfsbase %rax",
           "wrgsbase %rax", "lock incl (%rax)", "rep stosb", "syscall"]


def _asm_function(label, body):
    lines = [".pushsection .text", f".globl {label}", f".type {label},@function", f"{label}:"]
    lines += [f"\t{b}" for b in body] + [".popsection"]
    return "__asm__(" + " ".join(f'"{line}\\n"' for line in lines) + ");\n"


CRAFTED = "".join(_asm_function(label, [insn]) for label, insn, *_ in BAD) + \
    _asm_function("g_allowed", ALLOWED) + _asm_function("g_allowed_end", ["ret"]) + \
    "int main(void) { return 0; }\n"


@pytest.fixture(scope="module")
def crafted(compile_c):
    """A program whose never-called functions hold one bad instruction each."""
    return compile_c("crafted-bad", CRAFTED)


def symbols(path):
    """``{name: address}`` from binutils' nm, an oracle independent of our reader."""
    if shutil.which("nm") is None:
        pytest.skip("nm is not installed")
    out = subprocess.run(["nm", str(path)], capture_output=True, text=True, check=True).stdout
    return {parts[2]: int(parts[0], 16) for parts in (l.split() for l in out.splitlines())
            if len(parts) == 3}


# -- the ELF reader -------------------------------------------------------------

def test_elf_reader_on_a_dynamic_program():
    e = elf.parse("/bin/ls")
    assert e.interp == "/lib64/ld-linux-x86-64.so.2"
    assert "libc.so.6" in e.needed
    assert len(e.executable_segments()) == 1
    seg = e.executable_segments()[0]
    assert e.vaddr_to_offset(seg.vaddr + 16) == seg.offset + 16


def test_elf_reader_on_busybox():
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox-static is not installed")
    e = elf.parse(BUSYBOX)
    assert e.type == elf.ET_EXEC and e.interp is None and e.needed == []
    assert e.kind == "x86-64 ELF executable, statically linked"


def _header(ei_class=2, ei_data=1, machine=62, e_type=2):
    ident = b"\x7fELF" + bytes([ei_class, ei_data, 1]) + bytes(9)
    return ident + e_type.to_bytes(2, "little") + machine.to_bytes(2, "little") + bytes(44)


@pytest.mark.parametrize("data, message", [
    (b"#!/bin/sh\necho hi\n", "not an ELF file"),
    (b"", "not an ELF file"),
    (b"\x7fELF\x02", "truncated ELF file"),
    (_header(ei_class=1), "32-bit ELF file; only x86-64 ELF64 programs are supported"),
    (_header(ei_data=2), "big-endian"),
    (_header(machine=183), "not x86-64"),
    (_header(e_type=1), "neither an executable nor a shared object"),
    (_header()[:40], "truncated ELF file"),
])
def test_elf_reader_rejects_what_it_cannot_scan(tmp_path, data, message):
    f = tmp_path / "bad"
    f.write_bytes(data)
    with pytest.raises(elf.ElfError) as e:
        elf.parse(str(f))
    assert message in str(e.value)


# -- scans that must pass ------------------------------------------------------

def assert_clean(reports):
    for r in reports:
        assert r.passed(), (r.path, [(hex(f.offset), f.text) for f in r.findings][:10])
        assert r.instructions > 0
        assert all(f.mnemonic == "hlt" for f in r.findings)


def test_busybox_is_clean(scans):
    if not os.path.exists(BUSYBOX):
        pytest.skip("busybox-static is not installed")
    reports = scans(BUSYBOX)
    assert len(reports) == 1 and reports[0].instructions > 100000
    assert_clean(reports)


def test_glibc_and_its_interpreter_are_clean(scans):
    reports = scans(LIBC)
    assert [r.role for r in reports] == ["program", "interpreter"]
    assert reports[0].instructions > 100000
    assert_clean(reports)


def test_a_dynamic_program_with_all_its_libraries_is_clean(scans):
    reports = scans("/bin/ls")
    roles = [r.role for r in reports]
    assert roles[0] == "program" and "interpreter" in roles and roles.count("library") >= 1
    assert any(os.path.basename(r.path) == "libc.so.6" for r in reports)
    assert len({os.path.realpath(r.path) for r in reports}) == len(reports)   # once each
    assert_clean(reports)


PROJECT_PROGRAMS = [
    ("kml-probe", "guest/progs/kml-probe.c", ["-static"]),
    ("kml-probe-dyn", "guest/progs/kml-probe.c", []),
    ("kml-hello-dyn", "guest/progs/kml-hello-dyn.c", []),
    ("kml-preload.so", "guest/progs/kml-preload.c", ["-shared", "-fPIC"]),
]


@pytest.mark.parametrize("name, source, flags", PROJECT_PROGRAMS, ids=lambda x: str(x))
def test_the_projects_programs_are_clean(scans, compile_c, name, source, flags):
    src = REPO / source
    if not src.exists():
        pytest.skip(f"{source} is not in this checkout")
    binary = compile_c(name, src.read_text(), *flags)
    assert_clean(scans(str(binary)))


def test_the_projects_built_guest_programs_are_clean(scans):
    # Programs and shared objects (ET_EXEC, ET_DYN), not object files; in
    # ./kml's build directory (KML_BUILD_DIR, as host/kmltool/paths.py)
    guest = Path(os.environ.get("KML_BUILD_DIR", REPO / "build")) / "guest"
    built = sorted(p for p in guest.rglob("*")
                   if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"
                   and p.read_bytes()[16] in (2, 3)) if guest.is_dir() else []
    if not built:
        pytest.skip("build/guest has no programs (./kml build makes them)")
    for p in built:
        if p.name in DELIBERATELY_PRIVILEGED:
            continue
        assert_clean(scans(str(p)))


#: Guest tests that execute CPL-dependent instructions on purpose, with
#: some of the instructions the scan must flag in each: insn checks what a
#: kernel-mode process gets for them (docs/kernel-mode.md); addrspace's
#: kernel-mode peer reads CR4 and MSR_LSTAR at CPL 0; events' peer spins
#: with interrupts off for the CLI watchdog.
DELIBERATELY_PRIVILEGED = {"insn": {"int", "cli"}, "addrspace": {"mov", "rdmsr"},
                           "events": {"cli"}}


def test_the_deliberately_privileged_tests_are_flagged(scans):
    """The exception above is not a blind spot: the scan flags them."""
    for name, expected in DELIBERATELY_PRIVILEGED.items():
        p = REPO / "build" / "guest" / "tests" / name
        if not p.exists():
            pytest.skip(f"{p} not built (./kml build makes it)")
        report = scans(str(p))[0]
        flagged = {f.mnemonic for f in report.findings}
        assert expected <= flagged, (name, sorted(flagged))


# -- crafted bad programs ------------------------------------------------------------

def test_each_crafted_instruction_is_flagged_at_its_offset(crafted):
    report = scanner.scan([str(crafted)], follow_libs=False)[0]
    syms = symbols(crafted)
    data = crafted.read_bytes()
    by_vaddr = {f.vaddr: f for f in report.findings}
    for label, insn, mnemonic, encoding, severity in BAD:
        f = by_vaddr.get(syms[label])
        assert f is not None, f"{label} ({insn}) not flagged"
        assert f.mnemonic == mnemonic and f.severity == severity, (label, f)
        assert data[f.offset:f.offset + len(encoding.split())].hex(" ") == encoding, label
        assert f.symbol == label
    assert not report.passed()


def test_allowed_instructions_are_not_flagged(crafted):
    report = scanner.scan([str(crafted)], follow_libs=False)[0]
    syms = symbols(crafted)
    lo, hi = syms["g_allowed"], syms["g_allowed_end"]
    assert [f.text for f in report.findings if lo <= f.vaddr < hi] == []


def test_one_bad_instruction_fails_a_program_that_is_otherwise_clean(scans, compile_c):
    binary = compile_c("one-wrmsr", _asm_function("f", ["wrmsr"]) + "int main(void){return 0;}\n")
    reports = scans(str(binary))
    assert [r.passed() for r in reports] == [False] + [True] * (len(reports) - 1)
    assert [f.mnemonic for f in reports[0].findings if f.severity == policy.ERROR] == ["wrmsr"]


# -- library resolution --------------------------------------------------------------

@pytest.fixture(scope="module")
def fake_root(build_dir):
    """A directory tree standing in for a guest image: a program needing
    libfoo.so through ``$ORIGIN/../lib`` and an interpreter reached through
    an absolute symlink, neither of which exists on the host."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    root = build_dir / "root"
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "opt").mkdir()
    (root / "lib64").mkdir()
    src = build_dir / "foo.c"
    src.write_text("int foo(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-nostdlib", "-o", str(root / "lib" / "libfoo.so"),
                    str(src)], check=True)
    prog = build_dir / "prog.c"
    prog.write_text("int foo(void);\nvoid _start(void) { foo(); for (;;) ; }\n")
    subprocess.run(["gcc", "-nostdlib", "-o", str(root / "bin" / "prog"), str(prog),
                    "-L", str(root / "lib"), "-lfoo", "-Wl,--enable-new-dtags",
                    "-Wl,-rpath,$ORIGIN/../lib", "-Wl,--dynamic-linker=/lib64/ld-kml-test.so"],
                   check=True)
    shutil.copy(root / "lib" / "libfoo.so", root / "opt" / "ld-kml-test.so")
    os.symlink("/opt/ld-kml-test.so", root / "lib64" / "ld-kml-test.so")
    return root


def test_interpreter_and_libraries_resolve_inside_root(fake_root):
    reports = scanner.scan([str(fake_root / "bin" / "prog")], root=str(fake_root))
    paths = {r.role: r.path for r in reports}
    assert paths["interpreter"] == os.path.join(os.path.realpath(fake_root), "opt",
                                                "ld-kml-test.so")
    assert paths["library"] == os.path.join(os.path.realpath(fake_root), "lib", "libfoo.so")
    assert all(r.passed() for r in reports)


def test_walk_names_each_file_as_the_loader_opens_it(fake_root):
    """walk(): the dependency resolution alone (no disassembly), with the
    path the kernel or ld.so opens and the file that is there."""
    got = [(x.role, x.name, x.path, x.needed_by)
           for x in scanner.walk([str(fake_root / "bin" / "prog")], root=str(fake_root))]
    real = os.path.realpath(fake_root)
    prog = str(fake_root / "bin" / "prog")
    assert got == [("program", prog, prog, None),
                   ("interpreter", "/lib64/ld-kml-test.so",
                    os.path.join(real, "opt", "ld-kml-test.so"), prog),
                   ("library", "/bin/../lib/libfoo.so",
                    os.path.join(real, "lib", "libfoo.so"), prog)]


def test_missing_library_is_an_error(fake_root):
    with pytest.raises(scanner.ScanError, match="ld-kml-test.so"):
        scanner.scan([str(fake_root / "bin" / "prog")])        # no such interpreter on the host


def test_resolve_in_root_keeps_links_inside_root(tmp_path):
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "usr" / "lib" / "x").write_text("")
    os.symlink("/usr/lib", tmp_path / "lib")
    os.symlink("../../../../../../usr/lib/x", tmp_path / "up")
    root = os.path.realpath(tmp_path)
    assert scanner.resolve_in_root(str(tmp_path), "/lib/x") == os.path.join(root, "usr/lib/x")
    assert scanner.resolve_in_root(str(tmp_path), "/up") == os.path.join(root, "usr/lib/x")
