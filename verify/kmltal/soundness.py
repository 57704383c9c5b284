"""Lemmas 1-2 and Theorem 2, checked step by step on concrete runs.

A typing of a state needs witnesses: the data memory type Psi_D (it grows
when malloc allocates) and the register file type Gamma of the STATE rule.
:func:`next_witness` computes them for the successor state exactly as the
proof of preservation does -- from the rule of the instruction just
executed, or from the meta-function's :meth:`~kmltal.kernel.MetaFunc.witness`
-- and :func:`checked_run` re-checks ``Psi_K |- S'`` from scratch with them
after every step:

* Progress (Lemma 2): a well-formed state is not an error state and steps
  to some S' (the machine's step function is total on non-error states).
* Preservation (Lemma 1): ``Psi_K |- S'`` holds; in particular S' is not
  user_error or kernel_error, which are never well-formed.
* Theorem 2 follows along the run: kernel_error is never reached.

A failure raises :class:`SoundnessViolation`: it would be a bug in the
checker, the machine or a meta-function (a counterexample to the paper's
claims for this implementation).
"""

from dataclasses import dataclass, field

from .checker import RuleError, TalTypeError
from .machine import Error, Outcome, in_code, step
from .syntax import Blt, Jmp


class SoundnessViolation(Exception):
    """A well-formed state stepped to an error or to an ill-formed state."""


@dataclass
class Witness:
    """Psi_D, Gamma and theta for one state (see
    :meth:`kmltal.checker.Checker.check_state` for theta)."""

    psi_d: dict
    gamma: dict
    theta: dict = field(default_factory=dict)


def next_witness(checker, state, w, nxt):
    """The typing witness of ``nxt = step(state)`` given ``w`` for ``state``."""
    if state.kernel.has(state.pc):
        psi_d, gamma = state.kernel.entries[state.pc].witness(state, w.psi_d, w.gamma, nxt)
    else:
        instr = state.code[state.pc]
        psi_d = w.psi_d
        if isinstance(instr, Jmp):
            gamma = checker.jump_gamma((), w.gamma, instr.rs)
        elif isinstance(instr, Blt) and nxt.pc != state.pc + 1:
            gamma = checker.jump_gamma((), w.gamma, instr.rs3)
        else:
            return Witness(psi_d, checker.instr_rule(psi_d, (), w.gamma, instr, w.theta),
                           w.theta)
    theta = checker.label_theta(nxt.pc, gamma) if nxt.pc in checker.psi_c else {}
    return Witness(psi_d, gamma, theta)


def checked_run(checker, state, witness, max_steps, on_step=None):
    """Run from a well-formed state, checking Lemmas 1 and 2 at every step.

    Raises :class:`TalTypeError` if the *initial* state is not well-formed
    and :class:`SoundnessViolation` if a later one is not.  ``on_step``,
    if given, is called with ``(step_number, state, witness)`` for every
    state reached.  Returns an :class:`~kmltal.machine.Outcome` whose
    reason is ``halted`` or ``step limit``.
    """
    checker.check_state(state, witness.psi_d, witness.gamma, witness.theta)
    for n in range(max_steps):
        nxt = step(state)
        if isinstance(nxt, Error):
            raise SoundnessViolation(
                f"step {n + 1}: well-formed state at pc {state.pc:#x} stepped to {nxt}")
        try:
            w2 = next_witness(checker, state, witness, nxt)
            checker.check_state(nxt, w2.psi_d, w2.gamma, w2.theta)
        except (TalTypeError, RuleError, ValueError) as e:
            where = checker.where(state.pc) if in_code(state.pc) else f"kernel {state.pc:#x}"
            raise SoundnessViolation(
                f"step {n + 1} from {where}: preservation fails: {e}") from None
        if on_step is not None:
            on_step(n + 1, nxt, w2)
        if nxt == state:
            return Outcome(state, n, "halted")
        state, witness = nxt, w2
    return Outcome(state, max_steps, "step limit")
