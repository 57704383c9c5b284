"""Does every prefix of the kernel series build?  (./kml patches check --bisect)

A reviewer bisecting a regression lands on any patch of the series, so
each prefix must build, not only the whole.  This checks them in order:
a git worktree of build/linux (build/linux-bisect) is checked out at each
commit after kml-base and built as one kernel of kbuild.KERNELS, in its own
directory (build/obj-bisect-NAME), so the regular builds are untouched.
The configuration is the kernel's own, merged without kbuild's check that
every option survived: options that a later patch adds do not exist yet.
Git only rewrites the files a patch changes, so after the first prefix
each build is incremental (and ccache serves what was compiled before).
"""
import subprocess
import time

from . import kbuild, patches, paths
from .paths import KmlError
from .util import run, say

WORKTREE = paths.BUILD / "linux-bisect"


def series_commits(tree):
    """[(commit, subject)] of the series, oldest first."""
    out = subprocess.run(["git", "log", "--reverse", "--format=%H %s",
                          f"{patches.BASE_TAG}..HEAD"], cwd=tree, check=True,
                         capture_output=True, text=True).stdout
    return [tuple(line.split(" ", 1)) for line in out.splitlines()]


def _worktree(tree):
    if not (WORKTREE / ".git").exists():
        subprocess.run(["git", "worktree", "prune"], cwd=tree, check=True)
        run(["git", "worktree", "add", "-q", "--detach", str(WORKTREE),
             patches.BASE_TAG], cwd=tree, capture=True)
    return WORKTREE


def _configure(wt, k):
    """The kernel's starting config and fragments, merged leniently."""
    k.obj.mkdir(parents=True, exist_ok=True)
    for base in k.base:
        if isinstance(base, str):
            kbuild.make(wt, k, base, capture=True)
        else:
            base.write(wt, k)
    run([str(wt / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(k.obj),
         str(k.obj / ".config"), *map(str, kbuild.fragments(k))], cwd=wt, capture=True)
    kbuild.make(wt, k, "olddefconfig", capture=True)


def check(kernel=None, first=1, last=None, tail=40):
    """Build prefixes first..last (1-based, inclusive) of the series; stop
    at the first that fails.  Returns 0 if all built, else 1."""
    tree = patches.ensure_tree()
    commits = series_commits(tree)
    last = len(commits) if last is None else last
    if not 1 <= first <= last <= len(commits):
        raise KmlError(f"--first/--last must lie within 1..{len(commits)} "
                       f"with first <= last (got {first}..{last})")
    base = kbuild.kernel(kernel)
    k = kbuild.Kernel(f"{base.name}-bisect", base.fragments,
                      paths.BUILD / f"obj-bisect-{base.name}", base.text, base=base.base)
    wt = _worktree(tree)
    say(f"building prefixes {first}..{last} of {len(commits)} as the {base.name} "
        f"kernel in {wt} (objects in {k.obj})")
    for n in range(first, last + 1):
        commit, subject = commits[n - 1]
        run(["git", "checkout", "-q", "--detach", "--force", commit], cwd=wt)
        start = time.monotonic()
        try:
            _configure(wt, k)
            kbuild.make(wt, k, "bzImage", capture=True)
        except KmlError as e:
            lines = str(e).splitlines()
            print(f"FAIL {n}/{len(commits)} {subject}\n" + "\n".join(lines[-tail:]))
            return 1
        print(f"ok   {n}/{len(commits)} {subject} ({time.monotonic() - start:.0f} s)",
              flush=True)
    return 0
