"""Unit tests of the patch-series workflow on a tiny synthetic "kernel"."""
import os
import subprocess
import tarfile

import pytest

from kmltool import patches

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
MAKEFILE = "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = {}\nEXTRAVERSION =\n"


def make_tarball(tmp, sublevel=117):
    src = tmp / f"src{sublevel}" / "linux-source-6.12"
    src.mkdir(parents=True)
    (src / "Makefile").write_text(MAKEFILE.format(sublevel))
    (src / "a.c").write_text("int a;\nint b;\nint c;\n")
    (src / ".gitignore").write_text("*.o\n/*\n!/debian/\n")
    tb = tmp / f"linux-source-6.12-{sublevel}.tar.xz"
    with tarfile.open(tb, "w:xz") as t:
        t.add(src, arcname="linux-source-6.12")
    return tb


def make_patch(tmp, name, before, after, path="a.c"):
    """A git format-patch file changing path from before to after."""
    repo = tmp / f"mk-{name}"
    repo.mkdir()
    subprocess.run(GIT + ["init", "-q"], cwd=repo, check=True)
    (repo / path).write_text(before)
    subprocess.run(GIT + ["add", "."], cwd=repo, check=True)
    subprocess.run(GIT + ["commit", "-qm", "base"], cwd=repo, check=True)
    (repo / path).write_text(after)
    subprocess.run(GIT + ["commit", "-qam", f"{name}: change {path}"], cwd=repo, check=True)
    out = subprocess.run(GIT + ["format-patch", "-1", "--stdout"], cwd=repo,
                         check=True, capture_output=True, text=True).stdout
    return out


@pytest.fixture
def env(tmp_path):
    pdir = tmp_path / "patches"
    pdir.mkdir()
    base = tmp_path / "BASE"
    base.write_text("6.12.117\n")
    return tmp_path, pdir, base


def write_series(pdir, items):
    for name, text in items:
        (pdir / name).write_text(text)
    (pdir / "series").write_text("# test\n" + "".join(n + "\n" for n, _ in items))


def test_series_applies_as_commits(env):
    tmp, pdir, base = env
    good = make_patch(tmp, "good", "int a;\nint b;\nint c;\n", "int a;\nint b2;\nint c;\n")
    write_series(pdir, [("0001-good.patch", good)])
    tree = patches.create_tree(tmp / "linux", make_tarball(tmp), pdir, base)
    assert (tree / "a.c").read_text() == "int a;\nint b2;\nint c;\n"
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tree, capture_output=True,
                         text=True).stdout.split("\n")
    assert log[0] == "good: change a.c" and log[1].startswith("Linux 6.12.117")
    st = patches.load_state(tree)
    assert st["series"] == patches.series_digest(pdir) and st["head"] == patches.head(tree)


def test_broken_patch_is_reported_by_name_and_file(env, capsys):
    tmp, pdir, base = env
    good = make_patch(tmp, "good", "int a;\nint b;\nint c;\n", "int a;\nint b2;\nint c;\n")
    broken = make_patch(tmp, "broken", "int x;\nint y;\nint z;\n", "int x;\nint Y;\nint z;\n")
    write_series(pdir, [("0001-good.patch", good), ("0002-broken.patch", broken)])
    with pytest.raises(patches.PatchApplyError) as e:
        patches.create_tree(tmp / "linux", make_tarball(tmp), pdir, base)
    msg = str(e.value)
    assert "patch 0002-broken.patch does not apply" in msg
    assert e.value.files == ["a.c"] and "failed in a.c" in msg
    assert "linux.failed" in msg and "NOT used for builds" in msg
    # The half-applied tree is moved aside, never left where builds look.
    assert not (tmp / "linux").exists() and (tmp / "linux.failed" / "a.c").exists()


def test_missing_file_is_reported(env):
    tmp, pdir, base = env
    p = make_patch(tmp, "nofile", "x\n", "y\n", path="b.c")
    write_series(pdir, [("0001-nofile.patch", p)])
    with pytest.raises(patches.PatchApplyError) as e:
        patches.create_tree(tmp / "linux", make_tarball(tmp), pdir, base)
    assert "0001-nofile.patch" in str(e.value) and "b.c" in str(e.value)


def test_series_listing_missing_patch(env):
    tmp, pdir, base = env
    (pdir / "series").write_text("0001-absent.patch\n")
    with pytest.raises(patches.KmlError, match="0001-absent.patch listed but not found"):
        patches.create_tree(tmp / "linux", make_tarball(tmp), pdir, base)


