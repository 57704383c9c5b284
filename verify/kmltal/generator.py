"""Random programs and states for the property tests.

* :class:`ProgramGenerator` builds random *well-typed* modules, type-directed:
  random tuple types with static instances; monomorphic blocks whose
  register file types mention ints, tuples, ``sizeof`` and code types;
  malloc continuations (Example 1's ``forall[b]. {r0: t, r1: t, r31: b}``);
  a polymorphic block ``forall[a]. {r1: a, r2: sizeof(a)}`` that calls
  malloc at type ``a``; a polymorphic continuation ``forall[c, b]`` reached
  through partial instantiation; and a polymorphic block that only moves
  values of abstract type.  Block bodies use every instruction (``add``,
  ``movi`` with annotations and type arguments, ``mov``, ``ld``, ``st``,
  ``blt``, ``jmp``) and end by jumping to another block, to malloc, or to
  ``halt``; before each jump the generator puts values of the right types
  into the registers the target needs.  Loops arise from back jumps.
* :func:`random_state` builds a well-formed machine state for a program: pc
  at any checked instruction (or at the malloc entry), type variables
  instantiated at random, registers filled with words of the right types
  (and garbage elsewhere), garbage in untyped data memory.
* :func:`mutate` makes a well-typed module ill-typed *by construction*
  (loading through an int, storing a wrong type, a jump to an int, an
  out-of-range field, a false ``sizeof``, a missing ``jmp``, ...).
* :func:`random_untyped_state` builds arbitrary states (any instructions,
  any registers, any pc) for Theorem 1.
"""

from dataclasses import replace

from .checker import is_instance
from .kernel import MALLOC_ADDR
from .machine import (CODE_HI, DATA_HI, DATA_LO, KERNEL_HI, KERNEL_LO, WORD, CodeMemory,
                      State)
from .syntax import (Add, Block, Blt, DataDecl, Illegal, Imm, Jmp, Ld, Module, Mov, Movi,
                     St)
from .soundness import Witness
from .types import (INT, CodeT, SizeOf, TupleT, TVar, alpha_eq, ftv, gamma_leq, instantiate,
                    is_numeric, subst_gamma)

DATA_REGS = tuple(range(1, 10))      # registers block types use
SCRATCH = (10, 11, 12, 13)           # temporaries and jump registers


def _word(rng):
    """A random word, biased towards small numbers and boundaries."""
    c = rng.random()
    if c < 0.5:
        return rng.randrange(0, 16)
    if c < 0.6:
        return rng.choice((WORD - 1, DATA_LO, DATA_HI - 1, KERNEL_LO, CODE_HI - 1))
    return rng.randrange(WORD)


