"""The kernel patch series: apply it onto a scratch git tree, export it back.

kernel/patches/series lists the patches in order; kernel/BASE names the
upstream version the series was made for.  The scratch tree (build/linux) is
the Debian linux-source tarball committed as one base commit (tag kml-base)
with every patch applied by "git am" as its own commit.  A patch that does
not apply leaves no usable tree: the error names the patch and the files,
and the half-applied tree is moved aside for inspection.
"""
import glob
import json
import os
import re
import shutil
import subprocess

from . import paths
from .paths import KmlError
from .util import digest, run, say

BASE_TAG = "kml-base"
COVER_LETTER = "0000-cover-letter.patch"    # beside the patches, not in series
COVER_TEXT = "cover-letter.txt"             # beside the patch directory
STATE = "kml-state.json"          # inside the tree's .git directory
GIT_ID = ["-c", "user.name=kml", "-c", "user.email=kml@localhost",
          "-c", "commit.gpgsign=false"]


class PatchApplyError(KmlError):
    def __init__(self, patch, files, detail, tree):
        self.patch, self.files, self.tree = patch, files, tree
        where = ", ".join(files) if files else "(see git am output below)"
        super().__init__(
            f"patch {patch} does not apply: failed in {where}\n"
            f"{detail.strip()}\n"
            f"The partly patched tree was left in {tree} (git am stopped at "
            f"{patch}) and is NOT used for builds.\n"
            f"To fix: refresh the patch for this source (cd {tree}; resolve; "
            f"git add FILES; git am --continue), then run "
            f"./kml patches export --from {tree}; or install the kernel "
            f"version the series was made for (see kernel/BASE).")


def source_tarball():
    env = os.environ.get("KML_SOURCE_TARBALL")
    if env:
        return env
    found = sorted(glob.glob("/usr/src/linux-source-6.12.tar.*"))
    if not found:
        raise KmlError("no /usr/src/linux-source-6.12.tar.*: run ./kml setup "
                       "(installs Debian's linux-source-6.12)")
    return found[-1]


