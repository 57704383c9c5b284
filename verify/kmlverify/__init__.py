"""kmlverify: the admission scan for programs that are to run in kernel mode.

In the spirit of the Go! OS code scanning: disassemble every executable
segment of an x86-64 ELF program, of its interpreter and of the shared
libraries it loads, and report privileged or segment-altering instructions
(:mod:`kmlverify.policy` lists them with reasons).  A clean scan can be
recorded in the ``trusted.kml.verified`` extended attribute
(:mod:`kmlverify.mark`).  ``./kml verify`` runs :func:`kmlverify.cli.main`.

A scan is a necessary, not a sufficient, condition for safety: see
docs/verification.md ("What a scan guarantees").
"""

import hashlib

from . import policy

#: Version of the scanner; part of every mark.
SCANNER_VERSION = "kmlverify-1"


def policy_id():
    """A short fingerprint of the instruction policy: marks made under a
    different policy no longer verify."""
    text = repr(sorted((m, r.category, r.severity) for m, r in policy.MNEMONIC_RULES.items()))
    text += repr((policy.SEGMENT_WRITE, policy.CONTROL_REGISTER, sorted(policy.PREFIXES)))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
