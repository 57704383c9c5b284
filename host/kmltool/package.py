"""./kml package: a kernel of the series as an installable Debian package.

The kernel's own bindeb-pkg target (scripts/package/) builds the package
from the kernel's build directory, so the .deb holds exactly the kernel
that ./kml build made (incremental: only init/version.o changes, for the
package revision in uname -v).  Its build profiles leave out the headers
and the debug-symbol packages, which nobody installs into a guest and
which would take longer than the kernel.  Then the series that made the
kernel is recorded in the image package: kernel/patches (the patches, the
series file) and kernel/BASE go to /usr/share/doc/linux-image-RELEASE/kml/
with a SERIES file naming the base and the series digest, and the
package's md5sums are extended to match.

The packages land in build/packages/.  kernel_from_deb() takes the
bzImage back out of an image package, for ./kml run --deb: the kernel
that boots is the one that was packaged.
"""
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from . import kbuild, paths, patches, setup
from .paths import KmlError
from .util import run, say

SOURCENAME = "linux-kml"
PROFILES = (f"pkg.{SOURCENAME}.nokernelheaders", f"pkg.{SOURCENAME}.nokerneldbg")
OUT = paths.BUILD / "packages"
DEFAULT_KERNEL = "cloud"


def package_version(base, series_digest, count):
    """The Debian version: the base release, then a revision that says
    how many patches and which series (its digest's first 8 digits).
    The revision is also the kernel's build version (uname -v: #REV)."""
    if not re.fullmatch(r"\d+(\.\d+)*", base):
        raise KmlError(f"kernel/BASE: {base!r} is not a release number")
    if not re.fullmatch(r"[0-9a-f]{8,}", series_digest):
        raise KmlError(f"series digest {series_digest!r} is not hexadecimal")
    return f"{base}-{count}+kml.{series_digest[:8]}"


def image_deb_name(release, version):
    return f"linux-image-{release}_{version}_amd64.deb"


def _md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_series(deb, release, patch_dir, base_file, summary, out=None):
    """Rewrite image package deb (to out, default in place) with the
    series under usr/share/doc/linux-image-RELEASE/kml/; return the path
    of the new package."""
    out = Path(out or deb)
    with tempfile.TemporaryDirectory(prefix="kml-deb-") as tmp:
        root = Path(tmp) / "root"
        run(["dpkg-deb", "-R", str(deb), str(root)], capture=True)
        doc = root / "usr" / "share" / "doc" / f"linux-image-{release}" / "kml"
        if doc.exists():
            raise KmlError(f"{deb}: already has {doc.relative_to(root)}")
        (doc / "patches").mkdir(parents=True)
        names = [p.name for p in sorted(Path(patch_dir).iterdir())
                 if p.suffix == ".patch" or p.name == "series"]
        if not any(n.endswith(".patch") for n in names):
            raise KmlError(f"{patch_dir}: no patches to record")
        for n in names:
            shutil.copyfile(Path(patch_dir) / n, doc / "patches" / n)
        shutil.copyfile(base_file, doc / "BASE")
        (doc / "SERIES").write_text(summary)
        added = sorted(p for p in doc.rglob("*") if p.is_file())
        for p in added:
            p.chmod(0o644)
        for d in [doc, *(p for p in doc.rglob("*") if p.is_dir())]:
            d.chmod(0o755)
        sums = root / "DEBIAN" / "md5sums"
        with open(sums, "a") as f:
            for p in added:
                f.write(f"{_md5(p)}  {p.relative_to(root)}\n")
        new = Path(tmp) / "new.deb"
        run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(new)], capture=True)
        shutil.move(str(new), out)
    return out


def series_summary(release, version, series):
    base = patches.base_version()
    return (f"Kernel Mode Linux (kml) for Linux {base}\n"
            f"kernel release: {release}\n"
            f"package version: {version}\n"
            f"patches: {len(series)} (series digest {patches.series_digest()})\n"
            "applied in the order of patches/series to linux-source-"
            f"{'.'.join(base.split('.')[:2])} ({base})\n")


def build_package(name=DEFAULT_KERNEL, version=None):
    """Build the kernel called name and its Debian packages; return the
    image package's path.  version: the package version (default: the
    series', package_version())."""
    setup.setup(quiet=True)
    k = kbuild.kernel(name)
    kbuild.build_kernel(k)
    tree = patches.ensure_tree()
    series = patches.read_series()
    version = version or package_version(patches.base_version(), patches.series_digest(),
                                         len(series))
    release = k.release()
    env = dict(kbuild.ccache_env(os.environ), KDEB_PKGVERSION=version,
               KDEB_SOURCENAME=SOURCENAME, KDEB_CHANGELOG_DIST="kml",
               DEB_BUILD_PROFILES=" ".join(PROFILES),
               DEB_BUILD_OPTIONS=f"parallel={(os.cpu_count() or 1) + 1} terse")
    say(f"packaging the {k.name} kernel {release} as {version} (bindeb-pkg)")
    made = k.obj.parent      # bindeb-pkg writes next to the build directory
    before = set(made.glob("*.deb"))
    kbuild.make(tree, k, "bindeb-pkg", env=env)
    debs = sorted(set(made.glob(f"*_{version}_*.deb")) - before) or \
        sorted(made.glob(f"*_{version}_*.deb"))
    image = made / image_deb_name(release, version)
    if image not in debs:
        raise KmlError(f"bindeb-pkg made no {image.name} (made: "
                       f"{', '.join(d.name for d in debs) or 'nothing'})")
    OUT.mkdir(parents=True, exist_ok=True)
    for d in debs:
        shutil.move(str(d), OUT / d.name)
    for f in made.glob(f"{SOURCENAME}_{version}_*"):      # .buildinfo, .changes
        f.unlink()
    image = record_series(OUT / image.name, release, paths.PATCH_DIR, paths.BASE_FILE,
                          series_summary(release, version, series))
    for d in sorted(OUT.glob(f"*_{version}_*.deb")):
        say(f"package: {d} ({d.stat().st_size / 2**20:.1f} MiB)")
    return image


class KernelImage:
    """A kernel image file to boot with -kernel (qemu.boot's kernel=...):
    one unpacked from an image package deb, or a distribution kernel's."""

    def __init__(self, bzimage, release, deb=None):
        self.deb, self.bzimage, self.release_name = deb and Path(deb), Path(bzimage), release
        self.name = f"package {Path(deb).name}" if deb else Path(bzimage).name

    def release(self):
        return self.release_name


def kernel_from_deb(deb, dest):
    """Unpack the image package deb's /boot/vmlinuz-* into dest; return a
    KernelImage."""
    deb = Path(deb)
    if not deb.is_file():
        raise KmlError(f"--deb {deb}: no such file")
    p = run(["dpkg-deb", "-f", str(deb), "Package"], capture=True, check=False)
    pkg = (p.stdout or "").strip()
    if p.returncode != 0 or not pkg.startswith("linux-image-"):
        raise KmlError(f"--deb {deb}: not a kernel image package "
                       f"({pkg or (p.stdout or '').strip() or 'unreadable'})")
    tree = Path(dest) / "deb"
    tree.mkdir(parents=True)
    run(["dpkg-deb", "-x", str(deb), str(tree)], capture=True)
    images = sorted((tree / "boot").glob("vmlinuz-*"))
    if len(images) != 1:
        raise KmlError(f"--deb {deb}: {len(images)} kernels in /boot, expected one")
    release = images[0].name[len("vmlinuz-"):]
    return KernelImage(images[0], release, deb)
