"""The assembler: a :class:`kmltal.syntax.Module` becomes a loaded program.

Code blocks are laid out from address 0 in order (Dom(C) starts at 0);
data tuples from 2^30 in order, each taking as many words as it has fields
(an empty tuple reserves one word, so that distinct tuples have distinct
addresses).  Labels become words; kernel entry names (``malloc``,
``halt``) are the kernel's addresses.

The result holds the paper's C, D, Psi_C, Psi_D and the kernel (K,
Psi_K), and builds the initial machine state.
"""

from dataclasses import dataclass, replace

from .machine import DATA_HI, DATA_LO, CodeMemory, State
from .syntax import Movi


class AssemblyError(Exception):
    """An undefined label or a program that does not fit its memory."""


@dataclass
class Program:
    """A loaded program: code memory, data memory, their types, the kernel."""

    module: object
    code: CodeMemory
    psi_c: dict          # address -> CodeT
    data: dict           # address -> word (every cell of every tuple present)
    psi_d: dict          # address -> TupleT
    kernel: object
    labels: dict         # name -> address (code, data and kernel names)
    entry: int
    lines: dict          # code address -> source line

    def where(self, addr):
        """``label+k (address a, line n)`` for a code address."""
        best = None
        for name, a in self.labels.items():
            if a in self.psi_c and a <= addr and (best is None or a > best[1]):
                best = (name, a)
        line = self.lines.get(addr)
        suffix = f", line {line}" if line else ""
        if addr >= len(self.code):
            suffix += ", past the end of the code"
        if best is None:
            return f"address {addr}{suffix}"
        name, a = best
        label = name if addr == a else f"{name}+{addr - a}"
        return f"{label} (address {addr}{suffix})"

    def initial_state(self, priv):
        """(C, D, R, pc, p, K) with all registers 0 and pc at the entry label."""
        return State(self.code, dict(self.data), (0,) * 32, self.entry, priv, self.kernel)


def _resolve(imm, labels, where):
    if imm.label is None:
        return imm
    if imm.label not in labels:
        raise AssemblyError(f"{where}: undefined label '{imm.label}'")
    return replace(imm, value=labels[imm.label])


def assemble(module, kernel):
    """Lay out ``module`` and resolve its labels; raise :class:`AssemblyError`."""
    labels = dict(kernel.names)
    psi_c, lines = {}, {}
    addr = 0
    for b in module.blocks:
        if not b.instrs:
            raise AssemblyError(f"line {b.line}: code label '{b.name}' has no instructions "
                                "(each code address has one type in Psi_C)")
        labels[b.name] = addr
        psi_c[addr] = b.type
        addr += len(b.instrs)
    psi_d, data_addr = {}, DATA_LO
    for d in module.data:
        labels[d.name] = data_addr
        psi_d[data_addr] = d.type
        data_addr += max(len(d.type.fields), 1)
    if data_addr > DATA_HI:
        raise AssemblyError("the data section does not fit in data memory")
    data = {}
    for d in module.data:
        base = labels[d.name]
        if not d.words:
            data[base] = 0
        for i, w in enumerate(d.words):
            data[base + i] = _resolve(w, labels, f"line {d.line}").value
    instrs = []
    for b in module.blocks:
        for instr, line in zip(b.instrs, b.lines or [None] * len(b.instrs)):
            if isinstance(instr, Movi):
                instr = replace(instr, imm=_resolve(instr.imm, labels, f"line {line}"))
            lines[len(instrs)] = line
            instrs.append(instr)
    entry_name = module.entry_label()
    if entry_name is None or entry_name not in labels or labels[entry_name] not in psi_c:
        raise AssemblyError(f"entry label '{entry_name}' is not a code label")
    return Program(module, CodeMemory(instrs), psi_c, data, psi_d, kernel, labels,
                   labels[entry_name], lines)
