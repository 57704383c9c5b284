"""Unit tests: the kernels built from the series, their configs, the
choice of test configurations by kernel, and the objtool check."""
import pytest

from kmltool import cli, configs, kbuild, paths
from kmltool.commands import test as test_cmd
from kmltool.paths import KmlError


def test_a_later_fragment_overrides_an_earlier_one(tmp_path):
    base, over, config = tmp_path / "a", tmp_path / "b", tmp_path / ".config"
    base.write_text("CONFIG_PREEMPT_VOLUNTARY=y\nCONFIG_X=y\n")
    over.write_text("CONFIG_PREEMPT=y\n# CONFIG_PREEMPT_VOLUNTARY is not set\n")
    config.write_text("CONFIG_PREEMPT=y\nCONFIG_X=y\n# CONFIG_PREEMPT_VOLUNTARY is not set\n")
    assert kbuild.check_config([base, over], config) == []
    assert kbuild.check_config([base], config) == [
        "CONFIG_PREEMPT_VOLUNTARY=y requested, got CONFIG_PREEMPT_VOLUNTARY=n"]
    config.write_text("CONFIG_X=y\n")
    assert kbuild.check_config([base, over], config) == [
        "CONFIG_PREEMPT=y requested, got CONFIG_PREEMPT=n"]


def test_the_debug_kernel_has_its_own_build_directory_and_fragment():
    d, k = kbuild.kernel("debug"), kbuild.kernel()
    assert k is kbuild.kernel("default") and k.obj == paths.OBJ
    assert d.obj != k.obj and d.bzimage != k.bzimage
    assert d.fragments[0] == k.fragments[0] and len(d.fragments) == 2
    want = kbuild.parse_fragment(paths.DEBUG_FRAGMENT)
    for opt in ("CONFIG_PREEMPT", "CONFIG_PROVE_LOCKING", "CONFIG_DEBUG_ENTRY",
                "CONFIG_DEBUG_VM", "CONFIG_UBSAN_BOUNDS"):
        assert want[opt] == "y", opt
    with pytest.raises(KmlError, match="unknown kernel 'nope'"):
        kbuild.kernel("nope")
    dc = kbuild.kernel("defconfig")
    assert dc.base == ("x86_64_defconfig", "kvm_guest.config") and k.base == ("tinyconfig",)
    assert kbuild.parse_fragment(paths.DEFCONFIG_FRAGMENT)["CONFIG_KERNEL_MODE_LINUX"] == "y"


def test_every_test_configuration_names_a_known_kernel():
    for name, c in configs.TESTS.items():
        assert c.kernel in kbuild.KERNELS, name
        assert (name.split("-")[0] if c.kernel != "default" else "default") == c.kernel, name
    kernels = {configs.TESTS[n].kernel for n in configs.DEFAULT_TESTS}
    assert kernels == {"default", "debug"}
    pti = {configs.TESTS[n].pti for n in configs.DEFAULT_TESTS
           if configs.TESTS[n].kernel == "debug"}
    assert pti == {"on", "off"}


def parse(*argv):
    return cli.build_parser().parse_args(list(argv))


def test_test_kernel_selects_its_configurations():
    assert test_cmd.test_configs(parse("test")) == list(configs.DEFAULT_TESTS)
    debug = test_cmd.test_configs(parse("test", "--kernel", "debug"))
    assert debug and all(c.startswith("debug-") for c in debug)
    assert test_cmd.test_configs(parse("test", "--config", "smp2-pti-on")) == ["smp2-pti-on"]
    with pytest.raises(KmlError, match="boots the default kernel, not --kernel debug"):
        test_cmd.test_configs(parse("test", "--kernel", "debug", "--config", "smp2-pti-on"))


def test_build_and_run_take_a_kernel():
    assert parse("build").kernel is None
    assert parse("build", "--kernel", "debug").kernel == "debug"
    assert parse("run", "--kernel", "debug", "--", "true").kernel == "debug"
    with pytest.raises(SystemExit):
        parse("build", "--kernel", "nope")


