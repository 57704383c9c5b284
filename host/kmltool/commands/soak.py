"""./kml soak: stress-ng and trinity in every configuration of
configs.SOAK (see kmltool/soak.py): plan, specs, boots, combine, render,
save."""
from .. import configs, guestrun, soak
from ..guestrun import Status
from ..util import say
from .common import add_vm_options, positive_int, vm_options
from .runner import Measurement, run


def register(sub):
    text = ("Debian's stress-ng (as an ordinary process and in kernel mode) and trinity "
            "(in kernel mode), one boot per configuration; fails on any kernel console "
            "problem or a stressor that fails in kernel mode only")
    p = sub.add_parser("soak", help=text, description=text + ".")
    add_vm_options(p, 5400, mem="2G")
    p.add_argument("--short", action="store_true",
                   help=f"the CI form: {len(soak.SHORT)} stressors, "
                        f"{' and '.join(configs.SOAK_SHORT)}, fewer trinity calls")
    p.add_argument("--config", action="append", choices=list(configs.SOAK),
                   help=f"configuration(s) to boot (default: all {len(configs.SOAK)}: "
                        f"{' '.join(configs.SOAK)}; --short: {' '.join(configs.SOAK_SHORT)})")
    p.add_argument("--stressor-timeout", type=positive_int, metavar="S",
                   help="seconds per stressor and mode (default 2)")
    p.add_argument("--calls", type=positive_int, metavar="N",
                   help="trinity's system calls per boot (default 100000; --short: 20000)")
    p.add_argument("--seed", type=int, metavar="N",
                   help=f"trinity's random seed (default {soak.TRINITY_SEED})")
    p.set_defaults(func=main)


class Soak(Measurement):
    what, prefix = "soak", "soak-"

    def __init__(self, a):
        super().__init__(a)
        self.plan = soak.plan(a.short, a.config, a.stressor_timeout, a.calls, a.seed)

    def configs(self):
        return self.plan.configs

    def specs(self):
        p = self.plan
        self.members = {c: soak.class_members(c) for c in soak.CLASSES}
        say(f"soak: {len(p.configs)} boot(s) ({', '.join(c.name for c in p.configs)}); "
            f"stress-ng {p.stressor_timeout} s per stressor and mode, trinity {p.calls} calls")
        return soak.specs(p, self.members)

    def boot(self, specs):
        return guestrun.boot(specs, soak.PRELUDE, adds=soak.adds(), **vm_options(self.a))

    def combine(self, out):
        return soak.combine(self.plan, self.members, out)

    def render(self, data):
        return soak.markdown(data)

    def exit_status(self, data):
        if data["status"] is not Status.OK:
            say("soak FAILED: " + "; ".join(p for c in data["configs"]
                                             for p in c["problems"])[:2000])
            return 1
        say("soak: clean")
        return 0


def main(a):
    return run(Soak(a))
