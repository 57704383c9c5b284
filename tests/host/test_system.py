"""Unit tests: ./kml run --system debian without booting -- the
mmdebstrap command, what the image stamps cover, the kernel image's
caching, the command disk's tree, QEMU's command line for a root disk,
the command line's checks, the guest units, and the administrator's
path quoted in README and docs/kernel-mode.md as guest/system/admin-redis.sh
has it (the Debian-system VM test runs that file)."""
import re
import shutil

import pytest

from kmltool import cli, paths, qemu, system
from kmltool.paths import KmlError

GUEST = paths.GUEST_SRC / "system"
ADMIN = GUEST / "admin-redis.sh"


def test_mmdebstrap_command_builds_bookworm_as_root_with_every_package(tmp_path):
    cmd = system.mmdebstrap_command(tmp_path / "root", GUEST / "customize")
    assert cmd[:2] == ["mmdebstrap", "--mode=root"]
    inc = next(a for a in cmd if a.startswith("--include="))[len("--include="):].split(",")
    for pkg in ("systemd", "systemd-sysv", "udev", "redis-server", "nginx", "iperf3",
                "initramfs-tools"):
        assert pkg in inc
    hook = next(a for a in cmd if a.startswith("--customize-hook="))
    assert str(GUEST / "customize") in hook and '"$1"' in hook
    i = cmd.index("bookworm")
    assert cmd[i + 1] == str(tmp_path / "root")
    assert [s.split()[2] for s in cmd[i + 2:]] == ["bookworm", "bookworm-updates",
                                                   "bookworm-security"]


def test_base_key_covers_the_guest_files(tmp_path):
    copy = tmp_path / "system"
    shutil.copytree(GUEST, copy)
    key = system.base_key(copy)
    assert key == system.base_key(GUEST) == system.base_key(copy)
    for name in system.GUEST_FILES:
        f = copy / name
        old = f.read_bytes()
        f.write_bytes(old + b"\n# changed\n")
        assert system.base_key(copy) != key, name
        f.write_bytes(old)
    assert system.base_key(copy) == key


def test_image_key_follows_the_package_content_and_name(tmp_path):
    deb = tmp_path / "linux-image-x_1_amd64.deb"
    deb.write_bytes(b"one")
    k = system.image_key("base", deb)
    assert k == system.image_key("base", deb)
    assert k != system.image_key("other-base", deb)
    deb.write_bytes(b"two")
    assert k != system.image_key("base", deb)
    other = tmp_path / "linux-image-y_1_amd64.deb"
    other.write_bytes(b"one")
    assert system.image_key("base", other) not in (k, system.image_key("base", deb))


def test_stamp_ok_reads_the_first_line(tmp_path):
    s = tmp_path / "stamp"
    assert not system.stamp_ok(s, "abc")
    s.write_text("abc\n6.12.117-kml-debian\n")
    assert system.stamp_ok(s, "abc") and not system.stamp_ok(s, "abd")


@pytest.fixture
def fake_system(tmp_path, monkeypatch):
    """system.prepare() with the base, dpkg -i and mkfs replaced: counts
    how often the kernel image is made."""
    d = tmp_path / "system"
    monkeypatch.setattr(system, "DIR", d)
    monkeypatch.setattr(system, "BASE", d / "debian-base")
    monkeypatch.setattr(system, "IMAGE", d / "debian.img")
    monkeypatch.setattr(system, "BOOT", d / "debian-boot")
    (d / "debian-base" / "boot").mkdir(parents=True)
    (d / "debian-base" / "tmp").mkdir()
    monkeypatch.setattr(system, "build_base", lambda force=False: "base-key")
    made = []

    def install(root, deb):
        (root / "boot" / "vmlinuz-6.12.117-kml-debian").write_bytes(b"kernel")
        (root / "boot" / "initrd.img-6.12.117-kml-debian").write_bytes(b"initrd")
        return "6.12.117-kml-debian"

    def image(root, path, **kw):
        made.append(path)
        path.write_bytes(b"ext4")
        return path

    monkeypatch.setattr(system, "install_kernel", install)
    monkeypatch.setattr(system, "make_image", image)
    return made


