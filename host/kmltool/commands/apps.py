"""./kml apps (also ./kml bench --apps): Debian's programs as ordinary
processes and in kernel mode, one boot per configuration of
configs.APPS (see kmltool/apps.py)."""
import functools

from .. import apps, configs, guestrun, initramfs, qemu, report, setup, system
from ..paths import KmlError
from ..util import say
from .common import add_vm_options, build_all, positive_int, vm_options
from .runner import Measurement, run

# vCPUs of each boot: a server and its client
APPS_SMP = 2


def add_options(p, alias=False):
    """--rounds, --config, --deb; alias: as options of bench --apps."""
    w = "with --apps: " if alias else ""
    p.add_argument("--rounds", type=positive_int, metavar="N",
                   help=f"{w}rounds per configuration (default {apps.ROUNDS})")
    p.add_argument("--config", action="append", choices=list(configs.APPS),
                   help=f"{w}the configuration(s) to boot (default: "
                        f"{' '.join(configs.APPS_DEFAULT)}; debian-pti-off: the "
                        "Debian system of ./kml run --system debian, on its own)")
    p.add_argument("--deb", metavar="FILE",
                   help=f"with {'--apps ' if alias else ''}--config debian-pti-off: the "
                        "kernel package installed in the Debian system (default: "
                        "./kml package's)")


def register(sub):
    text = ("Debian's redis-server, nginx, iperf3 and find as ordinary processes, in "
            "kernel mode from /trusted (clients ordinary) and, in the appliance "
            "configurations (kml=all), with server and client at CPL 0; one boot per "
            "configuration")
    p = sub.add_parser("apps", help=text, description=text + ".")
    add_vm_options(p, 1200, smp=APPS_SMP)
    p.add_argument("--quick", action="store_true", help="1 round, short runs")
    add_options(p)
    p.set_defaults(func=main)


class Apps(Measurement):
    what, prefix = "apps", "apps-"

    def __init__(self, a):
        super().__init__(a)
        names = a.config or configs.APPS_DEFAULT
        self.cfgs = [c for c in configs.APPS.values() if c.name in names]
        systems = {c.system for c in self.cfgs}
        if len(systems) > 1:
            raise KmlError("--config: the Debian system's configuration boots another "
                           "image; run it on its own (--config "
                           + " --config ".join(c.name for c in self.cfgs if c.system) + ")")
        self.system = systems.pop()
        if a.deb and not self.system:
            raise KmlError("--deb: the kernel package of the Debian system's configuration")
        self.rounds = a.rounds or (1 if a.quick else apps.ROUNDS)
        self.sizes = apps.QUICK if a.quick else apps.FULL

    def configs(self):
        return self.cfgs

    def build(self):
        if self.system:
            setup.setup(quiet=True)
            initramfs.build_guest_programs()        # kml-apps
        else:
            build_all()

    def specs(self):
        self.expect = apps.write_manifest()
        if not self.expect:
            raise KmlError(f"the kernel source has no file named {apps.FIND_NAME} for find")
        say(f"applications: {', '.join(apps.APP_NAMES)}; {self.rounds} round(s) in each of "
            f"{len(self.cfgs)} boot(s) ({', '.join(c.name for c in self.cfgs)})")
        return apps.specs(self.cfgs, self.rounds, self.sizes, self.expect)

    def boot(self, specs):
        vm = dict(vm_options(self.a), smp=self.a.smp or APPS_SMP)
        vm["accel"] = self.accel = vm["accel"] or qemu.choose_accel()
        if self.system:
            # -kernel: the configurations' command lines (pti=off) need it
            runner = functools.partial(system.boot, deb=self.a.deb or system.current_deb(),
                                       direct_kernel=True)
            return guestrun.boot(specs, apps.SYSTEM_PRELUDE, adds=apps.system_adds(),
                                 runner=runner, **vm)
        return guestrun.boot(specs, apps.PRELUDE, adds=apps.adds(), **vm)

    def combine(self, out):
        return apps.combine(self.cfgs, self.rounds, self.sizes, self.expect, out.runs,
                            self.accel)

    def render(self, data):
        return report.apps_markdown(data)

    def exit_status(self, data):
        return apps.exit_status(data)


def main(a):
    return run(Apps(a))
