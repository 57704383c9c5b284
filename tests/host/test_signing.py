"""host/kmltool/signing.py: the key the built kernels trust, and the
signature appended as scripts/sign-file appends one to a module."""
import struct
import subprocess

import pytest

from kmltool import kbuild, paths, signing
from kmltool.paths import KmlError


@pytest.fixture
def keydir(tmp_path, monkeypatch):
    d = tmp_path / "keys"
    monkeypatch.setattr(signing, "KEYDIR", d)
    monkeypatch.setattr(signing, "KEY", d / "kml-signing.key")
    monkeypatch.setattr(signing, "CERT", d / "kml-signing.pem")
    return d


def test_key_is_made_once_and_private(keydir):
    cert = signing.ensure_key()
    key = keydir / "kml-signing.key"
    assert cert.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert key.stat().st_mode & 0o077 == 0, oct(key.stat().st_mode)
    before = cert.read_bytes()
    signing.ensure_key()
    assert cert.read_bytes() == before
    text = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-text"],
                          check=True, capture_output=True, text=True).stdout
    assert "CA:FALSE" in text and "Digital Signature" in text


def test_signature_layout_and_verifies(keydir, tmp_path):
    signing.ensure_key()
    src = tmp_path / "prog"
    src.write_bytes(b"\x7fELF" + bytes(range(256)) * 40)
    src.chmod(0o755)
    dst = signing.sign_file(src, tmp_path / "prog.signed", keydir / "kml-signing.key",
                            keydir / "kml-signing.pem")
    data, out = src.read_bytes(), dst.read_bytes()
    assert dst.stat().st_mode & 0o777 == 0o755
    assert out.startswith(data) and out.endswith(signing.MAGIC)
    info = out[-len(signing.MAGIC) - 12:-len(signing.MAGIC)]
    algo, hsh, id_type, signer_len, key_id_len, sig_len = struct.unpack(">BBBBB3xI", info)
    assert (algo, hsh, id_type, signer_len, key_id_len) == (0, 0, signing.PKEY_ID_PKCS7, 0, 0)
    sig = out[len(data):len(data) + sig_len]
    assert len(data) + sig_len + 12 + len(signing.MAGIC) == len(out)
    (tmp_path / "sig").write_bytes(sig)
    ok = subprocess.run(["openssl", "cms", "-verify", "-binary", "-inform", "DER",
                         "-in", str(tmp_path / "sig"), "-content", str(src), "-certfile",
                         str(keydir / "kml-signing.pem"), "-nointern", "-noverify",
                         "-out", "/dev/null"], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    # the same message does not verify other contents
    other = tmp_path / "other"
    other.write_bytes(data[:-1] + b"X")
    bad = subprocess.run(["openssl", "cms", "-verify", "-binary", "-inform", "DER",
                          "-in", str(tmp_path / "sig"), "-content", str(other), "-certfile",
                          str(keydir / "kml-signing.pem"), "-nointern", "-noverify",
                          "-out", "/dev/null"], capture_output=True)
    assert bad.returncode != 0


def test_signing_without_a_key_says_what_to_run(keydir, tmp_path):
    src = tmp_path / "prog"
    src.write_bytes(b"x")
    with pytest.raises(KmlError, match="./kml build"):
        signing.sign_file(src, tmp_path / "out")


def test_kernels_with_signed_programs_trust_the_key(keydir):
    frags = kbuild.fragments(kbuild.kernel("default"))
    assert frags[-1] == keydir / "signing.config"
    text = frags[-1].read_text()
    assert text == f'CONFIG_SYSTEM_TRUSTED_KEYS="{signing.TRUSTED_KEYS}"\n'
    # relative to build/obj*, where make runs: build/keys/
    assert (paths.BUILD / "obj" / signing.TRUSTED_KEYS).resolve().parent.name == "keys"
    assert kbuild.fragments(kbuild.kernel("debian"))[-1] == keydir / "signing.config"
    assert all(f.name != "signing.config"
               for f in kbuild.fragments(kbuild.kernel("defconfig")))