def test_prepare_builds_the_kernel_image_once_per_package(tmp_path, fake_system):
    deb = tmp_path / "linux-image-6.12.117-kml-debian_1_amd64.deb"
    deb.write_bytes(b"package one")
    img = system.prepare(deb)
    assert img.release == "6.12.117-kml-debian"
    assert img.vmlinuz.read_bytes() == b"kernel" and img.initrd.read_bytes() == b"initrd"
    assert len(fake_system) == 1
    again = system.prepare(deb)
    assert len(fake_system) == 1 and again.image == img.image     # cached
    deb.write_bytes(b"package two")                                 # a new package
    system.prepare(deb)
    assert len(fake_system) == 2
    assert not (system.DIR / "debian-work").exists()
    with pytest.raises(KmlError, match="no such kernel package"):
        system.prepare(tmp_path / "missing.deb")


def test_command_tree_holds_the_command_and_the_added_files(tmp_path):
    prog = tmp_path / "prog"
    prog.write_text("#!/bin/sh\necho hi\n")
    prog.chmod(0o755)
    tree = system.command_tree(tmp_path / "d", ["sh", "-c", "echo 'a b'; exit 3"],
                               [str(prog), f"{prog}:/usr/local/bin/", f"{prog}:/opt/x"],
                               env={"A": "1 2"})
    assert (tree / "cmd").read_text() == ("export A='1 2'\n"
                                          "exec sh -c 'echo '\"'\"'a b'\"'\"'; exit 3'\n")
    assert (tree / "files.list").read_text() == (
        "0 /root/prog\n1 /usr/local/bin/prog\n2 /opt/x\n")
    assert (tree / "files" / "1").read_text() == prog.read_text()
    assert (tree / "files" / "1").stat().st_mode & 0o777 == 0o755
    with pytest.raises(KmlError, match="no such file"):
        system.command_tree(tmp_path / "e", ["true"], [str(tmp_path / "nope")])
    assert not (system.command_tree(tmp_path / "f", ["true"]) / "files.list").exists()


def test_qemu_command_boots_a_root_disk_without_initramfs(tmp_path):
    drives = ["file=root.img,format=raw,if=virtio,snapshot=on",
              "file=cmd.img,format=raw,if=virtio,readonly=on"]
    cmd = qemu.qemu_command("tcg", 2, "1G", system.APPEND, None, tmp_path,
                            disk=tmp_path / "d.img", bzimage="vmlinuz", drives=drives)
    assert "-initrd" not in cmd
    values = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-drive"]
    assert values[:2] == drives and values[2].startswith(f"file={tmp_path / 'd.img'}")
    assert "root=/dev/vda rw" in cmd[cmd.index("-append") + 1]
    cmd = qemu.qemu_command("tcg", 2, "1G", "", "initrd.img", tmp_path, bzimage="vmlinuz")
    assert cmd[cmd.index("-initrd") + 1] == "initrd.img" and "-drive" not in cmd


def test_run_system_options(capsys):
    a = cli.build_parser().parse_args(["run", "--system", "debian", "--smp", "1",
                                       "--add", "x:/y", "--", "true"])
    assert a.system == "debian" and a.smp == 1 and a.add == ["x:/y"]
    for opt in (["--kernel-mode"], ["--appliance"], ["--disk", "64"],
                ["--kernel", "debian"]):
        assert cli.main(["run", "--system", "debian", *opt, "--", "true"]) == 1
        assert "not available there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run", "--system", "fedora", "--", "true"])


