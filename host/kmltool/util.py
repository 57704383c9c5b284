"""Small helpers shared by the host modules."""
import hashlib
import subprocess
import sys

from .paths import KmlError


def say(msg):
    print(f"kml: {msg}", file=sys.stderr, flush=True)


def run(cmd, cwd=None, check=True, capture=False, env=None):
    """Run a command; on failure raise KmlError naming the command."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, text=True,
                           stdout=subprocess.PIPE if capture else None,
                           stderr=subprocess.STDOUT if capture else None)
    except FileNotFoundError as e:
        raise KmlError(f"{cmd[0]}: not found ({e}); run ./kml setup") from e
    if check and p.returncode != 0:
        detail = f":\n{p.stdout.strip()}" if capture and p.stdout else ""
        raise KmlError(f"command failed ({p.returncode}): {' '.join(map(str, cmd))}{detail}")
    return p


def digest(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def number(v):
    """v if it is a number (from JSON), else None."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
