"""The abstract machine of the paper (Fig. 1 syntax, Fig. 2 semantics).

    S ::= (C, D, R, pc, p, K) | user_error | kernel_error

* Words are 32-bit: 0 .. 2^32-1.  ``add`` and address computations
  ``R(r) + w`` wrap modulo 2^32 (the paper does not say; a 32-bit machine
  does).
* Dom(C) = [0, 2^30 - 1]: every code address holds an instruction;
  addresses the program does not fill hold ``illegal``.
* Dom(D) = [2^30, 2^31 - 1]: every data address holds a word; cells never
  written read as 0.  ``D`` is stored sparsely as a dict.
* Dom(K) is a subset of [2^31, 2^32 - 1]: the kernel's meta-functions
  (:mod:`kmltal.kernel`), called when pc enters Dom(K).

:func:`step` is the small-step function ``S |-> S'``; it never mutates its
argument.  ``error(p)`` is kernel_error at kernel privilege and user_error
at user privilege; ``illegal`` always gives user_error.
"""

import enum
from dataclasses import dataclass, replace

from .syntax import ILLEGAL, Add, Blt, Illegal, Jmp, Ld, Mov, Movi, St

WORD = 1 << 32
CODE_LO, CODE_HI = 0, 1 << 30            # Dom(C) = [CODE_LO, CODE_HI)
DATA_LO, DATA_HI = 1 << 30, 1 << 31      # Dom(D) = [DATA_LO, DATA_HI)
KERNEL_LO, KERNEL_HI = 1 << 31, 1 << 32  # Dom(K) is inside [KERNEL_LO, KERNEL_HI)

USER, KERNEL = "user", "kernel"


class Error(enum.Enum):
    """The two error states."""

    USER_ERROR = "user_error"
    KERNEL_ERROR = "kernel_error"

    def __str__(self):
        return self.value


USER_ERROR, KERNEL_ERROR = Error.USER_ERROR, Error.KERNEL_ERROR


def error(priv):
    """``error(p)``: kernel_error when p = kernel, user_error when p = user."""
    return KERNEL_ERROR if priv == KERNEL else USER_ERROR


def in_code(a):
    """a in Dom(C)."""
    return CODE_LO <= a < CODE_HI


def in_data(a):
    """a in Dom(D)."""
    return DATA_LO <= a < DATA_HI


class CodeMemory:
    """Code memory C: instructions at addresses 0..n-1, ``illegal`` elsewhere."""

    __slots__ = ("instrs",)

    def __init__(self, instrs):
        self.instrs = tuple(instrs)

    def __getitem__(self, addr):
        if 0 <= addr < len(self.instrs):
            return self.instrs[addr]
        if in_code(addr):
            return ILLEGAL
        raise KeyError(addr)

    def __len__(self):
        return len(self.instrs)


@dataclass(frozen=True)
class State:
    """A machine state (C, D, R, pc, p, K).

    ``data`` is a dict that must not be mutated (steps copy it on write);
    ``regs`` is a tuple of 32 words; ``kernel`` a :class:`kmltal.kernel.Kernel`.
    """

    code: CodeMemory
    data: dict
    regs: tuple
    pc: int
    priv: str
    kernel: object

    def load(self, addr):
        """D(addr) for addr in Dom(D)."""
        return self.data.get(addr, 0)


def _set(regs, rd, value):
    regs = list(regs)
    regs[rd] = value % WORD
    return tuple(regs)


def step(s):
    """One step of Fig. 2: return the successor of state ``s``."""
    pc = s.pc
    if s.kernel.has(pc):
        return s.kernel.call(pc, s)
    if not in_code(pc):
        return error(s.priv)
    i = s.code[pc]
    r = s.regs
    nxt = pc + 1
    if isinstance(i, Add):
        return replace(s, regs=_set(r, i.rd, r[i.rs1] + r[i.rs2]), pc=nxt)
    if isinstance(i, Movi):
        return replace(s, regs=_set(r, i.rd, i.imm.value), pc=nxt)
    if isinstance(i, Mov):
        return replace(s, regs=_set(r, i.rd, r[i.rs]), pc=nxt)
    if isinstance(i, Jmp):
        return replace(s, pc=r[i.rs])
    if isinstance(i, Blt):
        return replace(s, pc=r[i.rs3] if r[i.rs1] < r[i.rs2] else nxt)
    if isinstance(i, Ld):
        a = (r[i.rs] + i.offset) % WORD
        if not in_data(a):
            return error(s.priv)
        return replace(s, regs=_set(r, i.rd, s.data.get(a, 0)), pc=nxt)
    if isinstance(i, St):
        a = (r[i.rd] + i.offset) % WORD
        if not in_data(a):
            return error(s.priv)
        data = dict(s.data)
        data[a] = r[i.rs]
        return replace(s, data=data, pc=nxt)
    if isinstance(i, Illegal):
        return USER_ERROR
    raise TypeError(f"not an instruction: {i!r}")


@dataclass
class Outcome:
    """How a run ended: ``final`` state, number of ``steps`` taken, ``reason``
    (``user_error``, ``kernel_error``, ``halted`` -- a step left the state
    unchanged, as the kernel's ``halt`` does -- or ``step limit``)."""

    final: object
    steps: int
    reason: str


def run(s, max_steps, on_step=None):
    """Run from ``s`` until an error state, a fixed point, or ``max_steps``
    steps; ``on_step(n, state)``, if given, sees every new state."""
    for n in range(max_steps):
        t = step(s)
        if isinstance(t, Error):
            return Outcome(t, n + 1, str(t))
        if t == s:
            return Outcome(s, n, "halted")
        s = t
        if on_step is not None:
            on_step(n + 1, s)
    return Outcome(s, max_steps, "step limit")