def test_run_unit_runs_after_multi_user_without_holding_the_boot():
    unit = (GUEST / "kml-run.service").read_text()
    assert re.search(r"^After=multi-user\.target$", unit, re.M)
    assert re.search(r"^WantedBy=multi-user\.target$", unit, re.M)
    # Type=simple: the start job ends at once, so is-system-running --wait
    # inside the command returns
    assert re.search(r"^Type=simple$", unit, re.M)
    assert "ExecStart=/usr/local/sbin/kml-run" in unit
    runner = (GUEST / "kml-run").read_text()
    for s in ("/dev/disk/by-label/kml-cmd", "/dev/ttyS1", "/dev/ttyS2", "KML-EXIT",
                  "poweroff"):
        assert s in runner


def admin_script_body():
    """The script without its leading comment block."""
    lines = ADMIN.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if not line.startswith("#"))
    return "\n".join(lines[i:]).strip() + "\n"


def test_kernel_mode_doc_quotes_the_admin_script_exactly():
    doc = (paths.ROOT / "docs" / "kernel-mode.md").read_text()
    blocks = re.findall(r"^```sh\n(.*?)^```", doc, re.S | re.M)
    assert admin_script_body() in blocks, (
        "docs/kernel-mode.md must quote guest/system/admin-redis.sh (from `set -eu` on) "
        "in a ```sh block, as it is")


def test_readme_admin_steps_are_the_scripts():
    readme = (paths.ROOT / "README.md").read_text()
    m = re.search(r"^## Kernel mode on a Debian machine\n(.*?)^## ", readme, re.S | re.M)
    assert m, "README: no section 'Kernel mode on a Debian machine'"
    block = re.search(r"^```sh\n(.*?)^```", m.group(1), re.S | re.M)
    assert block
    script = ADMIN.read_text()
    for line in block.group(1).splitlines():
        cmd = line.split("  #", 1)[0].strip()
        if cmd and not cmd.startswith(("#", "apt install", "reboot")):
            assert cmd in script, f"README's step {cmd!r} is not in {ADMIN.name}"


def test_bench_apps_has_one_debian_system_configuration():
    from kmltool import apps, configs
    debian = [c for c in configs.APPS.values() if c.system]
    assert [c.name for c in debian] == ["debian-pti-off"]
    assert debian[0].system == "debian" and "kml=all" not in debian[0].append
    assert "debian-pti-off" not in configs.APPS_DEFAULT
    adds = dict(s.split(":", 1)[::-1] for s in apps.system_adds())
    # the guest-run layer and the tree; the programs are the image's own
    assert set(adds) == {"/usr/bin/kml-modes", "/usr/bin/kml-apps",
                         f"{apps.GUEST_DIR}/nginx.conf", apps.FIND_GUEST,
                         apps.MANIFEST_GUEST}
    pre = apps.SYSTEM_PRELUDE
    assert pre[0].startswith("systemctl stop redis-server") and pre[-len(apps.PRELUDE):] == \
        apps.PRELUDE
    assert any(f"tmpfs {apps.TREE}" in line for line in pre)
    assert any("install -d -o root -g root -m 755 /trusted" in line for line in pre)
    assert "export KML_SERVER_UNIT=1" in pre      # servers started by systemd


def test_bench_apps_debian_configuration_runs_on_its_own(capsys):
    assert cli.main(["bench", "--apps", "--config", "pti-off",
                     "--config", "debian-pti-off"]) == 1
    assert "run it on its own" in capsys.readouterr().err
    assert cli.main(["bench", "--apps", "--config", "pti-off", "--deb", "x.deb"]) == 1
    assert "--deb" in capsys.readouterr().err
    assert cli.main(["bench", "--deb", "x.deb"]) == 1
    assert "options of --apps" in capsys.readouterr().err


def test_append_may_not_move_the_root_file_system(monkeypatch):
    monkeypatch.setattr(system, "prepare", lambda deb: pytest.fail("built before the check"))
    with pytest.raises(KmlError, match="the Debian system sets root=/dev/vda itself"):
        system.boot(["true"], deb="x.deb", append="quiet root=/dev/sda", direct_kernel=True)