class ProgramGenerator:
    """Builds one random well-typed :class:`~kmltal.syntax.Module`."""

    def __init__(self, rng, max_blocks=5, max_body=6):
        self.rng = rng
        self.max_blocks = max_blocks
        self.max_body = max_body

    # -- types and declarations ---------------------------------------------
    def _tuples(self):
        rng = self.rng
        tuples = []
        for _ in range(rng.randint(2, 4)):
            n = 0 if rng.random() < 0.08 else rng.randint(1, 3)
            fields = [INT if not tuples or rng.random() < 0.6 else rng.choice(tuples)
                      for _ in range(n)]
            t = TupleT(tuple(fields))
            if t not in tuples:
                tuples.append(t)
        return tuples

    def _data(self):
        decls, self.instances = [], {}
        for i, t in enumerate(self.tuples):
            for j in range(self.rng.randint(1, 2)):
                name = f"d{i}_{j}"
                words = []
                for f in t.fields:
                    if f == INT:
                        words.append(Imm(value=_word(self.rng)))
                    else:
                        words.append(Imm(label=self.rng.choice(self.instances[f])))
                decls.append(DataDecl(name, t, words))
                self.instances.setdefault(t, []).append(name)
        return decls

    def _value_type(self, later):
        rng = self.rng
        c = rng.random()
        if c < 0.35:
            return INT
        if c < 0.7:
            return rng.choice(self.tuples)
        if c < 0.82:
            return SizeOf(rng.choice(self.tuples))
        if later:
            return rng.choice(later)
        return INT

    def _types(self):
        """Declared types of all blocks, as ``{name: CodeT}`` in layout order."""
        rng = self.rng
        a, b, c, d = TVar("a"), TVar("b"), TVar("c"), TVar("d")
        types = {}
        mono = [f"b{i}" for i in range(1, rng.randint(2, self.max_blocks) + 1)]
        later = []
        mono_types = {}
        for name in reversed(mono):          # a block may hold code of later blocks
            regs = rng.sample(DATA_REGS, rng.randint(0, 4))
            mono_types[name] = CodeT.make((), {r: self._value_type(later) for r in regs})
            later.append(mono_types[name])
        types["main"] = CodeT.make((), {})
        for name in mono:
            types[name] = mono_types[name]
        for i, t in enumerate(self.tuples):
            types[f"m{i}"] = CodeT.make(("b",), {0: t, 1: t, 31: b})
        poly = {1: a, 2: SizeOf(a)}
        if rng.random() < 0.5:
            poly[3] = a
        types["poly"] = CodeT.make(("a",), poly)
        types["pk"] = CodeT.make(("c", "b"), {0: c, 1: c, 31: b})
        types["q"] = CodeT.make(("d",), {4: d, 5: d})
        return types

    # -- values of a type ---------------------------------------------------
    def _code_imms(self, delta):
        """``[(type, Imm)]``: immediates of code type usable under ``delta``."""
        out = [(self.types[n], Imm(label=n)) for n in self.types]
        out.append((self.kernel_types["halt"], Imm(label="halt")))
        args = list(self.tuples) + [TVar(v) for v in delta]
        for name in ("poly", "pk", "q") + tuple(f"m{i}" for i in range(len(self.tuples))):
            for arg in args:
                t = instantiate(self.types[name], [arg])
                out.append((t, Imm(label=name, targs=(arg,))))
        return out

    def _construct(self, t, rd, delta):
        """An instruction putting a word of closed-or-scoped type ``t`` into
        ``rd`` without reading registers, or ``None``."""
        rng = self.rng
        if t == INT:
            return Movi(Imm(value=_word(rng)), rd)
        if isinstance(t, SizeOf) and isinstance(t.arg, TupleT):
            return Movi(Imm(value=len(t.arg.fields)), rd, SizeOf(t.arg))
        if isinstance(t, TupleT) and t in self.instances:
            return Movi(Imm(label=rng.choice(self.instances[t])), rd)
        if isinstance(t, CodeT):
            cands = [imm for ct, imm in self._code_imms(delta) if alpha_eq(ct, t)]
            if cands:
                return Movi(rng.choice(cands), rd)
        return None

    def _fixup(self, g, delta, target, avoid=()):
        """Instructions making ``g <= target``; updates ``g``; ``None`` if impossible."""
        if set(avoid) & set(target):
            return None
        out = []
        todo = [(r, t) for r, t in target.items() if not (r in g and alpha_eq(g[r], t))]
        todo.sort(key=lambda rt: not ftv(rt[1]))        # open types first: they copy
        for r, t in todo:
            srcs = [s for s, st in g.items() if alpha_eq(st, t)]
            if srcs and (ftv(t) or self.rng.random() < 0.3):
                s = self.rng.choice(srcs)
                out.append(Mov(s, r))
            else:
                instr = self._construct(t, r, delta)
                if instr is None:
                    return None
                out.append(instr)
            g[r] = t
        return out if gamma_leq(g, target) else None

    # -- bodies --------------------------------------------------------------
    def _regs_where(self, g, pred):
        return [r for r, t in sorted(g.items()) if pred(t)]

    def _dest(self):
        return self.rng.choice(DATA_REGS + SCRATCH + (0,))

    def _op(self, g, delta):
        """One random non-jumping instruction sequence (maybe empty)."""
        rng = self.rng
        kind = rng.choice(("int", "sizeof", "data", "code", "mov", "add", "ld", "st", "blt"))
        rd = self._dest()
        if kind == "int":
            g[rd] = INT
            return [Movi(Imm(value=_word(rng)), rd)]
        if kind == "sizeof":
            t = rng.choice(self.tuples)
            g[rd] = SizeOf(t)
            return [self._construct(SizeOf(t), rd, delta)]
        if kind == "data":
            t = rng.choice(self.tuples)
            g[rd] = t
            return [self._construct(t, rd, delta)]
        if kind == "code":
            t, imm = rng.choice(self._code_imms(delta))
            g[rd] = t
            return [Movi(imm, rd)]
        if kind == "mov" and g:
            rs = rng.choice(sorted(g))
            g[rd] = g[rs]
            return [Mov(rs, rd)]
        nums = self._regs_where(g, is_numeric)
        if kind == "add" and nums:
            g[rd] = INT
            return [Add(rng.choice(nums), rng.choice(nums), rd)]
        tups = self._regs_where(g, lambda t: isinstance(t, TupleT) and t.fields)
        if kind == "ld" and tups:
            rs = rng.choice(tups)
            off = rng.randrange(len(g[rs].fields))
            g[rd] = g[rs].fields[off]
            return [Ld(off, rs, rd)]
        if kind == "st" and tups:
            rt = rng.choice(tups)
            off = rng.randrange(len(g[rt].fields))
            ft = g[rt].fields[off]
            srcs = [s for s, st in g.items() if alpha_eq(st, ft)]
            if srcs:
                return [St(rng.choice(srcs), off, rt)]
            tmp = rng.choice(SCRATCH)
            make = self._construct(ft, tmp, delta)
            if make is None or tmp == rt:
                return []
            g[tmp] = ft
            return [make, St(tmp, off, rt)]
        if kind == "blt":
            return self._blt(g, delta)
        return []

    def _mono_targets(self):
        return [n for n in self.types if not self.types[n].params and n != "main"] + ["halt"]

    def _target_gamma(self, name):
        t = self.kernel_types.get(name) or self.types[name]
        return t.gamma

    def _blt(self, g, delta):
        rng = self.rng
        name = rng.choice(self._mono_targets())
        target = self._target_gamma(name)
        out = self._fixup(g, delta, target)
        if out is None:
            return []
        free = [r for r in SCRATCH if r not in target]
        rj = rng.choice(free)
        nums = [r for r in self._regs_where(g, is_numeric) if r != rj]
        if not nums:
            rn = rng.choice([r for r in free if r != rj])
            out.append(Movi(Imm(value=_word(rng)), rn))
            g[rn] = INT
            nums = [rn]
        out.append(Movi(Imm(label=name), rj))
        g[rj] = self.types.get(name) or self.kernel_types[name]
        out.append(Blt(rng.choice(nums), rng.choice(nums), rj))
        return out

    def _terminal(self, g, delta):
        """Instructions ending a block with a jump (always succeeds)."""
        rng = self.rng
        options = ["mono", "mono", "malloc", "poly"]
        if any(isinstance(t, CodeT) and not t.params and not ftv(t) for t in g.values()):
            options.append("register")
        for v in delta:
            vregs = self._regs_where(g, lambda t, v=v: t == TVar(v))
            sregs = self._regs_where(g, lambda t, v=v: t == SizeOf(TVar(v)))
            if vregs:
                options.append(("q", v))
            if vregs and sregs:
                options += [("polymalloc", v), ("polycall", v)]
        if rng.random() < 0.12:
            options = ["halt"]
        choice = rng.choice(options)
        rj = rng.choice(SCRATCH)
        if choice == "register":
            regs = self._regs_where(g, lambda t: isinstance(t, CodeT) and not t.params
                                    and not ftv(t))
            rc = rng.choice(regs)
            target = g[rc].gamma
            if rc not in target:
                out = [Mov(rc, rj)]
                g[rj] = g[rc]
                fix = self._fixup(g, delta, target, avoid=(rj,))
                if fix is not None:
                    return out + fix + [Jmp(rj)]
            choice = "mono"
        if isinstance(choice, tuple):
            kind, v = choice
            tv = TVar(v)
            if kind == "q":
                target = subst_gamma(self.types["q"].gamma, {"d": tv})
                imm = Imm(label="q", targs=(tv,)) if rng.random() < 0.5 else Imm(label="q")
            elif kind == "polycall":
                target = subst_gamma(self.types["poly"].gamma, {"a": tv})
                imm = Imm(label="poly")
            else:                  # polymalloc: malloc at the abstract type, back to pk
                target = {0: SizeOf(tv), 1: tv, 31: instantiate(self.types["pk"], [tv])}
                imm = Imm(label="malloc")
            fix = self._fixup(g, delta, target, avoid=(rj,))
            if fix is not None:
                return fix + [Movi(imm, rj), Jmp(rj)]
            choice = "mono"
        if choice == "malloc":
            i = rng.randrange(len(self.tuples))
            t = self.tuples[i]
            cont = rng.choice([Imm(label=f"m{i}"), Imm(label="pk", targs=(t,))])
            target = {0: SizeOf(t), 1: t}
            fix = self._fixup(g, delta, target, avoid=(rj, 31))
            if fix is not None:
                return fix + [Movi(cont, 31), Movi(Imm(label="malloc"), rj), Jmp(rj)]
            choice = "mono"
        if choice == "poly":
            t = rng.choice(self.tuples)
            target = subst_gamma(self.types["poly"].gamma, {"a": t})
            fix = self._fixup(g, delta, target, avoid=(rj,))
            if fix is not None:
                imm = Imm(label="poly", targs=(t,)) if rng.random() < 0.5 else Imm(label="poly")
                return fix + [Movi(imm, rj), Jmp(rj)]
            choice = "mono"
        name = "halt" if choice == "halt" else rng.choice(self._mono_targets())
        fix = self._fixup(g, delta, self._target_gamma(name), avoid=(rj,))
        assert fix is not None, "monomorphic targets only need constructible types"
        return fix + [Movi(Imm(label=name), rj), Jmp(rj)]

    def _body(self, t):
        g = t.gamma
        out = []
        for _ in range(self.rng.randint(0, self.max_body)):
            out.extend(self._op(g, t.params))
        return out + self._terminal(g, t.params)

    def module(self, kernel):
        """A random well-typed module for ``kernel`` (Example 1's)."""
        self.kernel_types = {f.name: f.type for f in kernel.entries.values()}
        self.tuples = self._tuples()
        data = self._data()
        self.types = self._types()
        blocks = [Block(name, t, self._body(t)) for name, t in self.types.items()]
        return Module(data, blocks, "main")


