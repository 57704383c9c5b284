"""kmlcc: C programs compiled to the rules of verified programs.

The oracle is the same source built the ordinary way: gcc with nolibc,
no rewriting.  Each program of verify/tests/cc/ must (a) pass the reference
checker when built by kmlcc and (b) print the same and exit the same as
its ordinary build, run natively here (user mode) from the same file name
with the same arguments, environment and input."""
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from kmlcc import cc, rewrite
from kmltal.x86 import check_file

CC_DIR = Path(__file__).resolve().parent / "cc"
PROGRAMS = sorted(p.stem for p in CC_DIR.glob("*.c"))


def need_toolchain():
    for tool in ("gcc", "as", "ld", "objdump"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    try:
        return cc.nolibc_dir()
    except cc.CcError as e:
        pytest.skip(str(e))


def ordinary_build(libc, sources, out):
    """The oracle: the same sources with gcc and nolibc, no rewriting."""
    subprocess.run(["gcc", "-O2", "-static", "-nostdlib", "-fno-stack-protector",
                    "-I", str(libc), "-include", "nolibc.h", "-o", str(out),
                    *map(str, sources), "-lgcc"], check=True, capture_output=True)


def run(exe, args=("one", "two words")):
    env = {"PATH": "/usr/bin:/bin", "KMLCC_TEST": "set"}
    return subprocess.run([f"./{exe.name}", *args], cwd=exe.parent, env=env,
                          capture_output=True, timeout=60, input=b"")


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_is_verified_and_behaves_as_its_ordinary_build(name, tmp_path):
    libc = need_toolchain()
    if platform.machine() != "x86_64":
        pytest.skip("runs x86-64 programs natively")
    src = CC_DIR / f"{name}.c"
    (tmp_path / "kml").mkdir()
    (tmp_path / "ref").mkdir()
    kml, ref = tmp_path / "kml" / name, tmp_path / "ref" / name
    r = cc.compile_program([src], kml)
    assert r.ok, r.line()
    assert check_file(str(kml)).ok
    ordinary_build(libc, [src], ref)
    got, want = run(kml), run(ref)
    assert (got.returncode, got.stdout, got.stderr) == \
        (want.returncode, want.stdout, want.stderr)
    assert got.stdout                        # the programs print something


# ---------------------------------------------------------------- the rewriter


def test_return_becomes_a_masked_jump_in_one_bundle():
    assert rewrite.rewrite_insn("\tret") == [
        "\t.bundle_lock", "\tpopq\t%r11", "\tandl\t$-32, %r11d", "\tjmp\t*%r11",
        "\t.bundle_unlock"]


def test_calls_end_at_a_bundle_end():
    direct = rewrite.rewrite_insn("\tcall\tfoo")
    assert direct[:2] == ["\t.p2align 5", "\t.nops 27"] and "\tcall\tfoo" in direct
    indirect = rewrite.rewrite_insn("\tcall\t*8(%rbx)")
    assert indirect[0] == "\tmovq\t8(%ebx), %r11"
    assert indirect[1:3] == ["\t.p2align 5", "\t.nops 25"]
    assert "\tcall\t*%r11" in indirect and "\tandl\t$-32, %r11d" in indirect


def test_memory_operands_use_32_bit_registers_except_rsp_and_rip():
    assert rewrite.rewrite_insn("\tmovq\t8(%rax,%rcx,8), %rdx") == \
        ["\tmovq\t8(%eax,%ecx,8), %rdx"]
    assert rewrite.rewrite_insn("\tmovl\tarr(,%r9,4), %eax") == ["\tmovl\tarr(,%r9d,4), %eax"]
    for same in ("\tmovq\t16(%rsp), %rax", "\tmovq\tx(%rip), %rax",
                 "\tleaq\t8(%rax,%rcx), %rdx", "\taddq\t%rax, %rbx"):
        assert rewrite.rewrite_insn(same) == [same]
    assert rewrite.rewrite_insn("\tmovq\t(%rsp,%rax,8), %rbx") == ["\tmovq\t(%esp,%eax,8), %rbx"]


def test_string_instructions_get_the_address_size_prefix():
    assert rewrite.rewrite_insn("\trep movsb") == ["\taddr32 rep movsb"]
    assert rewrite.rewrite_insn("\trep stosq %rax, %es:(%rdi)") == \
        ["\trep stosq\t%rax, %es:(%edi)"]


def test_stack_adjustments_are_probed_in_their_bundle():
    assert rewrite.rewrite_insn("\tsubq\t$40, %rsp") == \
        ["\t.bundle_lock", "\tsubq\t$40, %rsp", "\tmovq\t(%rsp), %r11", "\t.bundle_unlock"]


def test_rsp_set_from_a_register_is_zero_extended_and_probed_without_flags():
    seq = ["\t.bundle_lock", "\tmovl\t%ebp, %r11d", "\tmovq\t%r11, %rsp",
           "\tmovq\t(%rsp), %r11", "\t.bundle_unlock"]
    assert rewrite.rewrite_insn("\tleave") == seq + ["\tpopq\t%rbp"]
    assert rewrite.rewrite_insn("\tmovq\t%rbp, %rsp") == seq
    assert rewrite.rewrite_insn("\tleaq\t-16(%rbp), %rsp")[0] == "\tleaq\t-16(%rbp), %r11"
    assert rewrite.rewrite_insn("\tsubq\t%rax, %rsp")[:2] == \
        ["\tmovq\t%rsp, %r11", "\tsubq\t%rax, %r11"]
    assert rewrite.rewrite_insn("\tandq\t$-16, %rsp") == ["\tandq\t$-16, %rsp"]
    with pytest.raises(rewrite.RewriteError, match="RSP"):
        rewrite.rewrite_insn("\txchgq\t%rax, %rsp")


def test_an_instruction_after_a_label_on_its_line_is_rewritten():
    out = rewrite.rewrite("\t.text\n1:\tret\n")
    assert "1:" in out and "\tjmp\t*%r11" in out and "\tret" not in out


def test_nolibc_entry_is_dropped_for_crt0():
    asm = ("\t.text\n\t.weak\t_start\n\t.type\t_start, @function\n_start:\n\thlt\n"
           "\t.size\t_start, .-_start\n\t.globl\tmain\nmain:\n\tret\n")
    out = rewrite.rewrite(asm)
    assert "hlt" not in out and "_start:" not in out and "main:" in out


def test_a_c_error_is_reported_and_nothing_is_written(tmp_path, capsys):
    need_toolchain()
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return undeclared; }\n")
    out = tmp_path / "bad"
    assert cc.main([str(bad), "-o", str(out)]) == 2
    assert "gcc" in capsys.readouterr().err and not out.exists()


