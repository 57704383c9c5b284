"""Command line: ``python3 -m kmltal check|run|random ...``.

``check FILE...``
    Type-check programs: ``|- (C, D) : Psi`` and ``Psi_K |- S0`` for the
    initial state.  Exit 0 if all are well-typed, 1 if one is not, 2 on a
    usage, I/O, syntax or assembly error.

``run [--priv kernel|user] [--steps N] [--unchecked] [--trace] FILE``
    Run a program from its initial state (registers 0, pc at the entry
    label).  At kernel privilege the program is type-checked first and
    refused (exit 1) if ill-typed -- the paper's admission rule -- unless
    ``--unchecked``; a checked run also re-checks ``Psi_K |- S`` after
    every step (Lemmas 1 and 2).  At user privilege no check is needed:
    Theorem 1.  Exit 0 when the program halted or ran out of steps, 3 on
    user_error, 4 on kernel_error, 5 if a checked run broke preservation
    (a bug).

``random [--seed N] [--ill-typed]``
    Print a random well-typed program from the property tests' generator
    (or an ill-typed mutant of one).

``x86 FILE...``
    Check x86-64 ELF executables against the rules for verified programs
    (:mod:`kmltal.x86`): print ``FILE: ok`` or ``FILE: offset 0x...: rule:
    message`` for the first violation.  Exit 0 if all conform, 1 if one
    does not, 2 if a file cannot be read or objdump is missing.
"""

import argparse
import os
import random
import sys

from . import checker, generator, kernel, machine, parser, program, soundness
from .syntax import format_module

EXIT_OK, EXIT_ILL_TYPED, EXIT_USAGE, EXIT_USER_ERROR, EXIT_KERNEL_ERROR, EXIT_BUG = range(6)


def load(path, k):
    """Parse and assemble a file; raise :class:`ValueError` with a message."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from e
    try:
        return program.assemble(parser.parse(text, tuple(k.names)), k)
    except (parser.ParseError, program.AssemblyError) as e:
        raise ValueError(f"{path}: {e}") from e


def _word(v):
    return f"{v:#x}" if v >= 1 << 16 else str(v)


def describe_state(p, s):
    """Lines describing a final state: pc, non-zero registers, data memory."""
    if isinstance(s, machine.Error):
        return [f"state: {s}"]
    if s.kernel.has(s.pc):
        where = f"kernel entry {s.kernel.entries[s.pc].name} ({s.pc:#x})"
    elif machine.in_code(s.pc):
        where = p.where(s.pc)
    else:
        where = f"{s.pc:#x}"
    regs = " ".join(f"r{i}={_word(v)}" for i, v in enumerate(s.regs) if v)
    lines = [f"pc: {where}", f"registers (non-zero): {regs or '-'}"]
    if s.data:
        cells = " ".join(f"[{a:#x}]={_word(v)}" for a, v in sorted(s.data.items()))
        lines.append(f"data memory (cells written): {cells}")
    return lines


def cmd_check(args, k):
    status = EXIT_OK
    for path in args.files:
        try:
            p = load(path, k)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
        try:
            checker.check_program(p)
        except checker.TalTypeError as e:
            print(f"{path}: type error: {e}")
            status = EXIT_ILL_TYPED
            continue
        print(f"{path}: well-typed ({len(p.code)} instructions, {len(p.psi_c)} code labels, "
              f"{len(p.psi_d)} data tuples); the initial state is well-formed, so by "
              f"Theorem 2 it never reaches kernel_error")
    return status


def cmd_run(args, k):
    try:
        p = load(args.file, k)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    state = p.initial_state(args.priv)
    trace = None
    if args.trace:
        def trace(n, s, _witness=None):
            if s.kernel.has(s.pc):
                what = f"kernel entry {s.kernel.entries[s.pc].name}"
            elif machine.in_code(s.pc):
                what = f"{p.where(s.pc)}: {s.code[s.pc]}"
            else:
                what = f"{s.pc:#x} (neither code nor a kernel entry)"
            print(f"  step {n:5}: next {what}")
    if args.priv == machine.KERNEL and not args.unchecked:
        try:
            result = checker.check_program(p)
        except checker.TalTypeError as e:
            print(f"{args.file}: refused at kernel privilege: type error: {e}")
            return EXIT_ILL_TYPED
        print(f"{args.file}: well-typed; running at kernel privilege, re-checking "
              f"Psi_K |- S after every step")
        if trace:
            trace(0, state)
        try:
            out = soundness.checked_run(checker.make_checker(p), state,
                                        soundness.Witness(dict(p.psi_d), result.gamma0),
                                        args.steps, trace)
        except soundness.SoundnessViolation as e:
            print(f"BUG: {e}")
            return EXIT_BUG
    else:
        if args.priv == machine.KERNEL:
            print(f"{args.file}: WARNING: running at kernel privilege WITHOUT the type check")
        else:
            print(f"{args.file}: running at user privilege (protected by the privilege "
                  f"level, Theorem 1)")
        if trace:
            trace(0, state)
        out = machine.run(state, args.steps, trace)
    print(f"outcome: {out.reason} after {out.steps} step(s)")
    for line in describe_state(p, out.final):
        print(f"  {line}")
    return {"user_error": EXIT_USER_ERROR, "kernel_error": EXIT_KERNEL_ERROR}.get(
        out.reason, EXIT_OK)


def cmd_random(args, k):
    rng = random.Random(args.seed)
    module = generator.ProgramGenerator(rng).module(k)
    if args.ill_typed:
        p = program.assemble(module, k)
        points = checker.check_program(p).points
        module, kind, _ = generator.mutate(module, p, points, rng)
        print(f"; ill-typed mutant ({kind}) of random program {args.seed}")
    else:
        print(f"; random well-typed program {args.seed}")
    print(format_module(module), end="")
    return EXIT_OK


def cmd_x86(args, _k):
    from . import x86
    status = EXIT_OK
    for path in args.files:
        try:
            result = x86.check_file(path)
        except x86.InputError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
        print(result.line())
        if not result.ok:
            status = EXIT_ILL_TYPED
    return status


def build_parser():
    """The argument parser."""
    ap = argparse.ArgumentParser(prog="python3 -m kmltal",
                                 description="The typed assembly language of seed 002 "
                                             "(Maeda & Yonezawa): checker and machine.")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="type-check programs")
    c.add_argument("files", nargs="+", metavar="FILE")
    r = sub.add_parser("run", help="run a program")
    r.add_argument("--priv", choices=(machine.KERNEL, machine.USER), default=machine.KERNEL)
    r.add_argument("--steps", type=int, default=10000, help="step limit (default 10000)")
    r.add_argument("--unchecked", action="store_true",
                   help="at kernel privilege, skip the type check (to show why it is needed)")
    r.add_argument("--trace", action="store_true", help="print every step")
    r.add_argument("file", metavar="FILE")
    g = sub.add_parser("random", help="print a random program from the test generator")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--ill-typed", action="store_true")
    x = sub.add_parser("x86", help="check x86-64 executables against the rules for "
                                   "verified programs")
    x.add_argument("files", nargs="+", metavar="FILE")
    return ap


def main(argv=None):
    """Entry point; returns the exit status."""
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else EXIT_OK
    k = kernel.example_kernel()
    try:
        return {"check": cmd_check, "run": cmd_run, "random": cmd_random,
                "x86": cmd_x86}[args.command](args, k)
    except BrokenPipeError:            # the reader went away, e.g. `... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_USAGE
