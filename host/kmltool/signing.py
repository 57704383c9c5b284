"""The key that the kernels ./kml builds trust for kernel-mode programs
under lockdown (CONFIG_KML_SIGNED_PROGRAMS), and signing with it.

A kernel with that option admits a static program to CPL 0 under
lockdown only if it carries a signature appended as scripts/sign-file
appends one to a kernel module (PKCS#7, struct module_signature, the
magic string), made by a key in the kernel's trusted keyrings.  Each
build directory makes its own key pair once, in build/keys/, and every
kernel built with the option trusts its certificate
(CONFIG_SYSTEM_TRUSTED_KEYS), as a self-built kernel trusts its own
module signing key.  Whoever holds build/keys/kml-signing.key can sign
programs for those kernels: keep it as private as a module signing key.
"""
import os
import struct
import subprocess
from pathlib import Path

from . import paths
from .paths import KmlError
from .util import run

KEYDIR = paths.BUILD / "keys"
KEY = KEYDIR / "kml-signing.key"
CERT = KEYDIR / "kml-signing.pem"
# relative to the kernel's build directory (build/obj*), where make runs:
# the same string in every clone, so ccache keeps its hits
TRUSTED_KEYS = "../keys/kml-signing.pem"

MAGIC = b"~Module signature appended~\n"
PKEY_ID_PKCS7 = 2

# as certs/default_x509.genkey asks for a module signing key
GENKEY = """\
[ req ]
default_bits = 3072
distinguished_name = req_distinguished_name
prompt = no
string_mask = utf8only
x509_extensions = myexts

[ req_distinguished_name ]
O = kml
CN = kml program signing key (build/keys)

[ myexts ]
basicConstraints=critical,CA:FALSE
keyUsage=digitalSignature
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
"""


def ensure_key():
    """Make the key pair if this build directory has none; return CERT."""
    if KEY.exists() and CERT.exists():
        return CERT
    KEYDIR.mkdir(parents=True, exist_ok=True)
    genkey = KEYDIR / "x509.genkey"
    genkey.write_text(GENKEY)
    old = os.umask(0o077)
    try:
        run(["openssl", "req", "-new", "-nodes", "-utf8", "-sha256", "-days", "36500",
             "-batch", "-x509", "-config", str(genkey), "-newkey", "rsa:3072",
             "-keyout", str(KEY), "-out", str(CERT)], capture=True)
    finally:
        os.umask(old)
    return CERT


def fragment():
    """A config fragment that makes the kernel trust CERT; written to
    build/keys/signing.config, returned as a Path."""
    ensure_key()
    frag = KEYDIR / "signing.config"
    text = f'CONFIG_SYSTEM_TRUSTED_KEYS="{TRUSTED_KEYS}"\n'
    if not frag.exists() or frag.read_text() != text:
        frag.write_text(text)
    return frag


def signature(data, key=None, cert=None):
    """What scripts/sign-file appends to data: a detached PKCS#7 message
    (SHA-256, no certificates, no signed attributes), struct
    module_signature with its length, and the magic string.  key, cert:
    default this build directory's."""
    key, cert = key or KEY, cert or CERT
    if not Path(key).exists() or not Path(cert).exists():
        raise KmlError(f"no signing key at {key}: run ./kml build")
    p = run_openssl(["cms", "-sign", "-binary", "-noattr", "-nocerts", "-nosmimecap",
                     "-md", "sha256", "-outform", "DER", "-signer", str(cert),
                     "-inkey", str(key)], data)
    # struct module_signature: algo, hash, id_type, signer_len,
    # key_id_len, __pad[3], __be32 sig_len
    return p + struct.pack(">BBBBB3xI", 0, 0, PKEY_ID_PKCS7, 0, 0, len(p)) + MAGIC


def run_openssl(args, data):
    """openssl ARGS with data on its standard input; its output."""
    try:
        p = subprocess.run(["openssl", *args], input=data, capture_output=True)
    except FileNotFoundError as e:
        raise KmlError("openssl: not found; run ./kml setup") from e
    if p.returncode:
        raise KmlError(f"openssl {args[0]} failed: {p.stderr.decode(errors='replace').strip()}")
    return p.stdout


def sign_file(src, dst, key=None, cert=None):
    """Write src with its signature appended to dst (mode kept)."""
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data + signature(data, key, cert))
    os.chmod(dst, os.stat(src).st_mode & 0o7777)
    return dst

