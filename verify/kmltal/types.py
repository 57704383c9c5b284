"""Types of the typed assembly language (paper Fig. 3) and operations on them.

    tau ::= alpha | int | forall[Delta].Gamma | <tau_1, ..., tau_n>
          | sizeof(<tau_1, ..., tau_n>) | sizeof(alpha)

A register file type Gamma is a finite map from register numbers (0..31) to
types.  It is *partial*: the paper's REGISTER FILE rule only constrains the
registers in Dom(Gamma), so registers outside it may hold any word.  Inside
a code type it is stored as a sorted tuple of ``(register, type)`` pairs so
that types are hashable; the checker works on plain dicts.

Type variables are bound only by code types.  Equality of types is
alpha-equivalence (:func:`alpha_eq`); substitution is capture-avoiding
(:func:`subst`).  ``sizeof`` is written only around a tuple or a type
variable, as in the paper; substituting a non-tuple for the variable can
produce e.g. ``sizeof(int)``, a type no word has (see :mod:`kmltal.checker`).
"""

from dataclasses import dataclass

NUM_REGS = 32


class Type:
    """Base class of types; subclasses are immutable and hashable."""

    __slots__ = ()


@dataclass(frozen=True)
class TVar(Type):
    """A type variable alpha."""

    name: str

    def __str__(self):
        return self.name


@dataclass(frozen=True)
class Int(Type):
    """``int``: any word value."""

    def __str__(self):
        return "int"


@dataclass(frozen=True)
class TupleT(Type):
    """``<tau_1, ..., tau_n>``: a pointer to n consecutive words in data memory."""

    fields: tuple

    def __str__(self):
        return "<" + ", ".join(str(f) for f in self.fields) + ">"


@dataclass(frozen=True)
class SizeOf(Type):
    """``sizeof(tau)``: the word n, when tau is a tuple of n fields."""

    arg: Type

    def __str__(self):
        return f"sizeof({self.arg})"


@dataclass(frozen=True)
class CodeT(Type):
    """``forall[Delta].Gamma``: code that may be jumped to when the register
    file has type Gamma, for some instantiation of the variables Delta."""

    params: tuple          # type variable names, in order
    regs: tuple            # sorted ((register, type), ...)

    @staticmethod
    def make(params, gamma):
        """Build a code type from a list of names and a ``{reg: type}`` dict."""
        return CodeT(tuple(params), tuple(sorted(gamma.items())))

    @property
    def gamma(self):
        """The register file type as a new dict."""
        return dict(self.regs)

    def __str__(self):
        return f"forall[{', '.join(self.params)}]. {show_gamma(self.gamma)}"


INT = Int()


def show_gamma(gamma):
    """``{r0: int, r31: b}`` for a register file type dict."""
    return "{" + ", ".join(f"r{r}: {t}" for r, t in sorted(gamma.items())) + "}"


def _cached(t, key, compute):
    """A derived value of an immutable type, computed once per object."""
    d = t.__dict__
    if key not in d:
        object.__setattr__(t, key, compute(t))   # a cache, not a field
    return d[key]


def ftv(t):
    """Free type variables FTV(tau) of a type, as a frozenset of names."""
    return _cached(t, "_ftv", _ftv)


def _ftv(t):
    if isinstance(t, TVar):
        return frozenset((t.name,))
    if isinstance(t, Int):
        return frozenset()
    if isinstance(t, TupleT):
        return frozenset().union(*(ftv(f) for f in t.fields))
    if isinstance(t, SizeOf):
        return ftv(t.arg)
    if isinstance(t, CodeT):
        inner = frozenset().union(*(ftv(rt) for _, rt in t.regs))
        return inner - frozenset(t.params)
    raise TypeError(f"not a type: {t!r}")


def fresh_name(base, avoid):
    """A variable name derived from ``base`` that is not in ``avoid``."""
    stem = base.rstrip("0123456789'") or "t"
    i = 1
    while f"{stem}{i}" in avoid:
        i += 1
    return f"{stem}{i}"


def subst(t, mapping):
    """Capture-avoiding simultaneous substitution ``[mapping]t``.

    ``mapping`` maps variable names to types.  Binders of code types that
    would capture a free variable of a substituted type are renamed.
    """
    if not mapping:
        return t
    if isinstance(t, TVar):
        return mapping.get(t.name, t)
    if isinstance(t, Int):
        return t
    if isinstance(t, TupleT):
        return TupleT(tuple(subst(f, mapping) for f in t.fields))
    if isinstance(t, SizeOf):
        return SizeOf(subst(t.arg, mapping))
    if isinstance(t, CodeT):
        inner = {k: v for k, v in mapping.items() if k not in t.params}
        if not inner:
            return t
        incoming = frozenset().union(*(ftv(v) for v in inner.values()))
        avoid = set(incoming) | set(ftv(t)) | set(t.params) | set(inner)
        params = []
        for p in t.params:
            if p in incoming:
                q = fresh_name(p, avoid)
                avoid.add(q)
                inner[p] = TVar(q)
                params.append(q)
            else:
                params.append(p)
        return CodeT(tuple(params), tuple((r, subst(rt, inner)) for r, rt in t.regs))
    raise TypeError(f"not a type: {t!r}")


