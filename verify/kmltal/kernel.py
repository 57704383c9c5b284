"""The kernel K: meta-functions at kernel addresses, and its type Psi_K.

A meta-function maps a machine state to a machine state (the paper's
*MetaFunc*); the kernel is entered when pc is one of its addresses, by
``jmp`` or ``blt`` -- a system call is a jump.

Besides running, each meta-function here states how it preserves typing
(:meth:`MetaFunc.witness`): given a well-formed state at its address and
the witnesses of that state's typing, it returns the data memory type and
register file type of the result.  Definition 1 (3) -- well-formed in,
well-formed out, never an error -- is what :mod:`kmltal.soundness` checks
at run time and the property tests check on random states.

:func:`example_kernel` is the paper's Example 1 (``malloc``), plus one
extension clearly outside the paper: ``halt``, a kernel entry that idles
forever (its meta-function returns the state unchanged), so that example
programs can stop; the interpreter reports a state that steps to itself as
"halted".
"""

from dataclasses import replace

from .machine import DATA_HI, DATA_LO, KERNEL_HI, KERNEL_LO, USER_ERROR, in_data
from .types import CodeT, SizeOf, TupleT, TVar

MALLOC_ADDR = KERNEL_LO
HALT_ADDR = KERNEL_LO + 1
#: Largest request malloc grants, in words (a resource limit, see Malloc).
MALLOC_LIMIT = 1 << 12


class MetaFunc:
    """A kernel entry: a name, a code type (its Psi_K entry) and a function."""

    name = None
    type = None

    def __call__(self, state):
        raise NotImplementedError

    def witness(self, state, psi_d, gamma, result):
        """``(psi_d', gamma')`` typing ``result``, given the typing of ``state``."""
        raise NotImplementedError


class Malloc(MetaFunc):
    """Example 1's malloc.

        Psi_K(w_malloc) = forall[a]. {r0: sizeof(a), r1: a,
                                      r31: forall[b]. {r0: a, r1: a, r31: b}}

    Allocates R(r0) fresh words of data memory, copies the tuple at R(r1)
    into them, sets r0 to their address and jumps to R(r31).

    "Unused memory" is decided from D alone, so that this is a function of
    the state: the kernel allocates just above the highest data cell that
    was ever initialised or written (every cell of every typed tuple is
    stored explicitly, so fresh space never overlaps a typed tuple).  A
    zero-sized request reserves one word so that addresses stay distinct.
    A request that cannot be satisfied -- the source is not in data memory,
    it is larger than :data:`MALLOC_LIMIT` words, or memory is exhausted --
    gives ``user_error``: the kernel refuses it and never produces
    ``kernel_error`` nor changes the privilege level (Theorem 1's
    hypothesis).  A well-typed request asks for the size of a tuple type,
    so the limit only matters for tuples of more than 4096 fields.
    Exhaustion is the one case where a well-typed program can reach
    ``user_error``; the paper's finite data memory and Definition 1 leave it
    open (TAL assumes unbounded memory).
    """

    name = "malloc"
    type = CodeT.make(("a",), {
        0: SizeOf(TVar("a")),
        1: TVar("a"),
        31: CodeT.make(("b",), {0: TVar("a"), 1: TVar("a"), 31: TVar("b")}),
    })

    def __call__(self, state):
        n, src = state.regs[0], state.regs[1]
        if n > MALLOC_LIMIT:
            return USER_ERROR
        if n and not (in_data(src) and in_data(src + n - 1)):
            return USER_ERROR
        top = max(state.data) + 1 if state.data else DATA_LO
        if top + max(n, 1) > DATA_HI:
            return USER_ERROR
        data = dict(state.data)
        if n == 0:
            data[top] = 0
        for i in range(n):
            data[top + i] = state.data.get(src + i, 0)
        regs = (top,) + state.regs[1:]
        return replace(state, data=data, regs=regs, pc=state.regs[31])

    def witness(self, state, psi_d, gamma, result):
        """r0 and r1 get the allocated type; the new tuple enters Psi_D."""
        alpha = gamma[1]
        if not isinstance(alpha, TupleT):
            raise ValueError(f"malloc called with r1 : {alpha}, not a tuple type")
        psi = dict(psi_d)
        psi[result.regs[0]] = alpha
        return psi, {0: alpha, 1: alpha, 31: gamma[31]}


class Halt(MetaFunc):
    """Extension (not in the paper): ``halt : forall[]. {}`` idles forever.

    Its meta-function is the identity, which trivially satisfies
    Definition 1 (3).
    """

    name = "halt"
    type = CodeT.make((), {})

    def __call__(self, state):
        return state

    def witness(self, state, psi_d, gamma, result):
        return psi_d, gamma


class Kernel:
    """K and Psi_K: meta-functions by address, with names for the assembler."""

    def __init__(self, entries):
        for addr in entries:
            if not KERNEL_LO <= addr < KERNEL_HI:
                raise ValueError(f"kernel address {addr:#x} outside [2^31, 2^32)")
        self.entries = dict(entries)
        self.names = {f.name: a for a, f in self.entries.items()}

    def has(self, addr):
        """addr in Dom(K)."""
        return addr in self.entries

    def call(self, addr, state):
        """K(addr)(state)."""
        return self.entries[addr](state)

    @property
    def types(self):
        """Psi_K as ``{address: CodeT}``."""
        return {a: f.type for a, f in self.entries.items()}


def example_kernel():
    """Example 1's kernel (malloc) plus the ``halt`` extension."""
    return Kernel({MALLOC_ADDR: Malloc(), HALT_ADDR: Halt()})

