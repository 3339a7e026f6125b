"""Certificates made in the test, for TLS receivers: a CA a test may trust (through
``SSL_CERT_FILE``), a server certificate it signed, and a self-signed one no one trusts."""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# Names of the loopback receivers: a client connects to 127.0.0.1 (or localhost).
LOOPBACK = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Issuer:
    """A key and its certificate, able to sign server certificates."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _san(names: tuple[str, ...]) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, signer: Issuer | None,
                 names: tuple[str, ...], ca: bool) -> x509.Certificate:
    now = datetime.now(UTC)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject))
               .issuer_name(signer.cert.subject if signer else _name(subject))
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - timedelta(hours=1))
               .not_valid_after(now + timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(_san(names), critical=False)
    return builder.sign(signer.key if signer else key, hashes.SHA256())


def new_ca(common: str = "cronsvc test CA") -> Issuer:
    key = ec.generate_private_key(ec.SECP256R1())
    return Issuer(key, _certificate(common, key, None, (), ca=True))


def server_context(directory: Path, names: tuple[str, ...] = LOOPBACK,
                   signer: Issuer | None = None) -> ssl.SSLContext:
    """A server's TLS context with a certificate for ``names``, signed by ``signer`` (or by
    itself when None); its files are written under ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate(names[0], key, signer, names, ca=False)
    stem = f"{names[0]}-{cert.serial_number:x}"
    cert_file, key_file = directory / f"{stem}.crt", directory / f"{stem}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context


def trust_file(directory: Path, ca: Issuer) -> Path:
    """A CA file holding ``ca`` alone, for ``SSL_CERT_FILE``."""
    path = directory / "trusted-ca.pem"
    path.write_bytes(ca.pem())
    return path
