"""``kml verify``: scan ELF programs for privileged instructions.

    kml verify [--no-libs] [--root DIR] [--strict] [--json]
               [--max-findings N] [--mark | --check-mark] FILE...
    kml verify --policy

Exit status: 0 clean (or every mark valid), 1 flagged (or a mark missing,
stale or from another scanner), 2 usage or I/O error (unreadable file, not
an ELF file, 32-bit ELF, library not found, objdump missing, mark not
writable).
"""

import argparse
import json
import os
import sys

from . import SCANNER_VERSION, disasm, mark, policy, policy_id, scanner

EXIT_CLEAN, EXIT_FLAGGED, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors by exception instead of exiting."""

    def error(self, message):
        raise _Usage(f"{self.prog}: {message}\n{self.format_usage().strip()}")


class _Usage(Exception):
    pass


def build_parser(add_help=True):
    """The argument parser; add_help=False for a parent parser (./kml verify's)."""
    ap = _Parser(prog="kml verify", add_help=add_help,
                 description="Disassemble the executable segments of ELF programs, their "
                             "interpreter and shared libraries, and report privileged or "
                             "segment-altering x86-64 instructions (admission check for "
                             "kernel mode).")
    ap.add_argument("files", nargs="*", metavar="FILE")
    ap.add_argument("--no-libs", action="store_true",
                    help="scan only the named files, not PT_INTERP and DT_NEEDED libraries")
    ap.add_argument("--root", metavar="DIR",
                    help="resolve the interpreter and libraries inside DIR (a guest image)")
    ap.add_argument("--strict", action="store_true",
                    help="warnings (hlt) fail the scan too")
    ap.add_argument("--json", action="store_true", help="machine-readable report")
    ap.add_argument("--max-findings", type=int, default=20, metavar="N",
                    help="findings listed per file in the text report (0: all; default 20)")
    modes = ap.add_mutually_exclusive_group()
    modes.add_argument("--mark", action="store_true",
                       help=f"after a clean scan, record it in the {mark.XATTR} xattr of "
                            "each named FILE (needs root)")
    modes.add_argument("--check-mark", action="store_true",
                       help=f"do not scan: check that each FILE carries a valid {mark.XATTR}")
    modes.add_argument("--policy", action="store_true",
                       help="print the instruction policy and exit")
    return ap


def print_policy(out):
    """The instruction list with categories, severities and reasons."""
    print(f"{SCANNER_VERSION}, policy {policy_id()}", file=out)
    for mnemonics, rule in sorted(policy.policy_table(), key=lambda mr: (mr[1].category,
                                                                          mr[0])):
        print(f"\n[{rule.category}] {rule.severity}: {rule.reason}", file=out)
        print("  " + " ".join(mnemonics), file=out)


def _finding_json(f):
    return {"offset": f.offset, "vaddr": f.vaddr, "bytes": f.raw, "text": f.text,
            "mnemonic": f.mnemonic, "symbol": f.symbol, "category": f.rule.category,
            "severity": f.severity, "reason": f.rule.reason}


def _report_json(r, strict):
    return {"path": r.path, "role": r.role, "needed_by": r.needed_by, "kind": r.kind,
            "executable_segments": r.segments,
            "ranges": [{"offset": o, "vaddr": v, "size": n} for o, v, n in r.ranges],
            "instructions": r.instructions, "undecodable": r.undecodable,
            "passed": r.passed(strict), "findings": [_finding_json(f) for f in r.findings]}


def print_text(reports, strict, max_findings, out):
    """The human-readable report."""
    rules = {}
    for r in reports:
        origin = f" ({r.role} of {r.needed_by})" if r.needed_by else ""
        errors, warnings = r.count(policy.ERROR), r.count(policy.WARNING)
        verdict = "OK" if r.passed(strict) else "FLAGGED"
        counts = f"{errors} error(s), {warnings} warning(s)"
        print(f"{r.path}{origin}: {verdict} -- {counts}", file=out)
        print(f"  {r.kind}; {r.segments} executable segment(s), {r.instructions} "
              f"instructions decoded, {r.undecodable} undecodable", file=out)
        shown = r.findings if max_findings <= 0 else r.findings[:max_findings]
        for f in shown:
            rules[f.rule.category] = f.rule
            where = f"vaddr {f.vaddr:#x}" + (f" <{f.symbol}>" if f.symbol else "")
            print(f"    {f.severity:<7} offset {f.offset:#x} ({where}): {f.raw:<17} "
                  f"{f.text:<32} [{f.rule.category}]", file=out)
        if len(shown) < len(r.findings):
            print(f"    ... {len(r.findings) - len(shown)} more (--max-findings 0 lists all)",
                  file=out)
    if rules:
        print("\nwhy:", file=out)
        for cat, rule in sorted(rules.items()):
            print(f"  [{cat}] {rule.reason}", file=out)
    bad = [r for r in reports if not r.passed(strict)]
    if bad:
        print(f"\nresult: FLAGGED -- {len(bad)} of {len(reports)} file(s) contain instructions "
              f"that must not run in kernel mode", file=out)
    else:
        warn = sum(r.count(policy.WARNING) for r in reports)
        note = f" ({warn} warning(s) allowed; --strict rejects them)" if warn else ""
        print(f"\nresult: clean -- {len(reports)} file(s) scanned{note}", file=out)


def do_check_mark(files, as_json, out):
    """``--check-mark``: verify marks without scanning."""
    status, results = EXIT_CLEAN, []
    for path in files:
        try:
            ok, message = mark.check_mark(path)
        except (OSError, mark.MarkError) as e:
            print(f"kml verify: {path}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
            return EXIT_ERROR
        results.append({"path": path, "ok": ok, "message": message})
        if not ok:
            status = EXIT_FLAGGED
    if as_json:
        json.dump({"scanner": SCANNER_VERSION, "policy": policy_id(), "marks": results},
                  out, indent=2)
        print(file=out)
    else:
        for r in results:
            print(f"{r['path']}: {r['message']}", file=out)
    return status


def main(argv, out=None):
    """Run ``kml verify`` with ``argv`` (without the program name); return the exit status."""
    try:
        return _main(argv, out or sys.stdout)
    except BrokenPipeError:            # the reader went away, e.g. `kml verify ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


def _main(argv, out):
    try:
        args = build_parser().parse_args(argv)
    except _Usage as e:
        print(e, file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as e:          # --help
        return EXIT_CLEAN if not e.code else EXIT_ERROR
    return run(args, out)


def run(args, out=None):
    """Run ``kml verify`` with parsed arguments (build_parser()'s); return the exit status."""
    out = out or sys.stdout
    if args.policy:
        print_policy(out)
        return EXIT_CLEAN
    if not args.files:
        print("kml verify: no FILE given (kml verify --help)", file=sys.stderr)
        return EXIT_ERROR
    if args.root is not None and not os.path.isdir(args.root):
        print(f"kml verify: --root {args.root}: not a directory", file=sys.stderr)
        return EXIT_ERROR
    if args.check_mark:
        return do_check_mark(args.files, args.json, out)
    try:
        before = {p: mark.file_sha256(p) for p in args.files} if args.mark else {}
        reports = scanner.scan(args.files, follow_libs=not args.no_libs, root=args.root)
    except (scanner.ScanError, disasm.DisassemblerError) as e:
        print(f"kml verify: {e}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:
        print(f"kml verify: {e.filename}: {e.strerror}", file=sys.stderr)
        return EXIT_ERROR
    passed = all(r.passed(args.strict) for r in reports)
    marks = []
    if args.mark and passed:
        try:
            for p in args.files:
                if mark.file_sha256(p) != before[p]:
                    raise mark.MarkError(f"{p}: the file changed during the scan; not marked")
                mark.write_mark(p, before[p], args.strict)
                marks.append({"path": p, "value": mark.mark_value(before[p], args.strict)})
        except (OSError, mark.MarkError) as e:
            print(f"kml verify: {e}", file=sys.stderr)
            return EXIT_ERROR
    if args.json:
        json.dump({"scanner": SCANNER_VERSION, "policy": policy_id(), "strict": args.strict,
                   "result": "clean" if passed else "flagged",
                   "files": [_report_json(r, args.strict) for r in reports],
                   "marks": marks}, out, indent=2)
        print(file=out)
    else:
        print_text(reports, args.strict, args.max_findings, out)
        for m in marks:
            print(f"marked {m['path']}: {mark.XATTR}=\"{m['value']}\"", file=out)
        if args.mark and not passed:
            print("not marked: the scan did not pass", file=out)
    return EXIT_CLEAN if passed else EXIT_FLAGGED