def test_version_mismatch_warns_then_applies(env, capsys):
    tmp, pdir, base = env
    write_series(pdir, [])
    patches.create_tree(tmp / "linux", make_tarball(tmp, sublevel=120), pdir, base)
    err = capsys.readouterr().err
    assert "made for Linux 6.12.117" in err and "source is Linux 6.12.120" in err


def test_export_round_trip(env):
    tmp, pdir, base = env
    write_series(pdir, [])
    tb = make_tarball(tmp)
    tree = patches.create_tree(tmp / "linux", tb, pdir, base)
    (tree / "new.c").write_text("int n;\n")      # new files are visible to git
    assert "new.c" in subprocess.run(["git", "status", "--porcelain"], cwd=tree,
                                     capture_output=True, text=True).stdout
    subprocess.run(GIT + ["add", "new.c"], cwd=tree, check=True)
    subprocess.run(GIT + ["commit", "-qm", "kml: add new.c"], cwd=tree, check=True)
    names = patches.export_series(tree, pdir, base)
    assert names == ["kml-add-new.c.patch"]     # no number: stable names
    assert patches.read_series(pdir) == names
    tree2 = patches.create_tree(tmp / "linux2", tb, pdir, base)
    assert (tree2 / "new.c").read_text() == "int n;\n"


def _commit(tree, path, text, subject):
    # a fixed date: the same commit made again must export the same text,
    # whichever second it is made in
    date = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
            "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000"}
    (tree / path).write_text(text)
    subprocess.run(GIT + ["add", path], cwd=tree, check=True)
    subprocess.run(GIT + ["commit", "-qm", subject], cwd=tree, check=True,
                   env={**os.environ, **date})


def test_adding_a_patch_renames_no_other_file(env):
    tmp, pdir, base = env
    write_series(pdir, [])
    tree = patches.create_tree(tmp / "linux", make_tarball(tmp), pdir, base)
    _commit(tree, "x.c", "int x;\n", "kml: add x.c")
    first = patches.export_series(tree, pdir, base)
    body = (pdir / first[0]).read_text()
    subprocess.run(GIT + ["reset", "-q", "--hard", "HEAD~1"], cwd=tree, check=True)
    _commit(tree, "w.c", "int w;\n", "kml: add w.c")
    _commit(tree, "x.c", "int x;\n", "kml: add x.c")
    names = patches.export_series(tree, pdir, base)
    assert names == ["kml-add-w.c.patch", "kml-add-x.c.patch"]
    assert (pdir / first[0]).read_text() == body         # same name, same text
    assert "[PATCH]" in body and "[PATCH 1/" not in body


def test_same_subject_twice_gets_distinct_names(env):
    tmp, pdir, base = env
    write_series(pdir, [])
    tree = patches.create_tree(tmp / "linux", make_tarball(tmp), pdir, base)
    _commit(tree, "x.c", "int x;\n", "kml: change")
    _commit(tree, "y.c", "int y;\n", "kml: change")
    assert patches.export_series(tree, pdir, base) == ["kml-change.patch",
                                                       "kml-change-2.patch"]


def test_cover_letter_from_its_text_with_shortlog_and_diffstat(env):
    tmp, pdir, base = env
    write_series(pdir, [])
    tree = patches.create_tree(tmp / "linux", make_tarball(tmp), pdir, base)
    _commit(tree, "x.c", "int x;\n", "kml: add x.c")
    _commit(tree, "y.c", "int y;\n", "kml: add y.c")
    (tmp / patches.COVER_TEXT).write_text("Kernel Mode Linux\n\nThe design.\n")
    names = patches.export_series(tree, pdir, base)
    cover = (pdir / patches.COVER_LETTER).read_text()
    assert cover.startswith("From: t <t@t>\nSubject: [PATCH 0/2] Kernel Mode Linux\n")
    assert "The design." in cover and "kml: add y.c" in cover
    assert "2 files changed" in cover
    assert patches.COVER_LETTER not in patches.read_series(pdir) == names
    # the cover letter never becomes a commit of a re-created tree
    tree2 = patches.create_tree(tmp / "linux2", make_tarball(tmp / "b"), pdir, base)
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tree2, check=True,
                         capture_output=True, text=True).stdout
    assert "Kernel Mode Linux" not in log


def test_reapply_resets_local_changes(env):
    tmp, pdir, base = env
    good = make_patch(tmp, "good", "int a;\nint b;\nint c;\n", "int a;\nint b2;\nint c;\n")
    write_series(pdir, [("0001-good.patch", good)])
    tb = make_tarball(tmp)
    tree = patches.create_tree(tmp / "linux", tb, pdir, base)
    (tree / "a.c").write_text("garbage\n")
    patches.create_tree(tree, tb, pdir, base)
    assert (tree / "a.c").read_text() == "int a;\nint b2;\nint c;\n"
