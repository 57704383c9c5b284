"""The verification mark: an extended attribute recording a clean scan.

``trusted.kml.verified`` holds one ASCII line::

    kmlverify-1 policy=<12 hex> mode=<default|strict> sha256=<64 hex>

naming the scanner version, the instruction policy it applied, whether
warnings were allowed, and the SHA-256 of the file's contents when it was
scanned.  ``trusted.*`` attributes can be written and read only with
CAP_SYS_ADMIN, so an unprivileged user can neither forge nor see a mark.

The kernel enforces it behind a switch (kml_require_mark=1 or the sysctl
kernel.kml_require_mark, docs/verification.md): a program is admitted to
kernel mode only if it carries a well-formed mark whose hash matches its
contents.
"""

import errno
import hashlib
import os
import re

from . import SCANNER_VERSION, policy_id

XATTR = "trusted.kml.verified"
_VALUE = re.compile(r"^(\S+) policy=([0-9a-f]+) mode=(default|strict) sha256=([0-9a-f]{64})$")


class MarkError(Exception):
    """The mark could not be written or read (permissions, filesystem)."""


def file_sha256(path):
    """Hex SHA-256 of a file's contents."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def mark_value(digest, strict=False):
    """The attribute value for a file whose contents hash to ``digest``."""
    mode = "strict" if strict else "default"
    return f"{SCANNER_VERSION} policy={policy_id()} mode={mode} sha256={digest}"


def write_mark(path, digest, strict=False, name=None):
    """Set the mark (attribute ``name``, default :data:`XATTR`) on ``path``;
    raise :class:`MarkError` on failure."""
    name = name or XATTR
    try:
        os.setxattr(path, name, mark_value(digest, strict).encode())
    except OSError as e:
        hint = " (writing trusted.* attributes needs CAP_SYS_ADMIN, i.e. root)" \
            if e.errno in (errno.EPERM, errno.EACCES) and name.startswith("trusted.") else ""
        raise MarkError(f"{path}: cannot set {name}: {e.strerror}{hint}") from e


def check_mark(path, name=None):
    """``(ok, message)`` for the mark (attribute ``name``, default
    :data:`XATTR`) on ``path``.

    ``ok`` is true when the mark exists, was written by this scanner
    version under this policy, and its hash matches the file's contents.
    Raises :class:`OSError` if the file cannot be read.
    """
    name = name or XATTR
    digest = file_sha256(path)
    try:
        raw = os.getxattr(path, name)
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.EOPNOTSUPP):
            hint = "" if os.geteuid() == 0 or not name.startswith("trusted.") else \
                " (trusted.* attributes are visible only to root)"
            return False, f"no {name} mark{hint}"
        raise MarkError(f"{path}: cannot read {name}: {e.strerror}") from e
    value = raw.decode("ascii", "replace").strip()
    m = _VALUE.match(value)
    if m is None:
        return False, f"malformed mark {value!r}"
    version, pol, mode, marked = m.groups()
    if version != SCANNER_VERSION or pol != policy_id():
        return False, (f"mark from {version} policy={pol}; this is {SCANNER_VERSION} "
                       f"policy={policy_id()}: scan again")
    if marked != digest:
        return False, "stale mark: the file changed after it was marked"
    return True, f"mark OK ({version}, policy {pol}, mode {mode}, sha256 {digest[:16]}...)"
