"""./kml appliance: the appliance image against the normal one (see
kmltool/appliance.py, which boots both images itself)."""
from .. import appliance, configs
from .common import add_vm_options, positive_int, vm_options
from .runner import Measurement, run


def register(sub):
    text = ("a single-service appliance: the guest kernel and an initramfs of "
            "kml-appinit and the service only, booted with kml=all (every process, "
            "init included, at CPL 0); prints the image sizes and the boot-to-service "
            "time against the same service on the normal image")
    p = sub.add_parser("appliance", help=text, description=text + ".")
    add_vm_options(p, 300)
    p.add_argument("--service", choices=sorted(appliance.SERVICES), default="redis",
                   help="the service (default redis: redis-server, checked with PING, "
                        "SET and GET)")
    p.add_argument("--rounds", type=positive_int, default=3, metavar="N",
                   help="boots of each image, alternating (default 3)")
    p.set_defaults(func=main)


class Appliance(Measurement):
    what, prefix = "appliance", "appliance-"

    def configs(self):
        return [configs.APPLIANCE]

    def who(self, config):
        return "appliance"

    def measure(self):
        """Its boots record their own failures: none fails as a whole."""
        return appliance.measure(appliance.SERVICES[self.a.service], self.a.rounds,
                                 vm_options(self.a)), None

    def render(self, data):
        return appliance.markdown(data)

    def exit_status(self, data):
        return appliance.exit_status(data)


def main(a):
    return run(Appliance(a))
