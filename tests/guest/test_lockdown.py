"""VM tests: a locked-down kernel admits only signed static programs to
kernel mode.

Lockdown keeps even root from changing the running kernel; a program at
CPL 0 could undo it, so under lockdown (integrity or confidentiality)
kml admits a program only as the kernel loads a module: signed by a key
it trusts (CONFIG_KML_SIGNED_PROGRAMS; the kernels ./kml builds trust
build/keys/, host/kmltool/signing.py).  docs/kernel-mode.md, "Threat
model".

- Raised at run time through securityfs: the unsigned probe in /trusted
  runs at CPL 0 before and at CPL 3 after, with the lockdown LSM's line
  and kml's reason on the console.
- Booted with lockdown=integrity, on the guest kernel and (./kml test
  --kernel debian) on Debian's: a signed static probe runs at CPL 0 and
  opens a kernel-library handle; unsigned, tampered, signed by an
  untrusted key or dynamically linked, it runs at CPL 3 with the reason
  logged; the signed one maps no other file executable (mmap and
  mprotect refused), its own file it may.

The console must stay clean.
"""
import re
import subprocess

import pytest

from conftest import kml_configs
from kmltool import kbuild, paths, qemu, signing
from kmltool.configs import TESTS

pytestmark = pytest.mark.vm

# one configuration of each kernel that has CONFIG_KML_SIGNED_PROGRAMS
SIGNED_CONFIGS = ("smp2-pti-on", "debian-smp2-pti-on")

SCRIPT = """
cp /usr/lib/kml/kml-probe /trusted/kml-probe && chmod 755 /trusted/kml-probe
mkdir -p /sys/kernel/security
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
echo "before $(/trusted/kml-probe info)"
echo integrity > /sys/kernel/security/lockdown
echo "state $(cat /sys/kernel/security/lockdown)"
echo "after $(/trusted/kml-probe info)"
dmesg | grep -E 'Lockdown:.*kernel-mode|kml-probe runs in user mode' | sed 's/^/log /'
"""


def test_lockdown_refuses_kernel_mode():
    res = qemu.boot(["sh", "-c", SCRIPT], smp=2, mem="512M", timeout=300, stream=False)
    out = res.output.decode(errors="replace")
    assert re.search(r"^before cpl=0 ", out, re.M), out[-2000:]
    assert re.search(r"^state .*\[integrity\]", out, re.M), out[-2000:]
    assert re.search(r"^after cpl=3 ", out, re.M), out[-2000:]
    assert re.search(r"^log .*kernel-mode processes is restricted", out, re.M), out[-2000:]
    assert re.search(r"^log .*runs in user mode: the kernel is locked down", out, re.M), \
        out[-2000:]
    assert res.verdict() is None, res.verdict()


SIGNED_SCRIPT = """
mkdir -p /sys/kernel/security
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
echo "state $(cat /sys/kernel/security/lockdown)"
cp /usr/lib/kml/kml-probe /trusted/kml-probe
chown root:root /trusted/kml-probe*; chmod 755 /trusted/kml-probe*
for p in kml-probe kml-probe-signed kml-probe-tampered kml-probe-otherkey \\
         kml-probe-dyn-signed; do
    echo "$p $(/trusted/$p info)"
done
echo "map-other $(/trusted/kml-probe-signed map-exec /usr/lib/kml/kml-probe)"
echo "map-self $(/trusted/kml-probe-signed map-exec /trusted/kml-probe-signed)"
echo "map-user $(/usr/lib/kml/kml-probe map-exec /usr/lib/kml/kml-probe)"
echo "handle $(/trusted/kml-probe-signed kfunc strlen)"
dmesg | grep -E 'kml-probe[-a-z]* runs in user mode' | sed 's/^/log /'
"""


def pytest_generate_tests(metafunc):
    if "config" in metafunc.fixturenames:
        names = [c for c in kml_configs(metafunc.config) if c in SIGNED_CONFIGS]
        metafunc.parametrize("config", names, ids=names)


def signed_files(tmp):
    """Host files for /trusted: the probe signed, signed then changed,
    signed by a key no kernel trusts, and its dynamic build signed."""
    probe, dyn = paths.GUEST_OUT / "kml-probe", paths.GUEST_OUT / "kml-probe-dyn"
    signing.ensure_key()
    signed = signing.sign_file(probe, tmp / "kml-probe-signed")
    data = bytearray(signed.read_bytes())
    at = data.index(b"usage: kml-probe")        # a string: it still runs
    data[at] = ord("U")
    (tmp / "kml-probe-tampered").write_bytes(data)
    key, cert = tmp / "other.key", tmp / "other.pem"
    subprocess.run(["openssl", "req", "-new", "-x509", "-nodes", "-newkey", "rsa:2048",
                    "-days", "1", "-subj", "/CN=a key no kernel trusts", "-keyout",
                    str(key), "-out", str(cert)], check=True, capture_output=True)
    signing.sign_file(probe, tmp / "kml-probe-otherkey", key, cert)
    signing.sign_file(dyn, tmp / "kml-probe-dyn-signed")
    return [f"{tmp / n}:/trusted/{n}" for n in
            ("kml-probe-signed", "kml-probe-tampered", "kml-probe-otherkey",
             "kml-probe-dyn-signed")]


def test_lockdown_admits_signed_static_programs(config, tmp_path):
    c = TESTS[config]
    res = qemu.boot(["sh", "-c", SIGNED_SCRIPT], smp=c.smp, mem="1G", timeout=600,
                    append=f"{c.append} lockdown=integrity", stream=False,
                    adds=signed_files(tmp_path), kernel=kbuild.kernel(c.kernel))
    out = res.output.decode(errors="replace")
    tail = out[-3000:]
    assert re.search(r"^state .*\[integrity\]", out, re.M), tail
    for prog, cpl in (("kml-probe", 3), ("kml-probe-signed", 0), ("kml-probe-tampered", 3),
                      ("kml-probe-otherkey", 3), ("kml-probe-dyn-signed", 3)):
        assert re.search(rf"^{prog} cpl={cpl} ", out, re.M), (prog, tail)
    assert re.search(r"^map-other mmap=EPERM mprotect=EPERM$", out, re.M), tail
    assert re.search(r"^map-self mmap=ok mprotect=ok$", out, re.M), tail
    assert re.search(r"^map-user mmap=ok mprotect=ok$", out, re.M), tail
    assert re.search(r"^handle kfunc=ok$", out, re.M), tail
    for prog, why in (("kml-probe", "it is not signed"),
                      ("kml-probe-tampered", "its signature does not verify"),
                      ("kml-probe-otherkey", "no trusted key made its signature"),
                      ("kml-probe-dyn-signed", "it has an ELF interpreter")):
        assert re.search(rf"^log .*/trusted/{prog} runs in user mode: the kernel is "
                         rf"locked down and {why}", out, re.M), (prog, tail)
    assert res.verdict() is None, res.verdict()