# ---------------------------------------------------------------- third-party


def _normalized(out):
    """nolibc-test's report without what differs from run to run: addresses
    (the kmlcc build's stack is below 4 GiB) and pids."""
    import re
    text = out.decode()
    text = re.sub(r"<0x[0-9a-f]+>", "<ADDR>", text)
    text = re.sub(r"= \d+ +\[OK\]", "= N [OK]", text)
    return re.sub(r" +\[", " [", text)


def test_nolibc_selftest_is_verified_and_reports_as_its_ordinary_build(tmp_path):
    """The kernel tree's nolibc test suite (about 1,600 lines, ~190 tests of
    system calls and libc functions), with its one privileged instruction
    removed: the `outb` to QEMU's exit port it executes when it runs as
    init, which the checker rightly refuses."""
    libc = need_toolchain()
    if platform.machine() != "x86_64":
        pytest.skip("runs x86-64 programs natively")
    suite = libc.parent.parent / "testing" / "selftests" / "nolibc"
    if not (suite / "nolibc-test.c").is_file():
        pytest.skip(f"{suite} has no nolibc-test.c")
    src = tmp_path / "nolibc-test.c"
    text = (suite / "nolibc-test.c").read_text()
    outb = '__asm__ volatile ("outb %%al, %%dx" :: "d"(0x501), "a"(0));'
    assert text.count(outb) == 1
    src.write_text(text.replace(outb, ";"))
    for f in ("nolibc-test-linkage.c", "nolibc-test-linkage.h"):
        shutil.copy(suite / f, tmp_path / f)
    (tmp_path / "kml").mkdir()
    (tmp_path / "ref").mkdir()
    kml, ref = tmp_path / "kml" / "nolibc-test", tmp_path / "ref" / "nolibc-test"
    r = cc.compile_program([src, tmp_path / "nolibc-test-linkage.c"], kml)
    assert r.ok, r.line()
    ordinary_build(libc, [src, tmp_path / "nolibc-test-linkage.c"], ref)
    got, want = run(kml, ()), run(ref, ())
    assert got.returncode == want.returncode
    assert _normalized(got.stdout + got.stderr) == _normalized(want.stdout + want.stderr)
    assert b"Total number of errors" in got.stdout
