"""The patch series itself: checkpatch-clean (needs the tree ./kml build made)."""
import pytest

from kmltool import paths, patches


def test_series_is_checkpatch_clean(capsys):
    if not (paths.TREE / "scripts" / "checkpatch.pl").exists():
        pytest.skip("no kernel tree yet: ./kml build creates it")
    assert patches.checkpatch(paths.TREE) == 0, capsys.readouterr().out


def test_series_lists_every_patch_file():
    listed = set(patches.read_series())
    on_disk = {p.name for p in paths.PATCH_DIR.glob("*.patch")}
    assert listed == on_disk - {patches.COVER_LETTER}
