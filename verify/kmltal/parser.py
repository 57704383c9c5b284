"""Parser for the textual assembly syntax.

A program has an optional ``.entry LABEL`` line, a ``.data`` section of
tuples and a ``.code`` section of labelled blocks; ``;`` starts a comment::

    .data
    pair: <int, int> = <3, 4>
    .code
    main: forall[]. {}
        movi 2, r0 : sizeof(<int, int>)
        movi pair, r1
        movi done, r31
        movi malloc, r2
        jmp r2
    done: forall[b]. {r0: <int, int>, r1: <int, int>, r31: b}
        ld 0[r0], r3
        movi halt, r4
        jmp r4

Types: ``int``, a type variable (an identifier), ``<t, ...>``,
``sizeof(<...>)``/``sizeof(a)``, ``forall[a, ...]. {r0: t, ...}`` (also
written ``∀[...]``; ``{...}`` alone means ``forall[]. {...}``).
Immediates: a number (decimal or ``0x`` hex), a label, or a label applied
to type arguments ``L[t, ...]``.  ``movi`` takes an optional annotation
``: type`` giving the type of the word (needed for ``sizeof`` words).
"""

import re

from . import syntax as S
from .types import NUM_REGS, CodeT, Int, SizeOf, TupleT, TVar

WORD_MAX = (1 << 32) - 1

_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)|([A-Za-z_][A-Za-z0-9_]*)|(∀)|(\S))")
_REG = re.compile(r"r(\d+)$")


class ParseError(Exception):
    """A syntax error, with the line number in the message."""

    def __init__(self, line, message):
        super().__init__(f"line {line}: {message}")
        self.line = line


class _Line:
    """Tokens of one source line and a cursor."""

    def __init__(self, text, lineno):
        self.lineno = lineno
        self.toks = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                break
            num, ident, forall, punct = m.groups()
            if num is not None:
                self.toks.append(("num", int(num, 0)))
            elif ident is not None:
                self.toks.append(("id", "forall" if ident == "forall" else ident))
            elif forall is not None:
                self.toks.append(("id", "forall"))
            else:
                self.toks.append(("p", punct))
            pos = m.end()
        self.i = 0

    def error(self, message):
        return ParseError(self.lineno, message)

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("end", None)

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def at(self, kind, value=None):
        k, v = self.peek()
        return k == kind and (value is None or v == value)

    def accept(self, punct):
        if self.at("p", punct):
            self.i += 1
            return True
        return False

    def expect(self, punct):
        if not self.accept(punct):
            raise self.error(f"expected '{punct}', found {self.describe()}")

    def describe(self):
        k, v = self.peek()
        return "end of line" if k == "end" else f"'{v}'"

    def ident(self, what="a name"):
        k, v = self.next()
        if k != "id":
            self.i -= 1
            raise self.error(f"expected {what}, found {self.describe()}")
        return v

    def number(self, what="a number"):
        k, v = self.next()
        if k != "num":
            self.i -= 1
            raise self.error(f"expected {what}, found {self.describe()}")
        if v > WORD_MAX:
            raise self.error(f"{v} does not fit in a 32-bit word")
        return v

    def reg(self):
        name = self.ident("a register r0..r31")
        m = _REG.match(name)
        if m is None or int(m.group(1)) >= NUM_REGS:
            raise self.error(f"expected a register r0..r31, found '{name}'")
        return int(m.group(1))

    def done(self):
        if self.i != len(self.toks):
            raise self.error(f"unexpected {self.describe()}")

    # -- types -------------------------------------------------------------
    def type(self):
        if self.accept("<"):
            fields = []
            if not self.accept(">"):
                fields.append(self.type())
                while self.accept(","):
                    fields.append(self.type())
                self.expect(">")
            return TupleT(tuple(fields))
        if self.at("p", "{"):
            return CodeT.make((), self.gamma())
        name = self.ident("a type")
        if name == "int":
            return Int()
        if name == "sizeof":
            self.expect("(")
            arg = self.type()
            self.expect(")")
            if not isinstance(arg, (TupleT, TVar)):
                raise self.error(f"sizeof applies to a tuple or a type variable, not {arg}")
            return SizeOf(arg)
        if name == "forall":
            self.expect("[")
            params = []
            if not self.accept("]"):
                params.append(self.ident("a type variable"))
                while self.accept(","):
                    params.append(self.ident("a type variable"))
                self.expect("]")
            if len(set(params)) != len(params):
                raise self.error(f"repeated type variable in forall[{', '.join(params)}]")
            self.expect(".")
            return CodeT.make(params, self.gamma())
        return TVar(name)

    def gamma(self):
        self.expect("{")
        gamma = {}
        if not self.accept("}"):
            while True:
                r = self.reg()
                if r in gamma:
                    raise self.error(f"register r{r} typed twice")
                self.expect(":")
                gamma[r] = self.type()
                if self.accept("}"):
                    break
                self.expect(",")
        return gamma

    # -- operands ----------------------------------------------------------
    def imm(self):
        if self.at("num"):
            return S.Imm(value=self.number())
        label = self.ident("a number or a label")
        targs = ()
        if self.accept("["):
            args = [self.type()]
            while self.accept(","):
                args.append(self.type())
            self.expect("]")
            targs = tuple(args)
        return S.Imm(label=label, targs=targs)

    def offset_reg(self):
        off = self.number("an offset")
        self.expect("[")
        r = self.reg()
        self.expect("]")
        return off, r


