"""The static semantics: well-formedness judgments of Fig. 4, Appendix A
(Figs. 6 and 7), and the rules the paper omits -- word values, tuples and
instructions -- following FTAL/TAL.

Judgments and where they are implemented:

==========================  =============================================
``Delta |- tau``            :func:`kmltal.types.unbound_vars` (rule TYPE)
``|- Psi_C``, ``|- Psi_K``  :meth:`Checker.check_signatures`
``|- Psi_D``                :meth:`Checker.check_psi_d`
``Delta |- Gamma``          :meth:`Checker.check_signatures` (per label)
``|- (C, D) : Psi``         :meth:`Checker.check_code`, :meth:`Checker.check_data`
``Psi |- R : Gamma``        :meth:`Checker.check_regs`
``Psi, Delta |- w : tau``   :meth:`Checker.word_problem`
``Psi |- T : tau``          :meth:`Checker.check_data` (TupleDec)
``Psi, Delta, Gamma |- I``  :meth:`Checker.check_sequence`, :meth:`Checker.instr_rule`
``Psi_K |- K`` (Def. 1)     :meth:`Checker.check_signatures` (1, 2); (3) is
                            checked at run time, see :mod:`kmltal.soundness`
``Psi_K |- S``              :meth:`Checker.check_state` (rule STATE)
==========================  =============================================

Word typing ``Psi, Delta |- w : tau`` (FTAL-style, one rule per type)::

    w : int                    for every word
    n : sizeof(<t1..tn>)       the word is the number of fields
    w : <t1..tn>               if Psi_D(w) = <t1..tn>
    w : forall[D'].G           if Psi_C(w) or Psi_K(w) is forall[a1..ak, D'].G0
                               and G = [t1..tk/a1..ak]G0 (instantiation)

No word has type ``alpha`` or ``sizeof(alpha)`` (values of those types
only arrive in registers of polymorphic code) or ``sizeof(int)``.

Instruction rules (``Gamma{r: t}`` updates one register; "numeric" means
``int`` or ``sizeof(...)``, both plain numbers)::

    add rs1, rs2, rd   rs1, rs2 numeric               Gamma{rd: int}
    movi w, rd [: t]   w : t (t: annotation, else int for a number, the
                       label's type for a label)      Gamma{rd: t}
    mov rs, rd         rs in Dom(Gamma)               Gamma{rd: Gamma(rs)}
    ld w[rs], rd       Gamma(rs) = <t0..tn-1>, w < n  Gamma{rd: tw}
    st rs, w[rd]       Gamma(rd) = <t0..tn-1>, w < n, Gamma(rs) = tw
    blt rs1, rs2, rs3  rs1, rs2 numeric, jump rule for rs3, then continue
    jmp rs             Gamma(rs) = forall[D'].G', and for some t with
                       Delta |- t: Gamma <= [t/D']G'   (ends the sequence)
    illegal            no rule

``Gamma <= Gamma'`` is register-file subtyping: Gamma types every register
of Gamma' the same way and may type more.  The instantiation ``t`` is found
by first-order matching.
"""

from dataclasses import dataclass

from .machine import DATA_HI, DATA_LO, KERNEL_HI, KERNEL_LO, CODE_HI, in_code
from .syntax import Add, Blt, Illegal, Jmp, Ld, Mov, Movi, St
from .types import (INT, CodeT, Int, SizeOf, TupleT, alpha_eq, ftv, gamma_leq,
                    instantiate, is_numeric, match, show_gamma, subst, subst_gamma,
                    unbound_vars)


class TalTypeError(Exception):
    """A program or state is not well-formed; the message says where and why."""


class RuleError(Exception):
    """An instruction rule does not apply (:meth:`Checker.instr_rule`);
    :meth:`Checker.check_sequence` turns it into :class:`TalTypeError`."""


def _unbound(delta, t, what):
    bad = unbound_vars(delta, t)
    if bad:
        names = ", ".join(sorted(bad))
        scope = f"[{', '.join(delta)}]" if delta else "[] (closed)"
        raise RuleError(f"{what} {t} is not well-formed under {scope}: "
                        f"unbound or repeated type variable(s) {names}")