def test_objtool_arguments_follow_the_config(tmp_path):
    config = tmp_path / ".config"
    config.write_text("CONFIG_NOINSTR_VALIDATION=y\nCONFIG_MITIGATION_SRSO=y\n")
    assert kbuild.objtool_vmlinux_args(config) == ["--noinstr", "--unret", "--link",
                                                    "--dry-run"]
    config.write_text("CONFIG_NOINSTR_VALIDATION=y\n")
    assert kbuild.objtool_vmlinux_args(config) == ["--noinstr", "--link", "--dry-run"]
    config.write_text("CONFIG_DEBUG_ENTRY=y\n")
    with pytest.raises(KmlError, match="CONFIG_NOINSTR_VALIDATION is not set"):
        kbuild.objtool_vmlinux_args(config)


def test_objtool_warnings_are_picked_out():
    out = ("  LD      vmlinux.o\n"
           "vmlinux.o: warning: objtool: kml_entry_fixup+0x2a: call to foo() leaves "
           ".noinstr.text section\n"
           "vmlinux.o: warning: objtool: entry_X+0x10: missing VALIDATE_UNRET_END\n")
    assert kbuild.objtool_warnings(out) == out.splitlines()[1:]
    assert kbuild.objtool_warnings("  OBJTOOL vmlinux.o\n") == []


def test_ccache_is_shared_between_checkouts_unless_the_user_says_otherwise():
    env = kbuild.ccache_env({"PATH": "/bin"})
    assert env["CCACHE_BASEDIR"] == str(paths.BUILD) and env["CCACHE_NOHASHDIR"] == "1"
    assert env["PATH"] == "/bin"
    assert kbuild.ccache_env({"CCACHE_BASEDIR": "/x"})["CCACHE_BASEDIR"] == "/x"


def test_the_debian_kernel_starts_from_debians_configuration(tmp_path, monkeypatch):
    k = kbuild.kernel("debian")
    assert k.obj == paths.BUILD / "obj-debian" and k.fragments == [paths.DEBIAN_FRAGMENT]
    (base,) = k.base
    assert isinstance(base, kbuild.DebianConfig) and base.path == paths.DEBIAN_CONFIG
    frag = kbuild.parse_fragment(paths.DEBIAN_FRAGMENT)
    for opt in ("CONFIG_KERNEL_MODE_LINUX", "CONFIG_DYNAMIC_KSTACKS", "CONFIG_VIRTIO_BLK",
                "CONFIG_EXT4_FS"):
        assert frag[opt] == "y", opt
    # Debian's choices are not overridden by the fragment
    for opt in ("CONFIG_X86_DEBUG_FPU", "CONFIG_HZ_250", "CONFIG_PREEMPT_DYNAMIC",
                "CONFIG_NO_HZ_FULL", "CONFIG_RANDOMIZE_KSTACK_OFFSET_DEFAULT"):
        assert opt not in frag, opt
    missing = kbuild.DebianConfig(tmp_path / "config.amd64_none_amd64.xz")
    with pytest.raises(KmlError, match="linux-config-6.12"):
        missing.identity()


def test_the_debian_configuration_is_unpacked_and_its_modules_turned_off(tmp_path, monkeypatch):
    import lzma
    src = tmp_path / "config.xz"
    src.write_bytes(lzma.compress(b"CONFIG_EXT4_FS=m\n"))
    obj = tmp_path / "obj"
    obj.mkdir()
    k = kbuild.Kernel("t", [], obj, "test")
    made = []
    monkeypatch.setattr(kbuild, "make", lambda tree, kern, *t, **kw: made.append(t))
    kbuild.DebianConfig(src).write(tmp_path, k)
    assert (obj / ".config").read_bytes() == b"CONFIG_EXT4_FS=m\n"
    assert made == [("mod2noconfig",)]
    assert "config.xz" in str(kbuild.DebianConfig(src))
