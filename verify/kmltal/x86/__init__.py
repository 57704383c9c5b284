"""kmltal.x86: the rules for verified x86-64 programs as a type system over
machine code, and their reference checker.

* :mod:`kmltal.x86.decode`  -- decoding the executable pages with GNU objdump
* :mod:`kmltal.x86.rules`   -- register types, the abstract state, the
  judgement per instruction, the bundle and transfer rules
* :mod:`kmltal.x86.checker` -- the ELF rules and the walk over the text

``python3 -m kmltal x86 FILE...`` runs it; docs/verification.md, "Verified
programs: the rules", states the rules, the kernel invariants they assume
and the soundness argument.
"""

from .checker import InputError, Result, check_file  # noqa: F401
from .rules import RULES, Violation  # noqa: F401
