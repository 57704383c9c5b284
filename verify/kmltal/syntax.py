"""Instructions (paper Fig. 1) and the assembly-level program structure.

    iota ::= add rs1, rs2, rd | movi w, rd | mov rs, rd | jmp rs
           | blt rs1, rs2, rs3 | ld w[rs], rd | st rs, w[rd] | illegal

An instruction object carries the machine instruction plus the type
information the checker needs (the immediate of ``movi`` may name a label,
give type arguments ``L[t1, ...]`` or carry an annotation ``: tau``).  The
machine (:mod:`kmltal.machine`) looks only at the untyped parts: types are
erased at run time, as in the paper ("the dynamic semantics of our TAL are
unchanged from the abstract machine").

A :class:`Module` is what the parser produces and the printer prints: data
tuples and labelled code blocks with their declared types, still using
label names.  :mod:`kmltal.program` assigns addresses.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Imm:
    """A word operand: a number, or a label with optional type arguments.

    ``value`` is the word; for a label it is filled in by the assembler
    (``None`` before).  ``targs`` instantiates the label's code type.
    """

    value: int = None
    label: str = None
    targs: tuple = ()

    def __str__(self):
        if self.label is None:
            return str(self.value)
        if self.targs:
            return f"{self.label}[{', '.join(str(t) for t in self.targs)}]"
        return self.label


class Instr:
    """Base class of instructions."""

    __slots__ = ()


def _r(n):
    return f"r{n}"


@dataclass(frozen=True)
class Add(Instr):
    """``add rs1, rs2, rd``: rd := rs1 + rs2 (mod 2^32)."""

    rs1: int
    rs2: int
    rd: int

    def __str__(self):
        return f"add {_r(self.rs1)}, {_r(self.rs2)}, {_r(self.rd)}"


@dataclass(frozen=True)
class Movi(Instr):
    """``movi w, rd [: tau]``: rd := w."""

    imm: Imm
    rd: int
    annot: object = None   # a Type, or None

    def __str__(self):
        s = f"movi {self.imm}, {_r(self.rd)}"
        return s + (f" : {self.annot}" if self.annot is not None else "")


@dataclass(frozen=True)
class Mov(Instr):
    """``mov rs, rd``: rd := rs."""

    rs: int
    rd: int

    def __str__(self):
        return f"mov {_r(self.rs)}, {_r(self.rd)}"


@dataclass(frozen=True)
class Jmp(Instr):
    """``jmp rs``: pc := rs."""

    rs: int

    def __str__(self):
        return f"jmp {_r(self.rs)}"


@dataclass(frozen=True)
class Blt(Instr):
    """``blt rs1, rs2, rs3``: pc := rs3 if rs1 < rs2 (unsigned), else pc + 1."""

    rs1: int
    rs2: int
    rs3: int

    def __str__(self):
        return f"blt {_r(self.rs1)}, {_r(self.rs2)}, {_r(self.rs3)}"


@dataclass(frozen=True)
class Ld(Instr):
    """``ld w[rs], rd``: rd := D(rs + w)."""

    offset: int
    rs: int
    rd: int

    def __str__(self):
        return f"ld {self.offset}[{_r(self.rs)}], {_r(self.rd)}"


@dataclass(frozen=True)
class St(Instr):
    """``st rs, w[rd]``: D(rd + w) := rs."""

    rs: int
    offset: int
    rd: int

    def __str__(self):
        return f"st {_r(self.rs)}, {self.offset}[{_r(self.rd)}]"


@dataclass(frozen=True)
class Illegal(Instr):
    """``illegal``: always steps to user_error."""

    def __str__(self):
        return "illegal"


ILLEGAL = Illegal()


@dataclass
class DataDecl:
    """``name: <tau, ...> = <w, ...>`` in the ``.data`` section."""

    name: str
    type: object          # TupleT
    words: list           # [Imm]
    line: int = 0


@dataclass
class Block:
    """A code label with its declared type and the instructions after it."""

    name: str
    type: object          # CodeT
    instrs: list
    lines: list = field(default_factory=list)   # source line of each instruction
    line: int = 0


@dataclass
class Module:
    """A parsed program: data declarations, code blocks, the entry label."""

    data: list = field(default_factory=list)
    blocks: list = field(default_factory=list)
    entry: str = None

    def entry_label(self):
        """``.entry`` if given, else ``main`` if defined, else the first block."""
        if self.entry:
            return self.entry
        names = [b.name for b in self.blocks]
        if "main" in names:
            return "main"
        return names[0] if names else None


def format_module(module):
    """Print a module in the textual syntax accepted by :mod:`kmltal.parser`."""
    out = []
    if module.entry:
        out.append(f".entry {module.entry}")
    if module.data:
        out.append(".data")
        for d in module.data:
            out.append(f"{d.name}: {d.type} = <{', '.join(str(w) for w in d.words)}>")
    out.append(".code")
    for b in module.blocks:
        out.append(f"{b.name}: {b.type}")
        out.extend(f"    {i}" for i in b.instrs)
    return "\n".join(out) + "\n"