def read_series(patch_dir=None):
    patch_dir = patch_dir or paths.PATCH_DIR
    series = patch_dir / "series"
    if not series.exists():
        raise KmlError(f"{series}: missing")
    names = []
    for n, line in enumerate(series.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if not (patch_dir / line).is_file():
            raise KmlError(f"{series}:{n}: patch {line} listed but not found")
        names.append(line)
    return names


def series_digest(patch_dir=None):
    patch_dir = patch_dir or paths.PATCH_DIR
    names = read_series(patch_dir)
    return digest(*names, *((patch_dir / n).read_bytes() for n in names))


def tree_version(tree):
    """VERSION.PATCHLEVEL.SUBLEVEL from a tree's top Makefile."""
    vals = {}
    with open(tree / "Makefile") as f:
        for line in f:
            m = re.match(r"(VERSION|PATCHLEVEL|SUBLEVEL)\s*=\s*(\d+)", line)
            if m:
                vals[m.group(1)] = m.group(2)
            if len(vals) == 3:
                break
    return f"{vals.get('VERSION')}.{vals.get('PATCHLEVEL')}.{vals.get('SUBLEVEL')}"


def base_version(base_file=None):
    base_file = base_file or paths.BASE_FILE
    if not base_file.exists():
        return None
    m = re.search(r"\b(\d+\.\d+\.\d+)\b", base_file.read_text())
    return m.group(1) if m else None


def _git(tree, *args, check=True, capture=True):
    return run(["git", *GIT_ID, *args], cwd=tree, check=check, capture=capture)


def _tarball_id(tarball):
    st = os.stat(tarball)
    return {"path": str(tarball), "size": st.st_size, "mtime": int(st.st_mtime)}


def load_state(tree):
    try:
        return json.loads((tree / ".git" / STATE).read_text())
    except (OSError, ValueError):
        return None


def _save_state(tree, state):
    (tree / ".git" / STATE).write_text(json.dumps(state, indent=1))


def head(tree):
    return _git(tree, "rev-parse", "HEAD").stdout.strip()


def _failed_files(output):
    files = []
    pats = [r"error: patch failed: ([^:\n]+):\d+",
            r"error: ([^:\n]+): does not exist in index",
            r"error: ([^:\n]+): already exists in index",
            r"error: ([^:\n]+): patch does not apply",
            r"sha1 information is lacking or useless \(([^)\n]+)\)",
            r"CONFLICT \([^)]*\): (?:Merge conflict in )?(\S+)"]
    for p in pats:
        for m in re.finditer(p, output):
            if m.group(1) not in files:
                files.append(m.group(1))
    return files


def apply_series(tree, patch_dir=None, failed_dir=None):
    """git am every patch of the series onto tree, or raise PatchApplyError."""
    patch_dir = patch_dir or paths.PATCH_DIR
    names = read_series(patch_dir)
    for i, name in enumerate(names, 1):
        say(f"applying [{i}/{len(names)}] {name}")
        p = _git(tree, "am", "--3way", "--keep-cr", str(patch_dir / name),
                 check=False)
        if p.returncode != 0:
            files = _failed_files(p.stdout)
            if failed_dir is not None:
                if failed_dir.exists():
                    shutil.rmtree(failed_dir)
                shutil.move(str(tree), str(failed_dir))
                tree = failed_dir
            raise PatchApplyError(name, files, p.stdout, tree)
    return names


def _drop_debian_ignore_all(tree):
    """Debian's tarball ignores every top-level path ("/*"), which would hide
    new files from git in the scratch tree; drop just those two lines."""
    gi = tree / ".gitignore"
    if gi.exists():
        lines = gi.read_text().splitlines(keepends=True)
        gi.write_text("".join(ln for ln in lines if ln.strip() not in ("/*", "!/debian/")))


def create_tree(tree=None, tarball=None, patch_dir=None, base_file=None):
    """(Re)create the scratch tree: base commit from the tarball + the series."""
    tree = tree or paths.TREE
    patch_dir = patch_dir or paths.PATCH_DIR
    tarball = tarball or source_tarball()
    failed = tree.with_name(tree.name + ".failed")
    state = load_state(tree) if tree.exists() else None
    if state and state.get("tarball") == _tarball_id(tarball):
        # Same source: reset to the base commit and re-apply (fast, and only
        # the files the patches touch get new timestamps).
        say(f"resetting {tree} to {BASE_TAG}")
        _git(tree, "am", "--abort", check=False)
        _git(tree, "reset", "--quiet", "--hard", BASE_TAG)
        _git(tree, "clean", "-fdxq")
    else:
        new = tree.with_name(tree.name + ".new")
        for d in (new, failed):
            if d.exists():
                shutil.rmtree(d)
        new.mkdir(parents=True)
        say(f"extracting {tarball} (about a minute)")
        run(["tar", "-xf", tarball, "--strip-components=1", "-C", str(new)])
        version = tree_version(new)
        _drop_debian_ignore_all(new)
        say(f"committing Linux {version} as the base commit")
        _git(new, "init", "-q")
        _git(new, "add", "-A")
        _git(new, "commit", "-q", "--no-verify", "-m",
             f"Linux {version} (from {os.path.basename(tarball)})")
        _git(new, "tag", BASE_TAG)
        if tree.exists():
            shutil.rmtree(tree)
        new.rename(tree)
        state = {"tarball": _tarball_id(tarball)}
    version = tree_version(tree)
    want = base_version(base_file)
    if want and want != version:
        say(f"WARNING: the series was made for Linux {want} (kernel/BASE) but "
            f"the source is Linux {version}; applying anyway")
    state.update(version=version, series=None, head=None)
    _save_state(tree, state)            # marks the tree as not usable yet
    if failed.exists():
        shutil.rmtree(failed)
    names = apply_series(tree, patch_dir, failed_dir=failed)
    state.update(series=series_digest(patch_dir), head=head(tree))
    _save_state(tree, state)
    say(f"tree ready: Linux {version} + {len(names)} patch(es) in {tree}")
    return tree


def ensure_tree():
    """Make sure build/linux holds the current series; never use a stale one."""
    tree = paths.TREE
    state = load_state(tree) if tree.exists() else None
    if not state or not state.get("series"):
        return create_tree()
    local = head(tree) != state["head"]
    stale = (state["series"] != series_digest()
             or state["tarball"] != _tarball_id(source_tarball()))
    if stale and local:
        raise KmlError(
            f"{tree} has commits that are not in kernel/patches, and the "
            "series or the source changed since it was applied.  Export them "
            "(./kml patches export) or discard them (./kml patches apply).")
    if stale:
        return create_tree()
    if local:
        n = _git(tree, "rev-list", "--count", f"{state['head']}..HEAD").stdout.strip()
        say(f"note: building {tree} with {n} local commit(s) not in the series "
            "(./kml patches export writes them to kernel/patches)")
    return tree


def export_series(tree=None, patch_dir=None, base_file=None):
    """Write the tree's commits since kml-base back as the patch series."""
    tree = tree or paths.TREE
    patch_dir = patch_dir or paths.PATCH_DIR
    base_file = base_file or paths.BASE_FILE
    if not (tree / ".git").exists():
        raise KmlError(f"{tree}: no patch tree (run ./kml patches apply)")
    if _git(tree, "rev-parse", "-q", "--verify", "HEAD", check=False).returncode:
        raise KmlError(f"{tree}: no commits")
    if subprocess.run(["git", "am", "--show-current-patch"], cwd=tree,
                      capture_output=True).returncode == 0:
        raise KmlError(f"{tree}: a git am is in progress; finish it first")
    dirty = _git(tree, "status", "--porcelain", "--untracked-files=no").stdout
    if dirty.strip():
        say("WARNING: uncommitted changes in the tree are not exported:\n" + dirty)
    commits = _git(tree, "rev-list", "--reverse", f"{BASE_TAG}..HEAD").stdout.split()
    if not commits:
        raise KmlError(f"{tree}: no commits after {BASE_TAG}; nothing to export")
    patch_dir.mkdir(parents=True, exist_ok=True)
    for old in patch_dir.glob("*.patch"):
        old.unlink()
    names = _format_patches(tree, patch_dir)
    cover = write_cover_letter(tree, patch_dir, len(names))
    (patch_dir / "series").write_text(
        "# kml kernel patch series, applied in this order by ./kml patches apply\n"
        + "".join(n + "\n" for n in names))
    version = tree_version(tree)
    base_file.write_text(f"{version}\n")
    state = load_state(tree) or {}
    if tree == paths.TREE:
        state.update(series=series_digest(patch_dir), head=head(tree))
        _save_state(tree, state)
    say(f"exported {len(names)} patch(es) for Linux {version} to {patch_dir}"
        + (f" with {cover.name}" if cover else ""))
    return names


def _format_patches(tree, patch_dir):
    """git format-patch without numbers: each file is named after its
    subject alone, so adding or removing a patch renames no other file
    (the order lives in the series file).  Number them when mailing:
    git format-patch -n --cover-letter."""
    out = _git(tree, "format-patch", "--no-signature", "--zero-commit",
               "--no-numbered", "--filename-max-length=100",
               "-o", str(patch_dir), f"{BASE_TAG}..HEAD").stdout
    names = []
    for line in out.splitlines():
        if not line.strip():
            continue
        path = patch_dir / os.path.basename(line.strip())
        stem = re.sub(r"^\d{4}-", "", path.stem)
        name, n = f"{stem}.patch", 2
        while name in names or name == COVER_LETTER:
            name, n = f"{stem}-{n}.patch", n + 1
        path.rename(patch_dir / name)
        names.append(name)
    return names


def write_cover_letter(tree, patch_dir, count):
    """kernel/patches/0000-cover-letter.patch: the hand-written text of
    kernel/cover-letter.txt (first line the title, then the body), then the
    shortlog and the diffstat of the series as it is.  None if there is no
    cover-letter.txt."""
    text = patch_dir.parent / COVER_TEXT
    if not text.exists():
        return None
    title, _, body = text.read_text().partition("\n")
    author = _git(tree, "log", "-1", "--format=%an <%ae>", "HEAD").stdout.strip()
    shortlog = _git(tree, "shortlog", f"{BASE_TAG}..HEAD").stdout.rstrip()
    stat = _git(tree, "diff", "--stat=72", "--summary", BASE_TAG, "HEAD").stdout.rstrip()
    path = patch_dir / COVER_LETTER
    path.write_text(f"From: {author}\nSubject: [PATCH 0/{count}] {title.strip()}\n\n"
                    f"{body.strip()}\n\n{shortlog}\n\n{stat}\n")
    return path


def checkpatch(tree):
    """scripts/checkpatch.pl on each patch, run from the tree (as it expects);
    returns the number of patches with problems."""
    bad = 0
    env = dict(os.environ, PATH="/usr/bin:/bin:" + os.environ.get("PATH", ""))
    for name in read_series():
        p = subprocess.run([str(tree / "scripts" / "checkpatch.pl"), "--quiet",
                            str(paths.PATCH_DIR / name)], cwd=tree, env=env,
                           capture_output=True, text=True)
        if p.returncode or p.stdout.strip() or p.stderr.strip():
            bad += 1
            print(f"== {name}\n{p.stdout}{p.stderr}")
        else:
            print(f"ok  {name}")
    return 1 if bad else 0
