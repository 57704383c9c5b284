"""Property-based evidence for Lemmas 1-2, Theorems 1-2 and Definition 1.

Random programs, states and mutants come from :mod:`kmltal.generator`
driven by ``random.Random`` with fixed seeds, so every run checks the same
cases and a failure is reproducible (``python3 -m kmltal random --seed N``
prints program N).
"""
import collections
import random

import pytest

from kmltal import checker, generator, kernel, machine, parser, program, soundness
from kmltal.machine import KERNEL, KERNEL_ERROR, USER, USER_ERROR, Error, State
from kmltal.syntax import format_module

K = kernel.example_kernel()
PROGRAMS = 160          # random well-typed programs
STATES = 4              # random initial states per program
STEPS = 200             # steps per run, each one re-checked


@pytest.fixture(scope="module")
def corpus():
    """``[(seed, module, program, CheckResult)]`` for the random programs.

    Each program is printed and parsed back before it is assembled, so the
    printer and parser are exercised on every generated construct.
    """
    out = []
    for seed in range(PROGRAMS):
        module = generator.ProgramGenerator(random.Random(seed)).module(K)
        text = format_module(module)
        reparsed = parser.parse(text)
        assert format_module(reparsed) == text
        p = program.assemble(reparsed, K)
        try:
            result = checker.check_program(p)
        except checker.TalTypeError as e:
            pytest.fail(f"generated program {seed} is ill-typed: {e}\n{text}")
        out.append((seed, reparsed, p, result))
    return out


def test_generated_programs_use_every_construct(corpus):
    seen = collections.Counter()
    for _, module, _, _ in corpus:
        for b in module.blocks:
            for i in b.instrs:
                seen[type(i).__name__] += 1
                if getattr(i, "annot", None) is not None:
                    seen["annotation"] += 1
                if getattr(getattr(i, "imm", None), "targs", ()):
                    seen["type arguments"] += 1
    for construct in ("Add", "Movi", "Mov", "Jmp", "Blt", "Ld", "St", "annotation",
                      "type arguments"):
        assert seen[construct] > 20, (construct, seen)


def test_lemmas_1_and_2_hold_at_every_step_at_kernel_privilege(corpus):
    """Theorem 2: well-formed states never reach kernel_error; each step is
    re-checked from scratch (preservation) after the machine stepped
    (progress).  A violation raises SoundnessViolation."""
    stats = collections.Counter()

    def observe(_n, s, w):
        stats["steps"] += 1
        if s.kernel.has(s.pc):
            stats["kernel calls"] += 1
        if w.theta:
            stats["steps in polymorphic code"] += 1
        if len(w.psi_d) > 0 and s.pc == kernel.MALLOC_ADDR:
            stats["malloc"] += 1

    for seed, _, p, result in corpus:
        rng = random.Random(1000 + seed)
        c = checker.make_checker(p)
        for _ in range(STATES):
            made = generator.random_state(p, result.points, rng, KERNEL)
            assert made is not None
            state, witness = made
            out = soundness.checked_run(c, state, witness, STEPS, observe)
            stats[out.reason] += 1
    assert stats["steps"] > 50000, stats
    for what in ("kernel calls", "steps in polymorphic code", "malloc", "halted",
                 "step limit"):
        assert stats[what] > 10, stats


def test_definition_1_malloc_keeps_well_formed_states_well_formed(corpus):
    """Psi_K |- K, condition 3, for malloc: from every well-formed state at
    its address it returns a well-formed state (never an error)."""
    for seed, _, p, result in corpus:
        rng = random.Random(2000 + seed)
        c = checker.make_checker(p)
        for _ in range(5):
            state, witness = generator.random_state(p, result.points, rng, KERNEL,
                                                    at_malloc=True)
            c.check_state(state, witness.psi_d, witness.gamma, witness.theta)
            nxt = machine.step(state)
            assert not isinstance(nxt, Error), (seed, nxt)
            w2 = soundness.next_witness(c, state, witness, nxt)
            c.check_state(nxt, w2.psi_d, w2.gamma, w2.theta)
            assert len(w2.psi_d) == len(witness.psi_d) + 1


@pytest.fixture(scope="module")
def mutants(corpus):
    """Ill-typed mutants, every kind for every program:
    ``[(seed, kind, block, program)]``."""
    out = []
    for seed, module, p, result in corpus:
        rng = random.Random(3000 + seed)
        for kind in generator.MUTATIONS:
            mutant, actual, block = generator.mutate(module, p, result.points, rng, kind)
            out.append((seed, actual, block, program.assemble(mutant, K)))
    return out


def test_ill_typed_programs_are_rejected(mutants):
    kinds = collections.Counter()
    for seed, kind, _, p in mutants:
        with pytest.raises(checker.TalTypeError) as e:
            checker.check_program(p)
        message = str(e.value)
        assert "(address " in message and "`" in message, (seed, kind, message)
        kinds[kind] += 1
    assert len(kinds) == len(generator.MUTATIONS), kinds


def test_without_the_check_ill_typed_programs_reach_kernel_error(mutants):
    """The check is necessary: run unchecked at kernel privilege from the
    mutated block, many mutants crash the kernel.  The same runs at user
    privilege (Theorem 1) end in user_error at the same step instead."""
    rng = random.Random(4)
    crashed = collections.Counter()
    for seed, kind, block, p in mutants:
        start = generator.label_state(p, rng, block, KERNEL)
        assert start is not None
        at_kernel = machine.run(start, 300)
        user_start = State(start.code, start.data, start.regs, start.pc, USER, start.kernel)
        at_user = machine.run(user_start, 300)
        assert at_user.final is not KERNEL_ERROR
        if at_kernel.final is KERNEL_ERROR:
            crashed[kind] += 1
            assert at_user.final is USER_ERROR and at_user.steps == at_kernel.steps
        else:
            assert at_user.reason == at_kernel.reason
    total = sum(crashed.values())
    assert total > len(mutants) // 5, crashed
    for kind in ("ld_int", "st_int", "jmp_int"):
        assert crashed[kind] > 30, crashed


def test_theorem_1_user_privilege_never_reaches_kernel_error():
    """Arbitrary states -- any code, registers, data and pc -- at user
    privilege never reach kernel_error; the same states at kernel privilege
    often do, which is what the hardware protection prevents."""
    rng = random.Random(5)
    kernel_errors_at_kernel = 0
    for _ in range(1500):
        s = generator.random_untyped_state(rng, K, USER)
        assert machine.run(s, 60).final is not KERNEL_ERROR
        k = State(s.code, s.data, s.regs, s.pc, KERNEL, s.kernel)
        kernel_errors_at_kernel += machine.run(k, 60).final is KERNEL_ERROR
    assert kernel_errors_at_kernel > 300


@pytest.mark.parametrize("priv", [USER, KERNEL])
def test_theorem_1_hypothesis_meta_functions_never_kernel_error(priv):
    """The kernel's meta-functions never alter the privilege level and never
    produce kernel_error, whatever the state (Theorem 1's hypothesis)."""
    rng = random.Random(6)
    for _ in range(2000):
        s = generator.random_untyped_state(rng, K, priv)
        for addr in K.entries:
            t = K.call(addr, State(s.code, s.data, s.regs, addr, priv, K))
            assert t is not KERNEL_ERROR
            if not isinstance(t, Error):
                assert t.priv == priv
