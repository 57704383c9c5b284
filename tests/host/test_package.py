"""Unit tests: ./kml package's version, the series recorded in the image
package, and taking the kernel back out of it for ./kml run --deb.  The
packages here are made with dpkg-deb from fake trees; the real bindeb-pkg
run is ./kml package (docs/kernels.md)."""
import hashlib
import subprocess

import pytest

from kmltool import cli, package
from kmltool.paths import KmlError

RELEASE = "6.12.117-kml-defconfig"
VERSION = "6.12.117-31+kml.0123abcd"


def test_package_version_names_the_series():
    assert package.package_version("6.12.117", "0123abcd" * 8, 31) == VERSION
    with pytest.raises(KmlError, match="not a release number"):
        package.package_version("6.12.117-rc1", "0123abcd", 31)
    with pytest.raises(KmlError, match="not hexadecimal"):
        package.package_version("6.12.117", "xyz", 31)
    assert package.image_deb_name(RELEASE, VERSION) == \
        f"linux-image-{RELEASE}_{VERSION}_amd64.deb"


def fake_image_deb(tmp_path, pkg=f"linux-image-{RELEASE}", kernels=("vmlinuz",)):
    """A package shaped like bindeb-pkg's image package."""
    root = tmp_path / "pkgroot"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "boot").mkdir()
    for k in kernels:
        (root / "boot" / f"{k}-{RELEASE}").write_bytes(b"MZ fake bzImage " + k.encode())
    doc = root / "usr" / "share" / "doc" / pkg
    doc.mkdir(parents=True)
    (doc / "copyright").write_text("GPL-2.0\n")
    (root / "DEBIAN" / "control").write_text(
        f"Package: {pkg}\nVersion: {VERSION}\nArchitecture: amd64\n"
        "Maintainer: kml <kml@localhost>\nDescription: test\n")
    sums = [f"{hashlib.md5(p.read_bytes()).hexdigest()}  {p.relative_to(root)}"
            for p in sorted(root.rglob("*")) if p.is_file() and "DEBIAN" not in p.parts]
    (root / "DEBIAN" / "md5sums").write_text("\n".join(sums) + "\n")
    deb = tmp_path / "image.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)],
                   check=True, capture_output=True)
    return deb


def test_the_series_is_recorded_in_the_image_package(tmp_path):
    deb = fake_image_deb(tmp_path)
    pdir = tmp_path / "patches"
    pdir.mkdir()
    (pdir / "0001-a.patch").write_text("From: a\n")
    (pdir / "0002-b.patch").write_text("From: b\n")
    (pdir / "series").write_text("0001-a.patch\n0002-b.patch\n")
    (pdir / "notes.txt").write_text("not part of the series\n")
    base = tmp_path / "BASE"
    base.write_text("6.12.117\n")
    out = package.record_series(deb, RELEASE, pdir, base, "summary line\n",
                                out=tmp_path / "new.deb")
    files = subprocess.run(["dpkg-deb", "-c", str(out)], check=True, capture_output=True,
                           text=True).stdout
    doc = f"./usr/share/doc/linux-image-{RELEASE}/kml"
    for name in ("patches/0001-a.patch", "patches/0002-b.patch", "patches/series",
                 "BASE", "SERIES"):
        assert f"{doc}/{name}" in files, name
    assert "notes.txt" not in files
    assert "root/root" in files and "-rw-r--r--" in files
    x = tmp_path / "x"
    subprocess.run(["dpkg-deb", "-x", str(out), str(x)], check=True)
    assert (x / doc / "SERIES").read_text() == "summary line\n"
    # every file, the recorded series included, has its md5sum
    ctl = tmp_path / "ctl"
    subprocess.run(["dpkg-deb", "-e", str(out), str(ctl)], check=True)
    sums = dict(reversed(line.split("  ", 1))
                for line in (ctl / "md5sums").read_text().splitlines())
    for p in x.rglob("*"):
        if p.is_file():
            rel = str(p.relative_to(x))
            assert sums.get(rel) == hashlib.md5(p.read_bytes()).hexdigest(), rel
    with pytest.raises(KmlError, match="already has"):
        package.record_series(out, RELEASE, pdir, base, "again\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(KmlError, match="no patches"):
        package.record_series(deb, RELEASE, empty, base, "x\n")


def test_kernel_from_deb(tmp_path):
    k = package.kernel_from_deb(fake_image_deb(tmp_path), tmp_path / "u")
    assert k.release() == RELEASE and k.bzimage.read_bytes() == b"MZ fake bzImage vmlinuz"
    with pytest.raises(KmlError, match="no such file"):
        package.kernel_from_deb(tmp_path / "nope.deb", tmp_path / "u2")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(KmlError, match="not a kernel image package"):
        package.kernel_from_deb(fake_image_deb(other, pkg="linux-libc-dev"), tmp_path / "u3")
    junk = tmp_path / "junk.deb"
    junk.write_text("not a package")
    with pytest.raises(KmlError, match="not a kernel image package"):
        package.kernel_from_deb(junk, tmp_path / "u4")
    two = tmp_path / "two"
    two.mkdir()
    with pytest.raises(KmlError, match="2 kernels"):
        package.kernel_from_deb(fake_image_deb(two, kernels=("vmlinuz", "vmlinuz-old")),
                                tmp_path / "u5")


def test_run_refuses_deb_with_kernel(capsys):
    assert cli.main(["run", "--deb", "x.deb", "--kernel", "debug", "--", "true"]) == 1
    assert "leave out --kernel" in capsys.readouterr().err
    assert cli.main(["run", "--deb", "/nonexistent.deb", "--", "true"]) == 1
    assert "no such file" in capsys.readouterr().err
