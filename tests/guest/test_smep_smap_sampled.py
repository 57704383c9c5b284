"""VM test: SMEP and SMAP stay on, seen from outside the guest.

Per VM configuration one boot runs a mixed workload — a kernel-mode
spinner (busybox from /trusted: `sh -c 'while :; do :; done'` at CPL 0),
the same spinner as an ordinary process, and a loop of `cat /proc/stat`
(system calls, fork and exec: kernel code) — and then leaves the vCPUs
idle.  Meanwhile the host stops the VM through QEMU's gdb stub again and
again and reads CR4 of every vCPU (host/kmltool/cpustate.py).  Every
sample, whatever the vCPU was running, must have CR4.SMEP and CR4.SMAP
set; the busy phase must have caught each of the kernel-mode program, an
ordinary program and the kernel at least once, so that the check is not
vacuous.
"""
import re

import pytest

from conftest import kml_configs
from kmltool import cpustate, kbuild, qemu
from kmltool.configs import TESTS

MEM = "512M"
BOOT_TIMEOUT = 300
# Guest time, which stands still while the host reads the vCPUs: 60 busy
# samples take about 6.5 s, 20 idle ones about 2 s (TCG, 2 vCPUs)
BUSY_SECONDS, IDLE_SECONDS = 12, 5
pytestmark = pytest.mark.vm

# The copy of busybox in /trusted is named busybox-*: busybox picks its
# applet by the name it was started as, and one beginning with "busybox"
# takes the applet from the first argument.  (The guest's busybox has no
# install applet: cp, chown, chmod.)
SPIN = "/trusted/busybox-kml-spin"
SCRIPT = f"""
set -e
cp /bin/busybox {SPIN}
chown root:root {SPIN}
chmod 755 {SPIN}
{SPIN} sh -c 'while :; do :; done' &
k=$!
sh -c 'while :; do :; done' &
u=$!
sh -c 'while :; do cat /proc/stat >/dev/null; done' &
s=$!
sleep 1
echo "cpustate: spinner kernel-mode pid=$k $(grep KernelMode: /proc/$k/status)"
echo "cpustate: spinner ordinary pid=$u $(grep KernelMode: /proc/$u/status)"
echo "cpustate: busy"
sleep {BUSY_SECONDS}
kill $k $u $s
wait $k $u $s 2>/dev/null || true
echo "cpustate: idle"
sleep {IDLE_SECONDS}
echo "cpustate: done"
"""

_boots = {}


def boot_and_sample(config):
    """Boot config's VM with the workload, sampled by a cpustate.Sampler:
    (qemu.Result, Sampler, output text); cached per session."""
    if config not in _boots:
        c = TESTS[config]
        smp, append, kernel = c.smp, c.append, c.kernel
        sampler = cpustate.Sampler()
        res = qemu.boot(["sh", "-c", SCRIPT], smp=smp, mem=MEM, append=append,
                        timeout=BOOT_TIMEOUT, stream=False, gdb=sampler,
                        kernel=kbuild.kernel(kernel))
        _boots[config] = (res, sampler, res.output.decode(errors="replace"))
    return _boots[config]


def pytest_generate_tests(metafunc):
    if "config" in metafunc.fixturenames:
        names = kml_configs(metafunc.config)
        metafunc.parametrize("config", names, ids=names)


def spinner_mode(text, which):
    """The KernelMode value the guest printed for a spinner, or None."""
    m = re.search(rf"^cpustate: spinner {which} pid=\d+ KernelMode:\s*(\d+)$", text, re.M)
    return int(m.group(1)) if m else None


def test_spinners_run_in_their_modes(config):
    res, _, text = boot_and_sample(config)
    assert spinner_mode(text, "kernel-mode") == 1, (
        f"the /trusted spinner does not run in kernel mode; output: {res.output_log}\n"
        f"{text[-2000:]}")
    assert spinner_mode(text, "ordinary") == 0, text[-2000:]


def test_smep_smap_set_in_every_sample(config):
    res, sampler, _ = boot_and_sample(config)
    assert res.hook_error is None, res.verdict()
    assert sampler.phases == list(cpustate.PHASES), (
        f"phases sampled: {sampler.phases}; output: {res.output_log}")
    for phase in cpustate.PHASES:
        assert sampler.taken(phase) > 0, f"no {phase} sample; output: {res.output_log}"
    failure = cpustate.protection_failure(sampler.states)
    if failure:
        pytest.fail(f"{failure}\nall samples:\n{cpustate.summary(sampler.states)}",
                    pytrace=False)


def test_busy_phase_sees_every_class(config):
    res, sampler, _ = boot_and_sample(config)
    assert res.hook_error is None, res.verdict()
    missing = cpustate.missing_classes(sampler.states)
    assert not missing, (f"no busy sample of {', '.join(missing)}: the check would be "
                         f"vacuous for them\nall samples:\n{cpustate.summary(sampler.states)}")


def test_console_clean_after_sampling(config):
    res, _, text = boot_and_sample(config)
    assert res.verdict() is None, res.verdict()
    assert res.status == 0, f"the workload exited {res.status}; output:\n{text[-2000:]}"
