"""The cluster's small certificate authority: one CA, and certificates whose role is in the subject.

``aleph cluster init DIR`` makes the CA, the scheduler's certificate and the center's client certificate;
``aleph cluster issue DIR NAME`` makes one node's. Keys are ECDSA P-256 (every TLS stack speaks it),
written 0600. The role (``aleph-center``, ``aleph-scheduler``, ``aleph-node``) is the subject's OU: a
node answers Aleph requests only over a connection whose peer certificate says ``aleph-center``, and a
node's certificate CN is its node name. Certificates are the trust boundary of a Dask cluster (a Dask
client with a valid certificate can run any Python on the workers), so only the center gets one whose
role is ``aleph-center``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "ROLE_CENTER",
    "ROLE_NODE",
    "ROLE_SCHEDULER",
    "CertPaths",
    "PkiError",
    "init_ca",
    "issue",
    "read_identity",
]

ROLE_CENTER = "aleph-center"
ROLE_NODE = "aleph-node"
ROLE_SCHEDULER = "aleph-scheduler"
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}", re.ASCII)
_DAYS = 825  # the longest validity common clients accept for leaf certificates


class PkiError(ValueError):
    """A certificate cannot be made or read; the message names the file or the bad value."""


@dataclass(frozen=True, slots=True)
class CertPaths:
    """The files of one issued certificate."""

    ca: Path
    cert: Path
    key: Path


def check_name(name: str) -> str:
    """A node or certificate name: lowercase ``[a-z0-9._-]``, at most 63 characters."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise PkiError(f"name {name!r} must be 1-63 characters of a-z, 0-9, '.', '_' or '-', starting alphanumeric")
    return name


def _write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _subject(cn: str, role: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "aleph-cluster"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _alt_names(hosts: list[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for host in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            out.append(x509.DNSName(host))
    return out


def init_ca(directory: Path, *, hosts: list[str], force: bool = False) -> dict[str, CertPaths]:
    """Make the CA, the scheduler's certificate (for ``hosts``) and the center's client certificate.

    Refuses to overwrite an existing CA unless ``force`` (a new CA orphans every issued certificate).
    """
    directory = Path(directory)
    if (directory / "ca.key").exists() and not force:
        raise PkiError(f"{directory / 'ca.key'} exists: a new CA would orphan every certificate it issued (--force)")
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "aleph-cluster"), x509.NameAttribute(NameOID.COMMON_NAME, "ca")]
    )
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write(directory / "ca.key", _key_pem(ca_key), 0o600)
    _write(directory / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return {
        "scheduler": issue(directory, "scheduler", role=ROLE_SCHEDULER, hosts=hosts),
        "center": issue(directory, "center", role=ROLE_CENTER, hosts=[]),
    }


def issue(directory: Path, name: str, *, role: str = ROLE_NODE, hosts: list[str] | None = None) -> CertPaths:
    """Issue a certificate for ``name`` with ``role`` signed by the CA in ``directory``.

    Files: ``<directory>/<role-dir>/<name>.crt`` and ``.key`` (``center/``, ``scheduler/`` or ``nodes/``).
    """
    directory = Path(directory)
    check_name(name)
    if role not in (ROLE_CENTER, ROLE_NODE, ROLE_SCHEDULER):
        raise PkiError(f"role {role!r} is not one of {ROLE_CENTER}, {ROLE_NODE}, {ROLE_SCHEDULER}")
    try:
        ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    except FileNotFoundError as exc:
        raise PkiError(f"no CA in {directory}: run `aleph cluster init {directory}` first ({exc.filename})") from exc
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise PkiError(f"{directory / 'ca.key'} is not an EC key")
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    # Workers and the scheduler both accept and open connections; the center only opens them.
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if role != ROLE_CENTER:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_subject(name, role))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    names = _alt_names([*(hosts or []), name])
    builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    folder = directory / {ROLE_CENTER: "center", ROLE_NODE: "nodes", ROLE_SCHEDULER: "scheduler"}[role]
    paths = CertPaths(ca=directory / "ca.crt", cert=folder / f"{name}.crt", key=folder / f"{name}.key")
    _write(paths.key, _key_pem(key), 0o600)
    _write(paths.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return paths


def read_identity(cert_file: Path) -> tuple[str, str]:
    """``(common name, role)`` of a PEM certificate file."""
    try:
        cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    except (OSError, ValueError) as exc:
        raise PkiError(f"cannot read certificate {cert_file}: {exc}") from exc
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    ou = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    return (str(cn[0].value) if cn else "", str(ou[0].value) if ou else "")


def peer_identity(peercert: object) -> tuple[str, str]:
    """``(common name, role)`` from :meth:`ssl.SSLSocket.getpeercert`'s dict ('', '' when absent)."""
    cn = role = ""
    if isinstance(peercert, dict):
        for rdn in peercert.get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    cn = value
                elif key == "organizationalUnitName":
                    role = value
    return cn, role