@dataclass(frozen=True)
class Point:
    """What the checker knows at one code address: the label whose sequence
    reached it, the type variables in scope and the register file type."""

    label: int
    delta: tuple
    gamma: dict


class Checker:
    """Type-checks code, data, register files and machine states against
    Psi = (Psi_C, Psi_D, Psi_K).  Psi_C and K are fixed; Psi_D is passed to
    each method because malloc extends it at run time."""

    def __init__(self, code, psi_c, kernel, where=None):
        self.code = code
        self.psi_c = psi_c
        self.kernel = kernel
        self.psi_k = kernel.types
        self.where = where or (lambda a: f"address {a}")
        self._signatures_ok = False
        self._code_ok_for = None      # a copy of the Psi_D the code was checked under

    # -- Appendix A, Fig. 6 ------------------------------------------------
    def check_signatures(self):
        """``|- Psi_C``, ``|- Psi_K`` and ``Dom(K) = Dom(Psi_K)``."""
        if self._signatures_ok:
            return
        for table, lo, hi, what in ((self.psi_c, 0, CODE_HI, "Psi_C"),
                                    (self.psi_k, KERNEL_LO, KERNEL_HI, "Psi_K")):
            for w, t in table.items():
                where = self.where(w) if what == "Psi_C" else f"kernel entry {w:#x}"
                if not lo <= w < hi:
                    raise TalTypeError(f"{where}: {what} entry at {w:#x} is outside "
                                       f"[{lo:#x}, {hi:#x})")
                if not isinstance(t, CodeT):
                    raise TalTypeError(f"{where}: {what} entry has type {t}, not a code type")
                try:
                    _unbound(t.params, t, "the type")
                except RuleError as e:
                    raise TalTypeError(f"{where}: {e}") from None
        if set(self.psi_k) != set(self.kernel.entries):
            raise TalTypeError("Dom(K) differs from Dom(Psi_K)")
        self._signatures_ok = True

    def check_psi_d(self, psi_d):
        """``|- Psi_D``: closed tuple types whose ranges lie in data memory
        and do not overlap.  (The tuple's own address must also be in data
        memory, which the paper's rule leaves open for empty tuples.)"""
        prev_end, prev = DATA_LO, None
        for w in sorted(psi_d):
            t = psi_d[w]
            if not isinstance(t, TupleT):
                raise TalTypeError(f"Psi_D({w:#x}) = {t} is not a tuple type")
            n = len(t.fields)
            if not (DATA_LO <= w and w + n <= DATA_HI):
                raise TalTypeError(f"Psi_D: tuple {t} at {w:#x} is not inside data memory")
            if ftv(t):
                raise TalTypeError(f"Psi_D: tuple type {t} at {w:#x} is not closed")
            if n and w < prev_end:
                raise TalTypeError(f"Psi_D: tuple {t} at {w:#x} overlaps the tuple at {prev:#x}")
            if n:
                prev_end, prev = w + n, w

    # -- word values --------------------------------------------------------
    def label_type(self, w):
        """Psi_C(w) or Psi_K(w), or ``None``."""
        return self.psi_c.get(w) or self.psi_k.get(w)

    def word_problem(self, psi_d, delta, w, t):
        """Why ``Psi, Delta |- w : t`` fails, or ``None`` if it holds."""
        if unbound_vars(delta, t):
            return f"{t} is not well-formed here"
        if isinstance(t, Int):
            return None
        if isinstance(t, SizeOf):
            if isinstance(t.arg, TupleT):
                n = len(t.arg.fields)
                return None if w == n else f"the word {w} does not have type {t} (only {n} does)"
            return f"no word has type {t}"
        if isinstance(t, TupleT):
            have = psi_d.get(w)
            if have is None:
                return f"the word {w:#x} is not the address of a tuple in Psi_D, so not of type {t}"
            return None if alpha_eq(have, t) else \
                f"the word {w:#x} points to a tuple of type {have}, not {t}"
        if isinstance(t, CodeT):
            have = self.label_type(w)
            if have is None:
                return f"the word {w:#x} is not a code label or kernel entry, so not of type {t}"
            return None if is_instance(have, t) else \
                f"the label at {w:#x} has type {have}, which does not instantiate to {t}"
        return f"no word has the abstract type {t}"

    # -- instructions -------------------------------------------------------
    def _reg(self, gamma, r):
        if r not in gamma:
            raise RuleError(f"r{r} has no type here (Gamma = {show_gamma(gamma)})")
        return gamma[r]

    def _numeric(self, gamma, r):
        t = self._reg(gamma, r)
        if not is_numeric(t):
            raise RuleError(f"r{r} has type {t}, expected int (or sizeof(...))")

    def _tuple(self, gamma, r, offset):
        t = self._reg(gamma, r)
        if not isinstance(t, TupleT):
            raise RuleError(f"r{r} has type {t}, expected a tuple type <...>")
        if offset >= len(t.fields):
            raise RuleError(f"offset {offset} is out of range for r{r} : {t} "
                            f"({len(t.fields)} field{'s' if len(t.fields) != 1 else ''})")
        return t

    def movi_type(self, psi_d, delta, instr, theta=None):
        """The type ``movi`` gives its destination (raises :class:`RuleError`).

        ``theta`` instantiates the type variables that the instruction's
        annotation and type arguments may mention (see :meth:`check_state`).
        """
        imm = instr.imm
        annot = instr.annot
        targs = imm.targs
        if theta:
            annot = None if annot is None else subst(annot, theta)
            targs = tuple(subst(a, theta) for a in targs)
        if targs:
            base = self.label_type(imm.value)
            if base is None:
                raise RuleError(f"{imm.label} is not a code label, so it takes no type arguments")
            if len(targs) > len(base.params):
                raise RuleError(f"{imm.label} : {base} has {len(base.params)} type "
                                f"parameter(s), given {len(targs)} argument(s)")
            for a in targs:
                _unbound(delta, a, "type argument")
            t = instantiate(base, targs)
            if annot is not None and not alpha_eq(annot, t):
                raise RuleError(f"{imm} has type {t}, but the annotation says {annot}")
            return t
        if annot is not None:
            _unbound(delta, annot, "the annotation")
            problem = self.word_problem(psi_d, delta, imm.value, annot)
            if problem:
                raise RuleError(problem)
            return annot
        if imm.label is None:
            return INT
        return self.label_type(imm.value) or psi_d.get(imm.value) or INT

    def jump_gamma(self, delta, gamma, r):
        """The jump rule for register ``r``: the instantiated target register
        file type ``[t/D']G'`` (raises :class:`RuleError`)."""
        t = self._reg(gamma, r)
        if not isinstance(t, CodeT):
            raise RuleError(f"r{r} has type {t}, expected a code type forall[...]. {{...}}")
        binds = {}
        pvars = frozenset(t.params)
        for reg, pt in t.regs:
            if reg not in gamma:
                raise RuleError(f"cannot jump to r{r} : {t}: the target needs r{reg} : "
                                f"{subst(pt, binds)}, but r{reg} has no type here")
            trial = dict(binds)
            if not match(pt, gamma[reg], pvars, trial):
                inst = ", ".join(f"{v} := {binds[v]}" for v in t.params if v in binds)
                inst = f" (instantiating {inst})" if inst else ""
                raise RuleError(f"cannot jump to r{r} : {t}: r{reg} has type {gamma[reg]}, "
                                f"expected {subst(pt, binds)}{inst}")
            binds = trial
        args = {p: binds.get(p, INT) for p in t.params}
        for a in args.values():
            _unbound(delta, a, "instantiation")
        target = subst_gamma(t.gamma, args)
        if not gamma_leq(gamma, target):   # matching is complete; this is a guard
            raise RuleError(f"cannot jump to r{r} : {t}: register file {show_gamma(gamma)} "
                            f"is not a subtype of {show_gamma(target)}")
        return target

    def instr_rule(self, psi_d, delta, gamma, instr, theta=None):
        """Apply the rule for ``instr``: the register file type after it, or
        ``None`` after ``jmp`` (raises :class:`RuleError`).  ``theta``: see
        :meth:`movi_type`."""
        if isinstance(instr, Add):
            self._numeric(gamma, instr.rs1)
            self._numeric(gamma, instr.rs2)
            return {**gamma, instr.rd: INT}
        if isinstance(instr, Movi):
            return {**gamma, instr.rd: self.movi_type(psi_d, delta, instr, theta)}
        if isinstance(instr, Mov):
            return {**gamma, instr.rd: self._reg(gamma, instr.rs)}
        if isinstance(instr, Ld):
            t = self._tuple(gamma, instr.rs, instr.offset)
            return {**gamma, instr.rd: t.fields[instr.offset]}
        if isinstance(instr, St):
            t = self._tuple(gamma, instr.rd, instr.offset)
            want, have = t.fields[instr.offset], self._reg(gamma, instr.rs)
            if not alpha_eq(want, have):
                raise RuleError(f"r{instr.rs} has type {have}, but field {instr.offset} of "
                                f"r{instr.rd} : {t} has type {want}")
            return gamma
        if isinstance(instr, Blt):
            self._numeric(gamma, instr.rs1)
            self._numeric(gamma, instr.rs2)
            self.jump_gamma(delta, gamma, instr.rs3)
            return gamma
        if isinstance(instr, Jmp):
            self.jump_gamma(delta, gamma, instr.rs)
            return None
        if isinstance(instr, Illegal):
            raise RuleError("'illegal' has no typing rule (executing it is user_error); "
                            "an instruction sequence must end with jmp")
        raise RuleError(f"unknown instruction {instr!r}")

    def check_sequence(self, psi_d, addr, delta, gamma, record=None, theta=None):
        """``Psi, Delta, Gamma |- InstrDec(C, addr)``: check from ``addr`` to
        the first ``jmp``; raise :class:`TalTypeError` naming the instruction.
        ``record`` (a dict), if given, receives a :class:`Point` per address;
        ``theta``: see :meth:`movi_type`."""
        start = addr
        while True:
            if not in_code(addr):
                raise TalTypeError(f"{self.where(start)}: the instruction sequence runs "
                                   f"out of code memory at {addr:#x} without a jmp")
            instr = self.code[addr]
            if record is not None:
                record[addr] = Point(start, delta, gamma)
            try:
                gamma = self.instr_rule(psi_d, delta, gamma, instr, theta)
            except RuleError as e:
                raise TalTypeError(f"{self.where(addr)}: `{instr}`: {e}") from None
            if gamma is None:
                return
            addr += 1

    # -- Fig. 7: memory, register file, state -------------------------------
    def check_code(self, psi_d, record=None):
        """Every code label's instruction sequence under its declared type
        (the code half of rule MEMORY).  The result for a given Psi_D is
        remembered: code memory never changes."""
        self.check_signatures()
        if record is None and self._code_ok_for == psi_d:
            return
        for w in sorted(self.psi_c):
            t = self.psi_c[w]
            self.check_sequence(psi_d, w, t.params, t.gamma, record)
        self._code_ok_for = dict(psi_d)

    def check_data(self, data, psi_d):
        """``|- Psi_D`` and every tuple's contents (TupleDec) against its type."""
        self.check_psi_d(psi_d)
        for w, t in psi_d.items():
            for i, ft in enumerate(t.fields):
                v = data.get(w + i, 0)
                problem = self.word_problem(psi_d, (), v, ft)
                if problem:
                    raise TalTypeError(f"data tuple at {w:#x} : {t}, field {i} = {v:#x}: {problem}")

    def check_regs(self, regs, gamma, psi_d):
        """``Psi |- R : Gamma`` for a closed Gamma."""
        for r, t in sorted(gamma.items()):
            if ftv(t):
                raise TalTypeError(f"register file type gives r{r} the open type {t}")
            problem = self.word_problem(psi_d, (), regs[r], t)
            if problem:
                raise TalTypeError(f"register r{r} = {regs[r]:#x}: {problem}")

    def label_theta(self, addr, gamma):
        """The instantiation of the label at ``addr`` that a jump with
        register file type ``gamma`` chose: theta with ``gamma <=
        [theta]Psi_C(addr)`` (raises :class:`RuleError` if there is none)."""
        t = self.psi_c.get(addr)
        if t is None:
            raise RuleError(f"{addr:#x} is not a code label")
        binds = {}
        for r, pt in t.regs:
            if r not in gamma or not match(pt, gamma[r], frozenset(t.params), binds):
                raise RuleError(f"register file type {show_gamma(gamma)} is not an "
                                f"instance of {t}, the type of {self.where(addr)}")
        return {p: binds.get(p, INT) for p in t.params}

    def check_state(self, state, psi_d, gamma, theta=None):
        """``Psi_K |- S`` (rule STATE) with witnesses Psi_D, Gamma and theta.

        The paper's instructions carry no types; ours may (``movi`` with an
        annotation or type arguments), and inside polymorphic code those
        mention the block's type variables.  At run time the code is
        checked under Delta = . as rule STATE requires, with ``theta`` --
        the instantiation chosen by the jump that entered the block --
        applied to them: exactly what TAL's operational semantics does when
        it substitutes type arguments into code at a jump.  Erasing the
        annotations instead would give the paper's rule verbatim.
        """
        if not isinstance(getattr(state, "regs", None), tuple):
            raise TalTypeError(f"{state} is an error state, which is never well-formed")
        self.check_code(psi_d)
        self.check_data(state.data, psi_d)
        self.check_regs(state.regs, gamma, psi_d)
        pc = state.pc
        if in_code(pc):
            self.check_sequence(psi_d, pc, (), gamma, theta=theta)
        elif self.kernel.has(pc):
            t = self.psi_k[pc]
            binds = {}
            same_regs = set(gamma) == {r for r, _ in t.regs}
            if not (same_regs and all(match(pt, gamma[r], frozenset(t.params), binds)
                                      for r, pt in t.regs)):
                raise TalTypeError(f"pc = kernel entry {pc:#x} : {t}, but the register file "
                                   f"type {show_gamma(gamma)} is not an instance of it")
        else:
            raise TalTypeError(f"pc = {pc:#x} is neither in code memory nor a kernel entry")


