"""The abstract machine: each case of Fig. 2, the kernel's meta-functions."""
import pytest

from kmltal import kernel, machine
from kmltal.machine import (DATA_HI, DATA_LO, KERNEL, KERNEL_ERROR, USER, USER_ERROR, WORD,
                            CodeMemory, State, step)
from kmltal.syntax import Add, Blt, Illegal, Imm, Jmp, Ld, Mov, Movi, St

K = kernel.example_kernel()


def state(instrs, regs=None, data=None, pc=0, priv=KERNEL):
    r = [0] * 32
    for i, v in (regs or {}).items():
        r[i] = v
    return State(CodeMemory(instrs), dict(data or {}), tuple(r), pc, priv, K)


def test_add_wraps_modulo_2_32():
    s = step(state([Add(1, 2, 3)], {1: WORD - 1, 2: 2}))
    assert s.regs[3] == 1 and s.pc == 1


def test_movi_and_mov():
    s = step(state([Movi(Imm(value=7), 4)]))
    assert s.regs[4] == 7 and s.pc == 1
    s = step(state([Mov(4, 5)], {4: 9}))
    assert s.regs[5] == 9 and s.regs[4] == 9


def test_jmp_and_blt_unsigned():
    assert step(state([Jmp(1)], {1: 42})).pc == 42
    taken = state([Blt(1, 2, 3)], {1: 1, 2: WORD - 1, 3: 17})
    assert step(taken).pc == 17
    not_taken = state([Blt(1, 2, 3)], {1: WORD - 1, 2: 1, 3: 17})
    assert step(not_taken).pc == 1


def test_ld_and_st_inside_data_memory():
    s = step(state([St(1, 2, 3)], {1: 99, 3: DATA_LO}))
    assert s.data == {DATA_LO + 2: 99}
    s = step(state([Ld(2, 3, 4)], {3: DATA_LO}, data={DATA_LO + 2: 5}))
    assert s.regs[4] == 5
    assert step(state([Ld(0, 3, 4)], {3: DATA_LO + 7})).regs[4] == 0   # unwritten cell
    original = state([St(1, 0, 3)], {1: 1, 3: DATA_LO})
    step(original)
    assert original.data == {}                                      # steps do not mutate


@pytest.mark.parametrize("addr", [0, DATA_LO - 1, DATA_HI, kernel.MALLOC_ADDR, WORD - 1])
@pytest.mark.parametrize("priv, err", [(KERNEL, KERNEL_ERROR), (USER, USER_ERROR)])
def test_memory_access_outside_data_is_error_p(addr, priv, err):
    assert step(state([Ld(0, 1, 2)], {1: addr}, priv=priv)) is err
    assert step(state([St(2, 0, 1)], {1: addr}, priv=priv)) is err


def test_address_computation_wraps():
    # R(rs) + w is computed modulo 2^32, so it can wrap into data memory
    s = step(state([Ld(DATA_LO + 1, 1, 2)], {1: WORD - 1}, data={DATA_LO: 8}))
    assert s.regs[2] == 8


@pytest.mark.parametrize("priv, err", [(KERNEL, KERNEL_ERROR), (USER, USER_ERROR)])
def test_pc_outside_code_and_kernel_is_error_p(priv, err):
    for pc in (DATA_LO, DATA_HI - 1, kernel.MALLOC_ADDR + 100):
        assert step(state([], pc=pc, priv=priv)) is err


@pytest.mark.parametrize("priv", [KERNEL, USER])
def test_illegal_is_always_user_error(priv):
    assert step(state([Illegal()], priv=priv)) is USER_ERROR
    assert step(state([], pc=5, priv=priv)) is USER_ERROR    # unfilled code memory


def test_malloc_allocates_copies_and_returns():
    data = {DATA_LO: 3, DATA_LO + 1: 4}
    s = state([], {0: 2, 1: DATA_LO, 31: 12}, data, pc=kernel.MALLOC_ADDR)
    t = step(s)
    assert t.regs[0] == DATA_LO + 2 and t.pc == 12 and t.priv == KERNEL
    assert t.data[DATA_LO + 2] == 3 and t.data[DATA_LO + 3] == 4
    assert t.regs[1:31] == s.regs[1:31]
    again = step(State(t.code, t.data, (2, DATA_LO + 2) + t.regs[2:], kernel.MALLOC_ADDR,
                       KERNEL, K))
    assert again.regs[0] == DATA_LO + 4                     # fresh memory each time


def test_malloc_of_zero_words_reserves_an_address():
    s = state([], {0: 0, 1: 12345, 31: 3}, pc=kernel.MALLOC_ADDR)
    t = step(s)
    u = step(State(t.code, t.data, (0,) + t.regs[1:], kernel.MALLOC_ADDR, KERNEL, K))
    assert t.regs[0] != u.regs[0]


@pytest.mark.parametrize("priv", [KERNEL, USER])
@pytest.mark.parametrize("n, src", [(3, 5), (3, DATA_HI - 2), (1 << 31, DATA_LO),
                                    (kernel.MALLOC_LIMIT + 1, DATA_LO)])
def test_malloc_refuses_bad_requests_with_user_error(priv, n, src):
    s = state([], {0: n, 1: src}, pc=kernel.MALLOC_ADDR, priv=priv)
    assert step(s) is USER_ERROR


def test_halt_is_a_fixed_point_and_run_reports_it():
    s = state([Movi(Imm(value=kernel.HALT_ADDR), 1), Jmp(1)])
    out = machine.run(s, 100)
    assert out.reason == "halted" and out.steps == 2 and out.final.pc == kernel.HALT_ADDR


def test_run_reports_errors_and_step_limits():
    assert machine.run(state([Illegal()]), 10).reason == "user_error"
    loop = state([Movi(Imm(value=0), 1), Jmp(1)])
    out = machine.run(loop, 50)
    assert out.reason == "step limit" and out.steps == 50
