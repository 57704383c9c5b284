"""The installed machine over several boots (machine.py): a newer kml
package installed over the older one boots after the reboot, removing
the package leaves Debian's own kernel booting, and the same disk boots
on virtio-scsi as on NVMe.  Each test
works on its own copy of build/system/machine.img (the kml package of
the series installed with apt), booted without a snapshot, so that what
one boot installs or removes is there at the next.  Selected by ./kml
test --system debian, with test_debian_system.py.
"""
import re

import pytest

from kmltool import machine, package, patches, system
from kmltool.util import run

pytestmark = [pytest.mark.vm, pytest.mark.debian_system]
TIMEOUT = 1500


@pytest.fixture
def work(tmp_path_factory):
    """A copy of the machine with the series' package installed; its
    kernel release."""
    image, release = machine.prepare(system.current_deb())
    d = tmp_path_factory.mktemp("machine", numbered=True)
    copy = d / "machine.img"
    run(["cp", "--sparse=always", "--reflink=auto", str(image), str(copy)])
    yield copy, release
    copy.unlink(missing_ok=True)


def boot(image, script, adds=()):
    res = machine.boot(image, ["sh", "-c", script], adds=adds, timeout=TIMEOUT,
                       stream=False, snapshot=False)
    out = res.output.decode(errors="replace")
    assert res.exit_code() == 0, f"{res.verdict() or res.status}\n{out[-3000:]}"
    return out


def test_removal_leaves_debians_kernel_booting(work):
    image, release = work
    boot(image, f"apt-get remove -y linux-image-{release} && "
                f"! grep -q 'vmlinuz-{release}' /boot/grub/grub.cfg")
    out = boot(image, "uname -r; dpkg-query -W -f '${db:Status-Abbrev}\\n' "
                      f"linux-image-{release} 2>/dev/null || echo not-installed")
    kernel, status = out.split()[:2]
    assert re.fullmatch(r"6\.1\.0-\d+-cloud-amd64", kernel), out
    assert status in ("rc", "not-installed"), out


def test_newer_package_over_older_boots(work):
    image, release = work
    old = system.current_deb()
    version = package.package_version(patches.base_version(), patches.series_digest(),
                                      len(patches.read_series())) + "+upgrade1"
    new = package.OUT / package.image_deb_name(release, version)
    if not new.exists():
        new = package.build_package(package.DEFAULT_KERNEL, version=version)
    assert new != old
    boot(image, f"apt-get install -y /root/{new.name}", adds=[f"{new}:/root/"])
    out = boot(image, "uname -r; uname -v; dpkg-query -W -f '${Version}\\n' "
                      f"linux-image-{release}")
    lines = out.splitlines()
    assert lines[0] == release, out
    assert lines[2] == version, out
    assert "upgrade1" in lines[1], out          # uname -v: the new build booted


def test_same_disk_boots_on_virtio_scsi():
    """The cloud flavour builds virtio_scsi as a module: the initramfs
    brings it, and LVM finds its volume group on /dev/sda3."""
    image, release = machine.prepare(system.current_deb())
    res = machine.boot(image, ["sh", "-c", "uname -r; pvs --noheadings -o pv_name; "
                                           "lsmod | grep -c '^virtio_scsi '"],
                       bus="scsi", timeout=TIMEOUT, stream=False)
    out = res.output.decode(errors="replace")
    assert res.exit_code() == 0, f"{res.verdict() or res.status}\n{out[-3000:]}"
    assert out.split() == [release, "/dev/sda3", "1"], out
