"""Fixtures of the notification tests: a CA this process trusts, through
``SSL_CERT_FILE`` (read by ``ssl.create_default_context``, so by every channel), and
server certificates it signed."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from tests.support.certs import Issuer, new_ca, server_context, trust_file


@pytest.fixture
def trusted_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Issuer:
    """A CA the channels trust (and no other: not the system's) for this test."""
    ca = new_ca()
    monkeypatch.setenv("SSL_CERT_FILE", str(trust_file(tmp_path, ca)))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "no-other-cas"))
    return ca


@pytest.fixture
def trusted_tls(tmp_path: Path, trusted_ca: Issuer) -> ssl.SSLContext:
    """A server context whose certificate, for 127.0.0.1, the trusted CA signed."""
    return server_context(tmp_path, signer=trusted_ca)