# -- states -------------------------------------------------------------------

def _value(program, rng, t):
    """A word of closed type ``t`` in ``program``'s memory typing, or ``None``."""
    if t == INT:
        return _word(rng)
    if isinstance(t, SizeOf) and isinstance(t.arg, TupleT):
        return len(t.arg.fields)
    if isinstance(t, TupleT):
        addrs = [a for a, dt in program.psi_d.items() if alpha_eq(dt, t)]
        return rng.choice(addrs) if addrs else None
    if isinstance(t, CodeT):
        labels = {**program.psi_c, **program.kernel.types}
        addrs = [a for a, lt in labels.items() if is_instance(lt, t)]
        return rng.choice(addrs) if addrs else None
    return None


def _sizeof_vars(t):
    """Names of type variables that occur under ``sizeof`` in ``t``."""
    if isinstance(t, SizeOf):
        return ftv(t.arg)
    if isinstance(t, TupleT):
        return frozenset().union(*(_sizeof_vars(f) for f in t.fields))
    if isinstance(t, CodeT):
        inner = frozenset().union(*(_sizeof_vars(rt) for _, rt in t.regs))
        return inner - frozenset(t.params)
    return frozenset()


def _instantiation(program, rng, params, gamma):
    """A random closed instantiation of ``params`` that keeps ``gamma``
    inhabited: a tuple type with a static instance, or ``int`` for a
    variable that never occurs under ``sizeof``."""
    tuples = sorted(set(program.psi_d.values()), key=str)
    sized = frozenset().union(*(_sizeof_vars(t) for t in gamma.values()))
    return {p: INT if (p not in sized and rng.random() < 0.2) else rng.choice(tuples)
            for p in params}


