"""./kml fuzz: the differential fuzzer (kmltool/fuzz.py): per configuration
one boot running kml-fuzz (or, with --minutes, boots of batches with fresh
seeds until the time is used), the TAP parsed, the console checked, the
divergent seeds printed with the command that reproduces each, a JSON
summary per configuration in build/fuzz/."""
import random
import sys
import time

from .. import configs, fuzz, guestrun, kbuild, qemu
from ..paths import KmlError
from ..util import say
from .common import (add_kernel_option, add_vm_options, build_all, positive_float,
                     positive_int, vm_options)

BOOT_S = 60             # --minutes: what a boot costs besides the fuzzing (TCG)
MIN_BATCH_S = 60        # --minutes: no batch shorter than this
BATCH_MAX = 10 ** 9     # --minutes: the count of a batch that time ends


def register(sub):
    text = ("the differential fuzzer: random machine-code programs, each run as an "
            "ordinary process and from /trusted (CPL 0) in the same boot, must end "
            "the same way; one boot per configuration")
    p = sub.add_parser("fuzz", help=text, description=text + ".")
    add_vm_options(p, 3600)
    p.add_argument("--count", type=positive_int, metavar="N",
                   help=f"programs per mode per configuration (default {fuzz.DEFAULT_COUNT}; "
                        "with --minutes: at most N per boot)")
    p.add_argument("--seed", type=int, metavar="S",
                   help=f"the first seed (default {fuzz.DEFAULT_SEED}: the same programs "
                        "every time)")
    p.add_argument("--fresh", action="store_true",
                   help="a random first seed (printed)")
    p.add_argument("--minutes", type=positive_float, metavar="M",
                   help="instead of a count: boot batches with fresh seeds until M "
                        "minutes are used (shared between the configurations)")
    p.add_argument("--config", action="append", choices=list(configs.TESTS),
                   help="configuration(s) to boot (default: "
                        f"{' and '.join(fuzz.DEFAULT_CONFIGS)}; with --kernel: that "
                        "kernel's configurations)")
    add_kernel_option(p, "boot")
    p.add_argument("--ops", type=positive_int, metavar="N",
                   help=f"operations per program (default {fuzz.DEFAULT_OPS})")
    p.add_argument("--avoid", metavar="LIST",
                   help="kml-fuzz-case --avoid: operation kinds, address classes or "
                        "KIND@CLASS to leave out (e.g. branch@hole,branch@tophole)")
    p.add_argument("--no-build", action="store_true",
                   help="boot the kernel and guest image as they are built")
    p.set_defaults(func=main)


class Filter:
    """The stream of a fuzzing boot: the driver's divergences, progress and
    summary; not one line per seed."""

    KEEP = ("not ok", "#   ", "# progress", "# kml-fuzz", "# /", "Bail out")

    def __init__(self, out=None):
        self.out = out or sys.stdout
        self.buf = ""

    def __call__(self, data):
        self.buf += data.decode(errors="replace")
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            line = line.rstrip("\r")
            if line.startswith(self.KEEP):
                print(line, file=self.out, flush=True)


def fresh_seed():
    return random.SystemRandom().randrange(1, 2 ** 32)


def run_batch(a, p, config, result, first, count, seconds=None, batch=1):
    """One boot of config running kml-fuzz; its Tap added to result."""
    s = fuzz.spec(config, count, first, p.ops, p.avoid, seconds, batch)
    vm = vm_options(a)
    vm.pop("append")            # guestrun.boot merges it with the configuration's
    vm["smp"] = config.smp or a.smp
    if seconds:
        vm["timeout"] = int(seconds) + 600
    vm["kernel"] = kbuild.kernel(config.kernel)

    def runner(argv, **kw):
        kw["stream"] = Filter()
        return qemu.boot(argv, **kw)

    say(f"fuzz: {config.name} (kernel command line + {result.append or '(nothing)'}): "
        + (f"{seconds:.0f} s" if seconds else f"{count} programs per mode")
        + f" from seed {first}")
    t = time.monotonic()
    out = guestrun.boot([s], append=a.append, runner=runner, **vm)
    run = out.runs.get(s.name)
    tap = fuzz.parse(run.output if run else [])
    failed = out.failed
    failure = failed.failure if failed else None
    if not failure and run is not None and not run.finished:
        failure = "kml-fuzz did not finish"
    result.add_batch(tap, first, failure, time.monotonic() - t, a.append)
    return tap, failure


def fuzz_config(a, p, config, budget_s=None):
    """Every batch of one configuration: a ConfigResult."""
    result = fuzz.ConfigResult(config.name, configs.merge(config, a.append, "fuzz"),
                               config.kernel, p.ops, p.avoid)
    if budget_s is None:
        run_batch(a, p, config, result, p.seed, p.count)
        return result
    deadline = time.monotonic() + budget_s
    first, batch = p.seed, 1
    while True:
        left = deadline - time.monotonic() - BOOT_S
        if left < MIN_BATCH_S and batch > 1:
            break
        if batch > 1:
            say(f"fuzz: next batch from fresh seed {first}")
        tap, failure = run_batch(a, p, config, result, first, a.count or BATCH_MAX,
                                 max(left, MIN_BATCH_S), batch)
        if failure and not tap.results:
            break               # the boot itself fails: more boots will too
        first, batch = fresh_seed(), batch + 1
    return result


def main(a):
    if a.fresh and a.seed is not None:
        raise KmlError("fuzz: --fresh picks the first seed; leave out --seed")
    seed = a.seed
    if a.fresh or (a.minutes and seed is None):
        seed = fresh_seed()
        say(f"fuzz: first seed {seed}")
    p = fuzz.plan(a.config, a.kernel, a.count, seed, a.ops, a.avoid, a.minutes)
    for c in p.configs:         # a --append conflict costs nothing yet
        configs.merge(c, a.append, f"the {c.name} boot of fuzz")
    if not a.no_build:
        build_all(tuple(dict.fromkeys(c.kernel for c in p.configs)))
    budget = p.minutes * 60 / len(p.configs) if p.minutes else None
    results = []
    for c in p.configs:
        r = fuzz_config(a, p, c, budget)
        path = fuzz.save(r)
        results.append(r)
        for line in fuzz.report(r):
            print(line, flush=True)
        say(f"fuzz: {path}")
    bad = [r.config for r in results if not r.clean]
    if bad:
        say(f"fuzz FAILED: {', '.join(bad)}")
        return 1
    say("fuzz: clean")
    return 0
