"""The differential fuzzer in ./kml test: per configuration of a short list
(those of them that --kml-configs selects), one boot running kml-fuzz with
fixed seeds -- the same random programs every run -- through kml-modes,
as ./kml fuzz does.  Every program must end the same way as an ordinary
process and from /trusted, and the console must stay clean."""
import pytest

from conftest import kml_configs
from kmltool import fuzz, guestrun, kbuild
from kmltool.configs import TESTS

pytestmark = pytest.mark.vm

# one configuration of each kernel ./kml test boots by default
FUZZ_CONFIGS = ("smp2-pti-off", "debug-smp2-pti-on-dks")
COUNT, SEED = fuzz.DEFAULT_COUNT, fuzz.DEFAULT_SEED
# kml-fuzz-case --avoid for a known divergence (None: everything).  A
# signal handler that sets a non-canonical RIP (bit 63 set) in its context:
# an ordinary process gets SIGSEGV/SI_KERNEL (the #GP of IRET), a
# kernel-mode one SIGSEGV/SEGV_MAPERR (kml replaces a RIP outside the lower
# half by TASK_SIZE_MAX, which faults).  Drop it when the kernel gives the
# same si_code or the difference is declared legitimate.
AVOID = None
TIMEOUT = 1800


def pytest_generate_tests(metafunc):
    if "config" in metafunc.fixturenames:
        names = [c for c in kml_configs(metafunc.config) if c in FUZZ_CONFIGS]
        metafunc.parametrize("config", names, ids=names)


def test_fuzz_both_modes_end_alike(config):
    c = TESTS[config]
    s = fuzz.spec(c, COUNT, SEED, avoid=AVOID)
    out = guestrun.boot([s], show=False, smp=c.smp, mem="1G", timeout=TIMEOUT,
                        kernel=kbuild.kernel(c.kernel))
    run = out.runs.get(s.name)
    tap = fuzz.parse(run.output if run else [])
    failure = out.failed.failure if out.failed else None
    result = fuzz.ConfigResult(config, c.append, c.kernel, fuzz.DEFAULT_OPS, AVOID)
    result.add_batch(tap, SEED, failure)
    assert result.clean, "\n".join(fuzz.report(result))
    assert result.count == COUNT, f"{result.count} programs per mode, not {COUNT}"