def random_state(program, points, rng, priv, at_malloc=None, tries=20):
    """A random well-formed state of ``program`` and its typing witness.

    ``points`` is :class:`~kmltal.checker.CheckResult` ``.points``.  Returns
    ``(state, Witness)``; pc is a random checked instruction or, when
    ``at_malloc`` is true (by default one time in eight), the malloc entry.
    Returns ``None`` if no attempt worked.
    """
    for _ in range(tries):
        if (rng.random() < 0.125) if at_malloc is None else at_malloc:
            pc = MALLOC_ADDR
            malloc_t = program.kernel.types[MALLOC_ADDR]
            theta = _instantiation(program, rng, malloc_t.params, malloc_t.gamma)
            gamma = subst_gamma(malloc_t.gamma, theta)
            theta = {}
        else:
            pc = rng.choice(sorted(points))
            pt = points[pc]
            theta = _instantiation(program, rng, pt.delta, pt.gamma)
            gamma = subst_gamma(pt.gamma, theta)
        regs = [_word(rng) for _ in range(32)]
        ok = True
        for r, t in gamma.items():
            v = _value(program, rng, t)
            if v is None:
                ok = False
                break
            regs[r] = v
        if not ok:
            continue
        data = dict(program.data)
        top = max(data) + 1 if data else DATA_LO
        for _ in range(rng.randint(0, 4)):
            data[rng.randrange(top, min(top + 64, DATA_HI))] = _word(rng)
        state = State(program.code, data, tuple(regs), pc, priv, program.kernel)
        return state, Witness(dict(program.psi_d), gamma, theta)
    return None


def label_state(program, rng, label, priv):
    """A state at code label ``label`` with registers typed by its declared
    type (no check that the code there is well-typed), or ``None``."""
    pc = program.labels[label]
    t = program.psi_c[pc]
    theta = _instantiation(program, rng, t.params, t.gamma)
    regs = [_word(rng) for _ in range(32)]
    for r, rt in subst_gamma(t.gamma, theta).items():
        v = _value(program, rng, rt)
        if v is None:
            return None
        regs[r] = v
    return State(program.code, dict(program.data), tuple(regs), pc, priv, program.kernel)


