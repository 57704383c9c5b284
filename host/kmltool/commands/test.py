"""./kml test: host unit tests and guest tests, through pytest.

The guest tests boot once per configuration of configs.TESTS that
--config and --kernel choose (default configs.DEFAULT_TESTS); pytest gets
them as --kml-configs (tests/conftest.py)."""
import subprocess
import sys

from .. import configs, kbuild, machine, package, paths, setup, system
from ..paths import KmlError
from ..util import say
from .common import build_all


def register(sub):
    p = sub.add_parser("test", help="run the test suite (host unit tests and guest tests)")
    p.add_argument("--config", action="append", choices=sorted(configs.TESTS),
                   help="VM configuration(s) for guest tests "
                        f"(default: {' '.join(configs.DEFAULT_TESTS)})")
    p.add_argument("--kernel", choices=sorted(kbuild.KERNELS),
                   help="only the configurations that boot this kernel")
    p.add_argument("--host-only", action="store_true", help="skip VM boots")
    p.add_argument("--system", choices=system.SYSTEMS,
                   help="instead of the guest configurations: the Debian system's VM "
                        "tests (./kml run --system debian), after ./kml package")
    p.add_argument("-k", dest="pytest_k", metavar="EXPR", help="pytest -k selection")
    p.set_defaults(func=main)


def test_configs(a):
    """The test configurations chosen by --config and --kernel."""
    names = a.config or (list(configs.DEFAULT_TESTS) if not a.kernel else
                         [n for n, c in configs.TESTS.items() if c.kernel == a.kernel])
    wrong = [n for n in names if a.kernel and configs.TESTS[n].kernel != a.kernel]
    if wrong:
        raise KmlError(f"--config {wrong[0]} boots the {configs.TESTS[wrong[0]].kernel} "
                       f"kernel, not --kernel {a.kernel}")
    return names


def pytest_python():
    for exe in (sys.executable, "/usr/bin/python3"):
        if subprocess.run([exe, "-c", "import pytest"], capture_output=True).returncode == 0:
            return exe
    raise KmlError("pytest is not installed: run ./kml setup")


def main(a):
    if a.system and (a.config or a.kernel):
        raise KmlError("test --system runs the system's VM tests only: leave out "
                       "--config and --kernel")
    names = [] if a.system else test_configs(a)
    if a.host_only:
        setup.setup(quiet=True)
    elif a.system:
        system.require_root("test --system debian")
        setup.setup(quiet=True)
        deb = package.build_package(package.DEFAULT_KERNEL)   # the package the image installs
        machine.prepare(deb)        # the installed machine, before the tests' timeouts
    else:
        build_all(sorted({configs.TESTS[n].kernel for n in names}))
    cmd = [pytest_python(), "-m", "pytest", "-v", "-rfEs", "-p", "no:cacheprovider",
           "--durations=20",
           f"--kml-configs={','.join(names)}"]
    if a.system:
        cmd.append(f"--kml-system={a.system}")
    if a.host_only:
        cmd.append("--kml-host-only")
    if a.kernel:
        cmd.append(f"--kml-kernel={a.kernel}")
    if a.pytest_k:
        cmd += ["-k", a.pytest_k]
    cmd.append("tests")
    if (paths.ROOT / "verify" / "tests").is_dir():
        cmd.append("verify/tests")
    say("running: " + " ".join(cmd[1:]))
    return subprocess.run(cmd, cwd=paths.ROOT).returncode
