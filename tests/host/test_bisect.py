"""./kml patches check --bisect on a tiny synthetic "kernel": a Makefile
whose bzImage target fails while a file says so."""
import subprocess

import pytest

from kmltool import bisect, kbuild, patches

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
MAKEFILE = """\
tinyconfig:
\t@echo CONFIG_A=y > $(O)/.config
olddefconfig:
\t@true
bzImage:
\t@grep -q broken $(CURDIR)/state && echo "state.c:1: error: broken" && exit 1 || true
\t@cp $(CURDIR)/state $(O)/built
"""
MERGE = "#!/bin/sh\nexit 0\n"


@pytest.fixture
def series(tmp_path, monkeypatch):
    tree = tmp_path / "linux"
    (tree / "scripts" / "kconfig").mkdir(parents=True)
    (tree / "Makefile").write_text(MAKEFILE)
    merge = tree / "scripts" / "kconfig" / "merge_config.sh"
    merge.write_text(MERGE)
    merge.chmod(0o755)
    (tree / "state").write_text("base\n")
    subprocess.run(GIT + ["init", "-q"], cwd=tree, check=True)
    subprocess.run(GIT + ["add", "."], cwd=tree, check=True)
    subprocess.run(GIT + ["commit", "-qm", "base"], cwd=tree, check=True)
    subprocess.run(GIT + ["tag", patches.BASE_TAG], cwd=tree, check=True)

    def commit(text, subject):
        (tree / "state").write_text(text)
        subprocess.run(GIT + ["commit", "-qam", subject], cwd=tree, check=True)

    frag = tmp_path / "frag.config"
    frag.write_text("CONFIG_A=y\n")
    monkeypatch.setattr(patches, "ensure_tree", lambda: tree)
    monkeypatch.setattr(bisect, "WORKTREE", tmp_path / "linux-bisect")
    monkeypatch.setattr(bisect.paths, "BUILD", tmp_path)
    monkeypatch.setitem(kbuild.KERNELS, "fake",
                        kbuild.Kernel("fake", [frag], tmp_path / "obj-fake", "test"))
    monkeypatch.setattr(kbuild.shutil, "which", lambda name: None)    # no ccache
    return tmp_path, commit


def test_every_prefix_builds(series, capsys):
    tmp, commit = series
    commit("one\n", "kml: one")
    commit("two\n", "kml: two")
    assert bisect.check("fake") == 0
    out = capsys.readouterr().out
    assert "ok   1/2 kml: one" in out and "ok   2/2 kml: two" in out
    assert (tmp / "obj-bisect-fake" / "built").read_text() == "two\n"


def test_a_prefix_that_does_not_build_is_named(series, capsys):
    tmp, commit = series
    commit("one\n", "kml: one")
    commit("broken\n", "kml: breaks the build")
    commit("fixed\n", "kml: fixes it again")
    assert bisect.check("fake") == 1
    out = capsys.readouterr().out
    assert "FAIL 2/3 kml: breaks the build" in out and "error: broken" in out
    assert "3/3" not in out                     # it stops at the first


def test_range_is_checked(series):
    _, commit = series
    commit("one\n", "kml: one")
    with pytest.raises(patches.KmlError, match="within 1..1"):
        bisect.check("fake", first=2)


def test_patches_check_bisect_options(monkeypatch):
    from kmltool import cli
    from kmltool.commands import patches as cmd
    calls = []
    monkeypatch.setattr(cmd.setup, "setup", lambda quiet: None)
    monkeypatch.setattr(cmd.patches, "ensure_tree", lambda: "tree")
    monkeypatch.setattr(cmd.patches, "checkpatch", lambda tree: 0)
    monkeypatch.setattr(cmd.bisect, "check",
                        lambda kernel, first, last: calls.append((kernel, first, last)) or 1)
    a = cli.build_parser().parse_args(["patches", "check"])
    assert a.func(a) == 0 and calls == []
    a = cli.build_parser().parse_args(["patches", "check", "--bisect", "--last", "5"])
    assert a.func(a) == 1 and calls == [(None, 1, 5)]
    a = cli.build_parser().parse_args(["patches", "check", "--first", "3"])
    with pytest.raises(patches.KmlError, match="add --bisect"):
        a.func(a)