# -- ill-typed mutants -----------------------------------------------------------

MUTATIONS = ("ld_int", "st_int", "jmp_int", "ld_oob", "st_wrong", "sizeof_lie",
             "drop_jmp", "add_ptr")


def _bad_address(rng):
    """A word outside data memory: in code memory or in the kernel's range."""
    if rng.random() < 0.5:
        return rng.randrange(0, 1 << 20)
    return rng.randrange(KERNEL_LO + 2, KERNEL_HI)


def mutate(module, program, points, rng, kind=None):
    """An ill-typed copy of well-typed ``module``: ``(module, kind, block)``
    with the mutation's name and the label of the block it changed.

    ``program``/``points`` are the assembled module and its check result
    (the typing at each address chooses registers for the mutation).
    Every mutation inserts, at a point the checker reaches from a label,
    an instruction that no rule accepts, so the result is ill-typed.
    """
    kind = kind or rng.choice(MUTATIONS)
    bi = rng.randrange(len(module.blocks))
    block = module.blocks[bi]
    k = rng.randrange(len(block.instrs))          # the last instruction is the jmp
    g = points[program.labels[block.name] + k].gamma
    tups = [r for r, t in sorted(g.items()) if isinstance(t, TupleT) and t.fields]
    rx, ry = 20, 21                                # registers no block type uses
    if kind == "ld_oob" and tups:
        r = rng.choice(tups)
        insert = [Ld(len(g[r].fields) + rng.randrange(3), r, ry)]
    elif kind == "st_wrong" and any(f != INT for r in tups for f in g[r].fields):
        r = rng.choice([r for r in tups if any(f != INT for f in g[r].fields)])
        off = rng.choice([i for i, f in enumerate(g[r].fields) if f != INT])
        insert = [Movi(Imm(value=_bad_address(rng)), rx), St(rx, off, r)]
    elif kind == "add_ptr" and tups:
        r = rng.choice(tups)
        insert = [Add(r, r, rx)]
    elif kind == "sizeof_lie":
        t = rng.choice([d.type for d in module.data])
        insert = [Movi(Imm(value=len(t.fields) + rng.randint(1, 3)), rx, SizeOf(t))]
    elif kind == "jmp_int":
        target = rng.choice((rng.randrange(DATA_LO, DATA_HI), _bad_address(rng)))
        insert = [Movi(Imm(value=target), rx), Jmp(rx)]
    elif kind == "st_int":
        insert = [Movi(Imm(value=_bad_address(rng)), rx), St(rx, 0, rx)]
    elif kind == "drop_jmp":
        instrs = block.instrs[:-1] + [Illegal()]
        return _with_block(module, bi, instrs), kind, block.name
    else:
        kind = "ld_int"
        insert = [Movi(Imm(value=_bad_address(rng)), rx), Ld(0, rx, ry)]
    return _with_block(module, bi, block.instrs[:k] + insert + block.instrs[k:]), kind, block.name


def _with_block(module, index, instrs):
    blocks = list(module.blocks)
    blocks[index] = replace(blocks[index], instrs=instrs, lines=[])
    return replace(module, blocks=blocks)


# -- arbitrary states (Theorem 1) --------------------------------------------------

def random_untyped_state(rng, kernel, priv, n_instrs=24):
    """An arbitrary state: random instructions (``illegal`` included), random
    registers, random data and a pc anywhere, including outside Dom(C)."""
    def reg():
        return rng.randrange(32)

    def word():
        c = rng.random()
        if c < 0.3:
            return rng.randrange(n_instrs + 2)
        if c < 0.5:
            return rng.randrange(DATA_LO, DATA_LO + 16)
        if c < 0.6:
            return rng.choice(sorted(kernel.entries))
        return _word(rng)

    makers = (
        lambda: Add(reg(), reg(), reg()),
        lambda: Movi(Imm(value=word()), reg()),
        lambda: Mov(reg(), reg()),
        lambda: Jmp(reg()),
        lambda: Blt(reg(), reg(), reg()),
        lambda: Ld(rng.randrange(4), reg(), reg()),
        lambda: St(reg(), rng.randrange(4), reg()),
        lambda: Illegal(),
    )
    code = CodeMemory(rng.choice(makers)() for _ in range(n_instrs))
    data = {DATA_LO + i: word() for i in range(rng.randint(0, 16))}
    regs = tuple(word() for _ in range(32))
    pc = word() if rng.random() < 0.2 else rng.randrange(n_instrs)
    return State(code, data, regs, pc, priv, kernel)
