"""The textual syntax, the printer and the assembler."""
from pathlib import Path

import pytest

from kmltal import kernel, parser, program
from kmltal.machine import DATA_LO
from kmltal.syntax import Illegal, Ld, Movi, St, format_module
from kmltal.types import SizeOf, TupleT, INT

K = kernel.example_kernel()
EXAMPLES = Path(__file__).resolve().parents[1] / "kmltal" / "examples"


def assemble(text):
    return program.assemble(parser.parse(text), K)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.tal")), ids=lambda p: p.name)
def test_examples_print_and_reparse_identically(path):
    module = parser.parse(path.read_text())
    text = format_module(module)
    assert format_module(parser.parse(text)) == text


def test_instruction_forms():
    m = parser.parse(""".code
main: {r1: <int, int>}
    ld 1[r1], r2
    st r2, 0[r1]
    movi 2, r3 : sizeof(<int, int>)
    movi main[int], r4 ; comment
    illegal
""")
    instrs = m.blocks[0].instrs
    assert instrs[0] == Ld(1, 1, 2)
    assert instrs[1] == St(2, 0, 1)
    assert instrs[2].annot == SizeOf(TupleT((INT, INT)))
    assert instrs[3].imm.targs == (INT,)
    assert isinstance(instrs[4], Illegal)
    assert m.entry_label() == "main"


def test_layout_and_label_resolution():
    p = assemble(""".data
x: <int, int> = <1, 2>
e: <> = <>
y: <<int, int>> = <x>
.code
main: {}
    movi y, r1
    movi malloc, r2
    jmp r2
""")
    assert p.labels["x"] == DATA_LO and p.labels["e"] == DATA_LO + 2
    assert p.labels["y"] == DATA_LO + 3          # the empty tuple reserves a word
    assert p.data[DATA_LO + 3] == DATA_LO        # y's field points to x
    assert p.code[0] == Movi(p.code[0].imm, 1) and p.code[0].imm.value == DATA_LO + 3
    assert p.code[1].imm.value == kernel.MALLOC_ADDR
    assert isinstance(p.code[3], Illegal)        # code memory is total
    assert p.where(1) == "main+1 (address 1, line 8)"


@pytest.mark.parametrize("text, message", [
    (".code\nmain: {}\n    frob r1", "line 3: unknown instruction 'frob'"),
    (".code\nmain: {}\n    mov r1, r32", "line 3: expected a register r0..r31, found 'r32'"),
    (".code\nmain: {}\n    movi 4294967296, r1", "does not fit in a 32-bit word"),
    (".code\nmain: <int>\n", "code label 'main' needs a code type"),
    (".data\nx: <int> = <1, 2>\n", "'x' has type <int> (1 fields) but 2 initial words"),
    (".code\nmalloc: {}\n", "label 'malloc' is already defined (a kernel entry)"),
    (".code\n    jmp r1\n", "instruction before the first code label"),
    ("jmp r1\n", "expected .data or .code first"),
    (".code\nmain: {r1: sizeof(int)}\n", "sizeof applies to a tuple or a type variable"),
    (".code\nmain: forall[a, a]. {}\n", "repeated type variable"),
    (".code\nmain: {r1: int, r1: int}\n", "register r1 typed twice"),
])
def test_parse_errors_name_the_line(text, message):
    with pytest.raises(parser.ParseError) as e:
        parser.parse(text)
    assert message in str(e.value)


@pytest.mark.parametrize("text, message", [
    (".code\nmain: {}\n    movi nowhere, r1\n    jmp r1\n", "undefined label 'nowhere'"),
    (".code\nmain: {}\nnext: {}\n    movi 0, r1\n", "code label 'main' has no instructions"),
    (".entry start\n.code\nmain: {}\n    movi 0, r1\n", "entry label 'start'"),
])
def test_assembly_errors(text, message):
    with pytest.raises(program.AssemblyError) as e:
        assemble(text)
    assert message in str(e.value)
