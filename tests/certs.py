"""Test certificates: a CA and the certificates it signs, as PEM files (``cryptography``)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def authority(folder: Path, names: dict[str, list[str]]) -> dict[str, Path]:
    """Write ``ca.pem`` and, for each ``name -> [host names and IP addresses]``, ``name.pem``
    (its certificate) and ``name.key`` (its unencrypted PKCS#8 key) into ``folder``, each
    certificate signed by the CA for a day. Returns file name stem -> path (``ca``,
    ``broker``, ``broker.key``, ...)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("kafka-chaos test CA"))
          .issuer_name(_name("kafka-chaos test CA")).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    out = {"ca": folder / "ca.pem"}
    out["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for serial, (name, hosts) in enumerate(names.items(), 2):
        key = ec.generate_private_key(ec.SECP256R1())
        alt = []
        for host in hosts:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alt.append(x509.DNSName(host))
        cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca.subject)
                .public_key(key.public_key()).serial_number(serial).not_valid_before(now)
                .not_valid_after(now + datetime.timedelta(1))
                .add_extension(x509.SubjectAlternativeName(alt), critical=False)
                .sign(ca_key, hashes.SHA256()))
        out[name] = folder / f"{name}.pem"
        out[f"{name}.key"] = folder / f"{name}.key"
        out[name].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        out[f"{name}.key"].write_bytes(_pem_key(key))
    return out
