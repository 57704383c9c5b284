"""kmltal: the abstract machine and typed assembly language of seed 002.

Maeda & Yonezawa, "Kernel Mode Linux: Toward an Operating System Protected
by a Type Theory", Section 2 and Appendix A, made executable:

* :mod:`kmltal.types`     -- types (Fig. 3), substitution, equality, matching
* :mod:`kmltal.syntax`    -- instructions (Fig. 1) and program structure
* :mod:`kmltal.parser`    -- the textual assembly syntax
* :mod:`kmltal.program`   -- the assembler: C, D, Psi_C, Psi_D
* :mod:`kmltal.machine`   -- machine states and the step function (Figs. 1-2)
* :mod:`kmltal.kernel`    -- the kernel K, Psi_K and Example 1's malloc
* :mod:`kmltal.checker`   -- the static semantics (Fig. 4, Appendix A, FTAL rules)
* :mod:`kmltal.soundness` -- Lemmas 1-2 / Theorem 2 checked along runs
* :mod:`kmltal.generator` -- random programs and states for property tests
* :mod:`kmltal.cli`       -- ``python3 -m kmltal check|run|random``

docs/verification.md maps every definition of the paper to this code.
"""
