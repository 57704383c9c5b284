"""VM test: a locked-down kernel admits no program to kernel mode.

Lockdown keeps even root from changing the running kernel; a program at
CPL 0 could undo it, so under lockdown (integrity or confidentiality)
kml admits none (docs/kernel-mode.md, "Threat model").  One boot: the
probe in /trusted runs at CPL 0, the lockdown is raised to integrity
through securityfs (it can only be raised), and the same probe then
runs at CPL 3, with the lockdown LSM's line and kml's reason on the
console.  The console must stay clean.
"""
import re

import pytest

from kmltool import qemu

pytestmark = pytest.mark.vm

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
