"""VM test: a kernel-mode program on a machine without the I/O APIC.

With `noapic nolapic_timer` on one vCPU the timer interrupt comes from the
8259 PIC through the local APIC's ExtINT line: it is never in service in
the local APIC, and it arrives while a kernel-mode program runs at CPL 0.
A kernel-mode spinner (busybox from /trusted, a shell loop at CPL 0) runs
while the shell prints 40 numbered lines with short sleeps, which end
only if timer interrupts keep arriving and are handled as interrupts.
Every line must come, the spinner must end normally (no signal) when
told to, and the console must stay clean.  One boot with pti=on and one
with pti=off.
"""
import re

import pytest

from kmltool import qemu

MEM = "512M"
LINES = 40
pytestmark = pytest.mark.vm

# The copy of busybox in /trusted is named busybox-*: busybox takes the
# applet from its first argument then.  The spinner computes in chunks of
# 2000 iterations and stops once /tmp/stop exists, so that it runs while
# every line is printed however fast the machine is.
SPIN = "/trusted/busybox-kml-noapic"
SCRIPT = f"""
set -e
cp /bin/busybox {SPIN}
chown root:root {SPIN}
chmod 755 {SPIN}
{SPIN} sh -c 'while [ ! -e /tmp/stop ]; do
	i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done
done' &
k=$!
n=1
while [ $n -le {LINES} ]; do
	echo "line $n"
	sleep 0.1
	n=$((n+1))
done
echo "spinner $(grep KernelMode: /proc/$k/status)"
touch /tmp/stop
set +e
wait $k
echo "spinner exit $?"
"""


@pytest.mark.parametrize("pti", ["pti=on", "pti=off"])
def test_kernel_mode_spinner_without_io_apic(pti):
    res = qemu.boot(["sh", "-c", SCRIPT], smp=1, mem=MEM,
                    append=f"noapic nolapic_timer {pti}", timeout=300, stream=False)
    out = res.output.decode(errors="replace")
    lines = re.findall(r"^line (\d+)$", out, re.M)
    assert lines == [str(n) for n in range(1, LINES + 1)], (
        f"{len(lines)} of {LINES} lines (VM verdict: {res.verdict()}); output:\n{out[-2000:]}")
    assert re.search(r"^spinner KernelMode:\s*1$", out, re.M), (
        f"the spinner does not run in kernel mode; output:\n{out[-2000:]}")
    assert "spinner exit 0\n" in out, out[-2000:]
    assert res.verdict() is None, res.verdict()
    assert res.status == 0, out[-2000:]
