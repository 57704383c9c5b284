"""pytest configuration for kml: host unit tests and guest (VM) tests."""
import os
from pathlib import Path

from kmltool.configs import DEFAULT_TESTS, TESTS

ROOT = Path(__file__).resolve().parents[1]     # host/ and verify/: pytest.ini


def pytest_addoption(parser):
    parser.addoption("--kml-configs", default=",".join(DEFAULT_TESTS),
                     help="comma-separated VM configurations for guest tests")
    parser.addoption("--kml-host-only", action="store_true",
                     help="skip every test that boots a VM")
    parser.addoption("--kml-kernel", default=None,
                     help="only VM tests that boot this kernel (kbuild.KERNELS): the "
                          "guest tests of --kml-configs; the others boot the default one")
    parser.addoption("--kml-system", default=None,
                     help="run the VM tests of this system (debian: ./kml run --system "
                          "debian, tests marked debian_system) and no other VM test")


def kml_configs(config):
    names = [c for c in config.getoption("--kml-configs").split(",") if c]
    for n in names:
        if n not in TESTS:
            raise ValueError(f"unknown configuration {n!r}; known: {sorted(TESTS)}")
    return names


def pytest_collection_modifyitems(config, items):
    host_only, kernel = config.getoption("--kml-host-only"), config.getoption("--kml-kernel")
    system = config.getoption("--kml-system")
    import pytest
    for item in items:
        if "vm" not in item.keywords:
            continue
        if host_only:
            item.add_marker(pytest.mark.skip(reason="--kml-host-only"))
        elif item.get_closest_marker("debian_system"):
            if system != "debian":
                item.add_marker(pytest.mark.skip(
                    reason="the Debian system's tests: ./kml test --system debian"))
        elif system:
            item.add_marker(pytest.mark.skip(
                reason=f"--system {system}: only that system's VM tests"))
        elif kernel in (None, "default"):
            continue
        elif "config" not in getattr(getattr(item, "callspec", None), "params", {}):
            item.add_marker(pytest.mark.skip(
                reason=f"boots the default kernel, not --kernel {kernel}"))


def pytest_configure(config):
    config.addinivalue_line("markers", "vm: boots a VM (needs ./kml build)")
    config.addinivalue_line("markers", "debian_system: boots the Debian system "
                            "(./kml test --system debian)")
    os.environ.setdefault("KML_ROOT", str(ROOT))
