"""A throw-away certificate authority and broker certificate for the local SASL_SSL clusters.

Generated with ``cryptography`` (no openssl or keytool shell-outs) and written as PEM files, which Kafka reads
directly (``ssl.keystore.type=PEM``) and librdkafka takes as ``ssl.ca.location``:

- ``ca.pem``: the CA certificate (clients trust it);
- ``broker-keystore.pem``: the broker's unencrypted PKCS#8 private key followed by its certificate and the CA's.

The broker certificate names ``127.0.0.1`` and ``localhost`` (subject alternative names), so clients keep
hostname verification on (librdkafka's default ``ssl.endpoint.identification.algorithm=https``).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

VALID_DAYS = 365


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    keystore: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mirrorwatch local"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def make_ca(common_name: str) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def make_server_cert(
    ca_key: rsa.RSAPrivateKey, ca_cert: x509.Certificate, common_name: str
) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    key = _key()
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def write_tls_files(folder: Path, cluster_name: str) -> TlsFiles:
    """A CA and a broker certificate signed by it, kept across restarts (clients keep trusting the same CA)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(folder / "ca.pem", folder / "broker-keystore.pem")
    if files.ca.exists() and files.keystore.exists():
        return files
    ca_key, ca_cert = make_ca(f"mirrorwatch local CA ({cluster_name})")
    key, cert = make_server_cert(ca_key, ca_cert, f"kafka {cluster_name}")
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    files.keystore.write_bytes(key_pem + _pem(cert) + _pem(ca_cert))
    files.keystore.chmod(0o600)
    files.ca.write_bytes(_pem(ca_cert))
    return files


def write_ca_only(path: Path, common_name: str = "an unrelated CA") -> Path:
    """A CA certificate that signed nothing the brokers use: what a client with the wrong trust store has."""
    _key_unused, cert = make_ca(common_name)
    path.write_bytes(_pem(cert))
    return path