def is_instance(label_type, t):
    """Whether ``t`` is ``label_type`` with a prefix of its variables instantiated."""
    k = len(label_type.params) - len(t.params)
    if k < 0:
        return False
    if k == 0:
        return alpha_eq(label_type, t)
    pattern = CodeT(label_type.params[k:], label_type.regs)
    binds = {}
    if not match(pattern, t, frozenset(label_type.params[:k]), binds):
        return False
    args = [binds.get(p, INT) for p in label_type.params[:k]]
    return alpha_eq(instantiate(label_type, args), t)


@dataclass
class CheckResult:
    """A well-typed program: the typing at each code address, and the
    register file type Gamma0 of the initial state."""

    points: dict
    gamma0: dict


def check_program(program):
    """Check a loaded program and its initial state; raise :class:`TalTypeError`.

    Checks ``|- (C, D) : Psi`` for the program's code and data, that the
    entry label is monomorphic, and ``Psi_K |- S0`` for the initial state
    (all registers 0, pc at the entry) with Gamma0 = Psi_C(entry).
    """
    checker = make_checker(program)
    points = {}
    checker.check_code(program.psi_d, record=points)
    entry = program.psi_c[program.entry]
    if entry.params:
        raise TalTypeError(f"{program.where(program.entry)}: the entry label has type "
                           f"{entry}; it must not be polymorphic")
    state = program.initial_state("kernel")
    try:
        checker.check_state(state, program.psi_d, entry.gamma)
    except TalTypeError as e:
        raise TalTypeError(f"initial state (all registers 0, pc = entry): {e}") from None
    return CheckResult(points, entry.gamma)


def make_checker(program):
    """A :class:`Checker` for a loaded program."""
    return Checker(program.code, program.psi_c, program.kernel, program.where)
