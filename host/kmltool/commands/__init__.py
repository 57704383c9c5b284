"""The commands of ./kml, one module each.  Each module's register(sub)
adds its parser to the subparsers and sets func, the function that runs
it with the parsed options and returns the exit status.  The commands
that measure in VMs share one pipeline: runner.py."""
from . import (appliance, apps, bench, build, cc, demo, fuzz, kstack_bench, package,
               patches, pathlen, run, setup, soak, test, verify)

# in the order ./kml --help lists them
MODULES = (setup, build, run, package, test, bench, apps, demo, kstack_bench, soak, fuzz,
           patches, verify, cc, appliance, pathlen)
