"""./kml kstack-bench: kml-ubench in a boot without, one with
dynamic_kstacks=on and one with dynamic_kstacks=reclaim (configs.KSTACK;
see kmltool/kstackbench.py)."""
from .. import configs, kstackbench, report
from .common import add_vm_options, positive_int
from .runner import Measurement, run


def register(sub):
    text = ("UnixBench-style system tests and the kernel-stack memory of idle threads "
            f"(kml-ubench) in a boot without, one with {kstackbench.PARAM} and one "
            f"with {kstackbench.RECLAIM_PARAM}")
    p = sub.add_parser("kstack-bench", help=text, description=text + ".")
    add_vm_options(p, 900)
    p.add_argument("--quick", action="store_true",
                   help="3 runs of 0.3 s per test instead of 5 of 2 s (smoke test)")
    p.add_argument("--threads", type=positive_int, default=kstackbench.DEFAULT_THREADS,
                   metavar="N", help="idle threads for the kernel-stack memory "
                   f"measurement (default {kstackbench.DEFAULT_THREADS})")
    p.set_defaults(func=main)


class KstackBench(Measurement):
    what, prefix = "kstack-bench", "kstack-"

    def configs(self):
        return configs.KSTACK.values()

    def who(self, config):
        return "kstack-bench"

    def specs(self):
        return kstackbench.specs(self.a.quick, self.a.threads)

    def combine(self, out):
        booted = {s.name for b in out.boots if not b.failure for s in b.specs}
        docs = kstackbench.boot_docs(out.runs, booted)
        return kstackbench.combine(docs, {s.name: b.append for b in out.boots for s in b.specs})

    def render(self, data):
        return report.kstack_markdown(data)


def main(a):
    return run(KstackBench(a))