def subst_gamma(gamma, mapping):
    """Apply :func:`subst` to every register of a register file type dict."""
    return {r: subst(t, mapping) for r, t in gamma.items()}


def match(pattern, target, pvars, binds, _env_p=None, _env_t=None, _depth=0):
    """First-order matching up to alpha-equivalence.

    Tries to extend ``binds`` (a dict from names in ``pvars`` to types) so
    that ``[binds]pattern`` is alpha-equivalent to ``target``; returns
    whether it succeeded (``binds`` may be partly extended on failure).
    Variables bound by code types inside ``pattern`` shadow ``pvars``, and
    a pattern variable is never bound to a type that mentions a variable
    bound inside ``target``.  With empty ``pvars`` this is alpha-equality.
    """
    env_p = _env_p or {}
    env_t = _env_t or {}
    if isinstance(pattern, TVar):
        if pattern.name in env_p:
            return isinstance(target, TVar) and env_t.get(target.name) == env_p[pattern.name]
        if pattern.name in pvars:
            if ftv(target) & env_t.keys():
                return False
            if pattern.name in binds:
                return alpha_eq(binds[pattern.name], target)
            binds[pattern.name] = target
            return True
        return isinstance(target, TVar) and target.name == pattern.name \
            and target.name not in env_t
    if isinstance(pattern, Int):
        return isinstance(target, Int)
    if isinstance(pattern, TupleT):
        return isinstance(target, TupleT) and len(pattern.fields) == len(target.fields) \
            and all(match(p, t, pvars, binds, env_p, env_t, _depth)
                    for p, t in zip(pattern.fields, target.fields))
    if isinstance(pattern, SizeOf):
        return isinstance(target, SizeOf) and match(pattern.arg, target.arg, pvars, binds,
                                                    env_p, env_t, _depth)
    if isinstance(pattern, CodeT):
        if not isinstance(target, CodeT) or len(pattern.params) != len(target.params) \
                or [r for r, _ in pattern.regs] != [r for r, _ in target.regs]:
            return False
        env_p = {**env_p, **{p: _depth + i for i, p in enumerate(pattern.params)}}
        env_t = {**env_t, **{p: _depth + i for i, p in enumerate(target.params)}}
        depth = _depth + len(pattern.params)
        return all(match(pt, tt, pvars, binds, env_p, env_t, depth)
                   for (_, pt), (_, tt) in zip(pattern.regs, target.regs))
    raise TypeError(f"not a type: {pattern!r}")


def alpha_eq(a, b):
    """Type equality: equal up to renaming of bound type variables."""
    return a == b or match(a, b, frozenset(), {})


def gamma_leq(sub, sup):
    """Register file subtyping ``sub <= sup``: every register typed by ``sup``
    is typed by ``sub`` with an equal type (extra registers are forgotten)."""
    return all(r in sub and alpha_eq(sub[r], t) for r, t in sup.items())


def instantiate(code, args):
    """Instantiate the first ``len(args)`` variables of a code type.

    ``forall[a1..ak, Delta'].Gamma`` applied to ``t1..tk`` is
    ``forall[Delta'].[t1..tk/a1..ak]Gamma``.
    """
    if len(args) > len(code.params):
        raise ValueError(f"{len(args)} type arguments for {code}")
    k = len(args)
    rest = CodeT(code.params[k:], code.regs)
    return subst(rest, dict(zip(code.params[:k], args)))


def is_numeric(t):
    """Types whose words are plain numbers: ``int`` and ``sizeof(...)``."""
    return isinstance(t, (Int, SizeOf))


def unbound_vars(delta, t):
    """Variables of ``t`` not in ``delta`` (empty iff ``Delta |- tau``, rule TYPE),
    plus duplicate binder names, which the rule's syntax excludes."""
    free = ftv(t)
    dups = _cached(t, "_dups", _duplicate_binders)
    if not free and not dups:
        return frozenset()
    return (free - frozenset(delta)) | dups


def _duplicate_binders(t):
    if isinstance(t, TupleT):
        return frozenset().union(*(_cached(f, "_dups", _duplicate_binders) for f in t.fields))
    if isinstance(t, SizeOf):
        return _cached(t.arg, "_dups", _duplicate_binders)
    if isinstance(t, CodeT):
        bad = {p for i, p in enumerate(t.params) if p in t.params[:i]}
        for _, rt in t.regs:
            bad |= _cached(rt, "_dups", _duplicate_binders)
        return frozenset(bad)
    return frozenset()
