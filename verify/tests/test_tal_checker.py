"""The static semantics: examples, each instruction rule, Appendix A, and
the error messages (instruction, location, expected and actual types)."""
from pathlib import Path

import pytest

from kmltal import checker, kernel, parser, program, soundness
from kmltal.checker import Checker, TalTypeError
from kmltal.machine import DATA_LO, KERNEL, State
from kmltal.parser import parse_type as ty
from kmltal.types import INT, TupleT

K = kernel.example_kernel()
EXAMPLES = Path(__file__).resolve().parents[1] / "kmltal" / "examples"


def load(text):
    return program.assemble(parser.parse(text), K)


def check(text):
    return checker.check_program(load(text))


def error_of(text):
    with pytest.raises(TalTypeError) as e:
        check(text)
    return str(e.value)


@pytest.mark.parametrize("name", ["malloc_pair", "poly_copy", "loop_sum"])
def test_good_examples_are_well_typed_and_halt(name):
    p = load((EXAMPLES / f"{name}.tal").read_text())
    result = checker.check_program(p)
    out = soundness.checked_run(checker.make_checker(p), p.initial_state(KERNEL),
                                soundness.Witness(dict(p.psi_d), result.gamma0), 1000)
    assert out.reason == "halted"


@pytest.mark.parametrize("name, fragments", [
    ("bad_ld_int", ["main+1 (address 1, line 7)", "`ld 0[r1], r2`",
                    "r1 has type int, expected a tuple type"]),
    ("bad_jmp_data", ["main+1", "`jmp r1`", "r1 has type int, expected a code type"]),
    ("bad_malloc_size", ["main (address 0, line 7)", "`movi 3, r0 : sizeof(<int, int>)`",
                         "the word 3 does not have type sizeof(<int, int>) (only 2 does)"]),
    ("bad_store", ["main+2", "`st r2, 0[r1]`",
                   "r2 has type int, but field 0 of r1 : <<int, int>> has type <int, int>"]),
    ("bad_fallthrough", ["main+2", "`illegal`", "no typing rule"]),
])
def test_bad_examples_are_rejected_with_precise_messages(name, fragments):
    message = error_of((EXAMPLES / f"{name}.tal").read_text())
    for f in fragments:
        assert f in message


PROLOGUE = """.data
pair: <int, int> = <1, 2>
box: <<int, int>> = <pair>
.code
"""


@pytest.mark.parametrize("body, fragment", [
    ("movi pair, r1\n ld 2[r1], r2", "offset 2 is out of range for r1 : <int, int> (2 fields)"),
    ("movi pair, r1\n add r1, r1, r2", "r1 has type <int, int>, expected int (or sizeof(...))"),
    ("mov r7, r1", "r7 has no type here"),
    ("movi pair, r1\n movi 0, r2\n blt r2, r2, r1",
     "r1 has type <int, int>, expected a code type"),
    ("movi 5, r1 : <int>", "the word 0x5 is not the address of a tuple in Psi_D"),
    ("movi pair, r1 : <int>", "points to a tuple of type <int, int>, not <int>"),
    ("movi 0, r1 : forall[]. {r1: int}", "does not instantiate to forall[]. {r1: int}"),
    ("movi pair[int], r1", "pair is not a code label, so it takes no type arguments"),
    ("movi main[int], r1", "has 0 type parameter(s), given 1 argument(s)"),
    ("movi 1, r1 : a", "the annotation a is not well-formed under [] (closed)"),
    ("movi target, r1\n jmp r1", "cannot jump to r1 : forall[]. {r4: <int, int>}: the target "
                                 "needs r4 : <int, int>, but r4 has no type here"),
    ("movi 3, r4\n movi target, r1\n jmp r1",
     "cannot jump to r1 : forall[]. {r4: <int, int>}: r4 has type int, expected <int, int>"),
    ("movi pair, r1\n movi 1, r2\n movi poly, r3\n jmp r3",
     "r2 has type int, expected sizeof(<int, int>) (instantiating a := <int, int>)"),
])
def test_instruction_rules_reject(body, fragment):
    text = PROLOGUE + "main: {}\n " + body + "\n movi halt, r9\n jmp r9\n" + \
        "target: {r4: <int, int>}\n movi halt, r9\n jmp r9\n" + \
        "poly: forall[a]. {r1: a, r2: sizeof(a)}\n movi halt, r9\n jmp r9\n"
    message = error_of(text)
    assert fragment in message, message
    assert "main" in message


