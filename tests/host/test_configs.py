"""Unit tests: the boot configurations (configs.py).  Their names are in
test ids, saved JSON and the docs, and their kernel command lines must not
change unnoticed: both are pinned here."""
import pytest

from kmltool import configs
from kmltool.configs import Config
from kmltool.paths import KmlError

# name: (kernel, smp, own kernel command line)
TESTS = {
    "smp2-pti-on": ("default", 2, "pti=on"),
    "smp2-pti-off": ("default", 2, "pti=off"),
    "smp1-pti-on": ("default", 1, "pti=on"),
    "smp1-pti-off": ("default", 1, "pti=off"),
    "smp2-pti-on-dks": ("default", 2, "pti=on dynamic_kstacks=on"),
    "smp2-pti-off-dks": ("default", 2, "pti=off dynamic_kstacks=on"),
    "smp2-pti-on-dks-generic": ("default", 2,
                                "pti=on dynamic_kstacks=on sysctl.kernel.kml_syscall_path=generic"),
    "smp2-pti-off-dks-reclaim": ("default", 2, "pti=off dynamic_kstacks=reclaim"),
    "debug-smp2-pti-on-dks": ("debug", 2, "pti=on dynamic_kstacks=on"),
    "debug-smp2-pti-off-dks-reclaim": ("debug", 2, "pti=off dynamic_kstacks=reclaim"),
    "defconfig-smp2-pti-on": ("defconfig", 2, "pti=on"),
    "defconfig-smp2-pti-off-dks-reclaim": ("defconfig", 2, "pti=off dynamic_kstacks=reclaim"),
    "debian-smp2-pti-on": ("debian", 2, "pti=on"),
    "debian-smp2-pti-off-dks": ("debian", 2, "pti=off dynamic_kstacks=on"),
}
SOAK = {"pti-off": "pti=off", "pti-on": "pti=on", "pti-off-dks": "pti=off dynamic_kstacks=on",
        "pti-on-dks": "pti=on dynamic_kstacks=on",
        "pti-off-dks-reclaim": "pti=off dynamic_kstacks=reclaim"}
APPS = {"pti-off": "pti=off", "pti-on": "pti=on", "pti-off-appliance": "pti=off kml=all",
        "pti-on-appliance": "pti=on kml=all", "debian-pti-off": "pti=off"}
KSTACK = {"off": "", "on": "dynamic_kstacks=on", "reclaim": "dynamic_kstacks=reclaim"}
PATHLEN = {"pti-off": "pti=off", "pti-on": "pti=on"}


def test_test_matrix_names_and_command_lines():
    got = {n: (c.kernel, c.smp, c.append) for n, c in configs.TESTS.items()}
    assert got == TESTS and list(got) == list(TESTS)
    assert configs.DEFAULT_TESTS == (
        "smp2-pti-on", "smp2-pti-off", "smp2-pti-off-dks", "smp2-pti-off-dks-reclaim",
        "debug-smp2-pti-on-dks", "debug-smp2-pti-off-dks-reclaim")
    assert all(not c.system and not c.kml_all for c in configs.TESTS.values())


@pytest.mark.parametrize("tab, want", [(configs.SOAK, SOAK), (configs.APPS, APPS),
                                       (configs.KSTACK, KSTACK), (configs.PATHLEN, PATHLEN)],
                         ids=["soak", "apps", "kstack", "pathlen"])
def test_command_tables_names_and_command_lines(tab, want):
    got = {n: c.append for n, c in tab.items()}
    assert got == want and list(got) == list(want)
    assert all(c.smp is None and c.kernel == "default" for c in tab.values())


def test_other_tables():
    assert configs.SOAK_SHORT == ("pti-on-dks", "pti-off", "pti-off-dks-reclaim")
    assert set(configs.SOAK_SHORT) <= set(configs.SOAK)
    assert configs.APPS_DEFAULT == ("pti-off-appliance", "pti-on-appliance")
    assert [c.name for c in configs.APPS.values() if c.system] == ["debian-pti-off"]
    assert configs.KML_ALL.append == "kml=all"
    assert configs.APPLIANCE.append == "kml=all kml.appliance=measure"


def test_names_are_made_of_the_parts():
    assert Config("debug", smp=4, pti="off", dks="reclaim", generic=True).name == \
        "debug-smp4-pti-off-dks-reclaim-generic"
    assert Config(system="debian", pti="on", kml_all=True).name == "debian-pti-on-appliance"
    assert Config(dks="on", name="on").name == "on"
    with pytest.raises(ValueError):
        Config(pti="maybe")
    with pytest.raises(ValueError):
        configs.table(Config(pti="on"), Config(pti="on"))


def test_merge_adds_the_users_parameters_after_the_configurations():
    assert configs.merge(configs.TESTS["smp2-pti-on"], "", "x") == "pti=on"
    assert configs.merge("pti=off", "  quiet loglevel=3 ", "x") == "pti=off quiet loglevel=3"
    assert configs.merge("", "nokaslr", "x") == "nokaslr"
    assert configs.merge(configs.KSTACK["off"], None, "x") == ""
    # another parameter of the same family is the user's
    assert configs.merge(configs.APPLIANCE, "kml_trusted_dir=/x", "x") == \
        "kml=all kml.appliance=measure kml_trusted_dir=/x"


@pytest.mark.parametrize("own, user, who, message", [
    (configs.KML_ALL, "kml=on", "--appliance",
     "--append: kml=on: --appliance sets kml=all itself (leave kml= out)"),
    (configs.APPLIANCE, "quiet kml.appliance=off", "appliance",
     "--append: kml.appliance=off: appliance sets kml.appliance=measure itself"),
    (configs.PATHLEN["pti-on"], "pti=on", "pathlen's pti-on boot",
     "--append: pti=on: pathlen's pti-on boot sets pti=on itself"),
    (configs.KSTACK["on"], "'dynamic_kstacks=off'", "kstack-bench",
     "--append: dynamic_kstacks=off: kstack-bench sets dynamic_kstacks=on itself"),
    ("pti=on dynamic_kstacks=on sysctl.kernel.kml_syscall_path=generic",
     "sysctl.kernel.kml_syscall_path=bypass", "test",
     "sets sysctl.kernel.kml_syscall_path=generic itself"),
], ids=["run-appliance", "appliance", "pathlen", "kstack", "generic"])
def test_merge_refuses_what_the_configuration_sets(own, user, who, message):
    with pytest.raises(KmlError) as e:
        configs.merge(own, user, who)
    assert message in str(e.value)