def test_installed_machine_takes_grubs_command_line(monkeypatch, capsys):
    from kmltool import machine
    monkeypatch.setattr(machine, "prepare", lambda deb: pytest.fail("built before the check"))
    with pytest.raises(KmlError, match="GRUB's command line"):
        system.boot(["true"], deb="x.deb", append="pti=off")
    monkeypatch.setattr(system.os, "geteuid", lambda: 0)
    assert cli.main(["run", "--system", "debian", "--append", "pti=off", "--", "true"]) == 1
    assert "--append needs --direct-kernel" in capsys.readouterr().err
    assert cli.main(["run", "--direct-kernel", "--", "true"]) == 1
    assert "an option of --system" in capsys.readouterr().err


def test_system_commands_say_root_before_building(monkeypatch, capsys):
    from kmltool import package
    monkeypatch.setattr(system.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(package, "build_package", lambda *a, **k: pytest.fail("built"))
    assert cli.main(["run", "--system", "debian", "--", "true"]) == 1
    assert "sudo ./kml run --system debian" in capsys.readouterr().err
    assert cli.main(["test", "--system", "debian"]) == 1
    assert "sudo ./kml test --system debian" in capsys.readouterr().err


def test_machine_boots_through_firmware_with_its_disk_on_nvme(tmp_path):
    from kmltool import machine
    cmd = qemu.qemu_command("tcg", 2, "1G", "ignored", False, tmp_path,
                            firmware=("code.fd", "vars.fd"),
                            drives=["file=cmd.img,format=raw,if=virtio,readonly=on"],
                            devices=[*machine.nvme("m.img"), *machine.NETWORK])
    assert "-kernel" not in cmd and "-append" not in cmd and "-initrd" not in cmd
    drives = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-drive"]
    assert drives[:2] == ["if=pflash,format=raw,unit=0,readonly=on,file=code.fd",
                          "if=pflash,format=raw,unit=1,file=vars.fd"]
    assert "file=m.img,format=raw,if=none,id=kml-root,snapshot=on" in drives
    assert "nvme,drive=kml-root,serial=kml-root" in cmd
    assert "virtio-net-pci,netdev=net0" in cmd
    assert "snapshot" not in machine.nvme("m.img", snapshot=False)[1]
    args = machine.BUSES["scsi"]("m.img")
    assert args[:2] == ["-device", "virtio-scsi-pci,id=scsi0"]
    assert "scsi-hd,bus=scsi0.0,drive=kml-root,serial=kml-root" in args


def test_stock_kernel_is_debians_cloud_kernel_of_the_base(tmp_path):
    from kmltool import machine
    boot = tmp_path / "boot"
    boot.mkdir()
    with pytest.raises(KmlError, match="0 Debian cloud kernels"):
        machine.stock_kernel(tmp_path)
    (boot / "vmlinuz-6.1.0-41-cloud-amd64").write_bytes(b"k")
    with pytest.raises(KmlError, match="initramfs-tools did not run"):
        machine.stock_kernel(tmp_path)
    (boot / "initrd.img-6.1.0-41-cloud-amd64").write_bytes(b"i")
    v, i, rel = machine.stock_kernel(tmp_path)
    assert rel == "6.1.0-41-cloud-amd64" and v.name == "vmlinuz-6.1.0-41-cloud-amd64"


def test_installer_lays_out_the_disk_as_debians_installer():
    text = (GUEST / "install-machine").read_text()
    for step in ("-t 1:EF00", "-t 3:8E00", "vgcreate -q kml-vg", "--removable",
                 "--no-nvram", "update-initramfs -u -k all", "update-grub",
                 "/dev/mapper/kml--vg-root / ext4", "/boot/efi vfat"):
        assert step in text, step