def _instruction(ln):
    op = ln.ident("an instruction")
    if op == "add":
        a = ln.reg(); ln.expect(","); b = ln.reg(); ln.expect(","); d = ln.reg()
        return S.Add(a, b, d)
    if op == "movi":
        imm = ln.imm(); ln.expect(","); d = ln.reg()
        annot = ln.type() if ln.accept(":") else None
        return S.Movi(imm, d, annot)
    if op == "mov":
        a = ln.reg(); ln.expect(","); d = ln.reg()
        return S.Mov(a, d)
    if op == "jmp":
        return S.Jmp(ln.reg())
    if op == "blt":
        a = ln.reg(); ln.expect(","); b = ln.reg(); ln.expect(","); c = ln.reg()
        return S.Blt(a, b, c)
    if op == "ld":
        off, rs = ln.offset_reg(); ln.expect(","); d = ln.reg()
        return S.Ld(off, rs, d)
    if op == "st":
        rs = ln.reg(); ln.expect(","); off, rd = ln.offset_reg()
        return S.St(rs, off, rd)
    if op == "illegal":
        return S.Illegal()
    raise ln.error(f"unknown instruction '{op}'")


def parse_type(text):
    """Parse one type, e.g. ``forall[a]. {r0: a}``; raise :class:`ParseError`."""
    ln = _Line(text, 1)
    t = ln.type()
    ln.done()
    return t


def parse(text, reserved=("malloc", "halt")):
    """Parse program text into a :class:`kmltal.syntax.Module`.

    ``reserved`` are kernel entry names, which labels may not reuse.
    Raises :class:`ParseError`.
    """
    module = S.Module()
    section = None
    names = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        ln = _Line(raw.split(";", 1)[0], lineno)
        if not ln.toks:
            continue
        if ln.accept("."):
            directive = ln.ident("a directive")
            if directive in ("data", "code"):
                section = directive
            elif directive == "entry":
                module.entry = ln.ident("a label")
            else:
                raise ln.error(f"unknown directive '.{directive}'")
            ln.done()
            continue
        if section is None:
            raise ln.error("expected .data or .code first")
        is_label = len(ln.toks) >= 2 and ln.toks[0][0] == "id" and ln.toks[1] == ("p", ":")
        if is_label:
            name = ln.ident()
            ln.expect(":")
            if name in names or name in reserved:
                raise ln.error(f"label '{name}' is already defined"
                               + (" (a kernel entry)" if name in reserved else ""))
            names.add(name)
            t = ln.type()
            if section == "data":
                if not isinstance(t, TupleT):
                    raise ln.error(f"data label '{name}' needs a tuple type, not {t}")
                ln.expect("=")
                ln.expect("<")
                words = []
                if not ln.accept(">"):
                    words.append(ln.imm())
                    while ln.accept(","):
                        words.append(ln.imm())
                    ln.expect(">")
                if len(words) != len(t.fields):
                    raise ln.error(f"'{name}' has type {t} ({len(t.fields)} fields) "
                                   f"but {len(words)} initial words")
                module.data.append(S.DataDecl(name, t, words, lineno))
            else:
                if not isinstance(t, CodeT):
                    raise ln.error(f"code label '{name}' needs a code type "
                                   f"forall[...]. {{...}}, not {t}")
                module.blocks.append(S.Block(name, t, [], [], lineno))
            ln.done()
            continue
        if section == "data":
            raise ln.error("expected 'name: <type> = <words>' in .data")
        if not module.blocks:
            raise ln.error("instruction before the first code label")
        instr = _instruction(ln)
        ln.done()
        module.blocks[-1].instrs.append(instr)
        module.blocks[-1].lines.append(lineno)
    return module