def test_polymorphic_jump_and_partial_instantiation_are_accepted():
    check(PROLOGUE + """main: {}
    movi pair, r1
    movi 2, r2 : sizeof(<int, int>)
    movi poly, r3
    jmp r3
poly: forall[a]. {r1: a, r2: sizeof(a)}
    mov r2, r0
    mov r2, r5
    add r5, r5, r6
    movi k[a], r31
    movi malloc, r3
    jmp r3
k: forall[c, b]. {r0: c, r1: c, r31: b}
    movi halt, r3
    jmp r3
""")


def test_subtyping_forgets_extra_registers_at_jumps():
    check(PROLOGUE + """main: {}
    movi pair, r4
    movi 9, r5
    movi target, r1
    jmp r1
target: {r4: <int, int>}
    movi halt, r9
    jmp r9
""")


def test_store_needs_equal_types_and_keeps_gamma():
    check(PROLOGUE + """main: {}
    movi box, r1
    movi pair, r2
    st r2, 0[r1]
    ld 0[r1], r3
    ld 1[r3], r4
    add r4, r4, r4
    movi halt, r9
    jmp r9
""")


def test_entry_label_must_be_monomorphic_and_the_initial_state_well_formed():
    assert "must not be polymorphic" in error_of(
        ".code\nmain: forall[a]. {}\n movi halt, r1\n jmp r1\n")
    message = error_of(".code\nmain: {r1: <int>}\n movi halt, r2\n jmp r2\n")
    assert "initial state" in message and "register r1 = 0x0" in message


def make_checker(p):
    return Checker(p.code, p.psi_c, p.kernel, p.where)


def test_data_memory_type_rules():
    p = load(PROLOGUE + "main: {}\n movi halt, r1\n jmp r1\n")
    c = make_checker(p)
    c.check_psi_d(p.psi_d)
    with pytest.raises(TalTypeError, match="overlaps"):
        c.check_psi_d({DATA_LO: TupleT((INT, INT)), DATA_LO + 1: TupleT((INT,))})
    with pytest.raises(TalTypeError, match="not inside data memory"):
        c.check_psi_d({5: TupleT((INT,))})
    with pytest.raises(TalTypeError, match="not closed"):
        c.check_psi_d({DATA_LO: ty("<a>")})
    with pytest.raises(TalTypeError, match="field 0 = 0x1"):
        c.check_data({DATA_LO: 1}, {DATA_LO: ty("<<int>>")})


def test_code_and_kernel_signatures():
    p = load(PROLOGUE + "main: {}\n movi halt, r1\n jmp r1\n")
    with pytest.raises(TalTypeError, match="outside"):
        Checker(p.code, {1 << 30: ty("forall[]. {}")}, K).check_signatures()
    with pytest.raises(TalTypeError, match="not well-formed"):
        Checker(p.code, {0: ty("forall[]. {r1: a}")}, K).check_signatures()


def test_state_rule_at_a_kernel_entry():
    p = load(PROLOGUE + """main: {}
    movi halt, r1
    jmp r1
k: forall[b]. {r0: <int, int>, r1: <int, int>, r31: b}
    movi halt, r1
    jmp r1
""")
    c = make_checker(p)
    regs = [0] * 32
    regs[0], regs[1], regs[31] = 2, DATA_LO, p.labels["k"]
    s = State(p.code, dict(p.data), tuple(regs), kernel.MALLOC_ADDR, KERNEL, K)
    pair = ty("<int, int>")
    good = {0: ty("sizeof(<int, int>)"), 1: pair,
            31: ty("forall[b]. {r0: <int, int>, r1: <int, int>, r31: b}")}
    c.check_state(s, p.psi_d, good)
    with pytest.raises(TalTypeError, match="not an instance"):
        c.check_state(s, p.psi_d, {**good, 5: INT})            # STATE (2) needs equality
    with pytest.raises(TalTypeError, match="register r0"):
        c.check_state(s, p.psi_d, {**good, 0: ty("sizeof(<int>)")})
    with pytest.raises(TalTypeError, match="neither in code memory nor a kernel entry"):
        c.check_state(State(p.code, p.data, tuple(regs), DATA_LO, KERNEL, K), p.psi_d, {})
