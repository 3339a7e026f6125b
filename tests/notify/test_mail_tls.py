"""Mail and its password go only over TLS the channel has verified: against a real
aiosmtpd server on loopback, with STARTTLS (smtp://) and TLS from the start (smtps://),
certificates made in the test; a server that offers no TLS gets neither unless the
channel says ``insecure_plaintext: true``."""

from __future__ import annotations

import re
import ssl
from dataclasses import replace
from pathlib import Path

import pytest

from cronsvc.config.models import Channel
from cronsvc.notify.channels import DeliveryError, send
from cronsvc.notify.events import Event
from tests.support.certs import Issuer, new_ca, server_context
from tests.support.receivers import smtp_receiver

PASSWORD = "smtp-pass-0123"
EVENT = Event(id="dead:nightly-backup@1795500000000:3", event="dead", job="nightly-backup",
              at_ms=1_795_500_065_120, fire="nightly-backup@1795500000000", attempt=3,
              status="failed", error="exit 3", output="disk full")


def mail(url: str, **more: object) -> Channel:
    return Channel.model_validate({"email": {"to": ["oncall@example.com"], "smtp": url,
                                             "from": "cron@example.com", **more}})


def url(scheme: str, port: int) -> str:
    return f"{scheme}://cron:{PASSWORD}@127.0.0.1:{port}"


@pytest.mark.parametrize("scheme", ["smtp", "smtps"])
def test_mail_and_password_go_only_to_a_certificate_trusted_for_the_host(
        tmp_path: Path, trusted_ca: Issuer, scheme: str) -> None:
    untrusted = {
        "self-signed, for another name": server_context(tmp_path, ("other.example",)),
        "from an unknown CA": server_context(tmp_path, signer=new_ca("someone else's CA")),
        "from the trusted CA, for another name": server_context(
            tmp_path, ("other.example",), signer=trusted_ca),
    }
    for what, context in untrusted.items():
        with smtp_receiver(context, implicit=scheme == "smtps") as smtp:
            with pytest.raises(DeliveryError) as refused:
                send("oncall", mail(url(scheme, smtp.port)), EVENT)
        assert str(refused.value).startswith(
            f"notify.oncall: {scheme}://127.0.0.1:{smtp.port}: certificate not trusted: "), what
        assert PASSWORD not in str(refused.value)
        assert (smtp.logins, smtp.messages) == ([], []), what
    with smtp_receiver(server_context(tmp_path, signer=trusted_ca),
                       implicit=scheme == "smtps") as smtp:
        said = send("oncall", mail(url(scheme, smtp.port)), EVENT)
    assert said == f"notify.oncall: mailed 1 recipient(s) through {scheme}://127.0.0.1:{smtp.port}"
    assert smtp.logins == [("cron", PASSWORD)] and len(smtp.messages) == 1


def test_a_server_without_starttls_gets_no_password_and_no_mail() -> None:
    with smtp_receiver() as smtp:
        with pytest.raises(DeliveryError) as refused:
            send("oncall", mail(url("smtp", smtp.port)), EVENT)
    assert str(refused.value) == (
        f"notify.oncall: smtp://127.0.0.1:{smtp.port} offers no STARTTLS: nothing sent "
        "(a relay without TLS needs email.insecure_plaintext: true)")
    assert (smtp.logins, smtp.messages) == ([], [])


def test_insecure_plaintext_talks_to_a_relay_without_tls(tmp_path: Path) -> None:
    with smtp_receiver() as smtp:
        send("relay", mail(url("smtp", smtp.port), insecure_plaintext=True), EVENT)
    assert smtp.logins == [("cron", PASSWORD)] and len(smtp.messages) == 1
    # It means no TLS at all, even where the relay offers it (a local relay's certificate
    # is often its distribution's self-signed one).
    with smtp_receiver(server_context(tmp_path, ("other.example",))) as smtp:
        send("relay", mail(f"smtp://127.0.0.1:{smtp.port}", insecure_plaintext=True), EVENT)
    assert len(smtp.messages) == 1


def test_each_mail_has_a_whole_message_id_and_the_event_id_apart(
        trusted_tls: ssl.SSLContext) -> None:
    with smtp_receiver(trusted_tls) as smtp:
        send("oncall", mail(f"smtp://127.0.0.1:{smtp.port}"), EVENT)
        send("oncall", mail(f"smtp://127.0.0.1:{smtp.port}"), replace(EVENT, id="test-1"))
    first, second = smtp.messages
    assert re.fullmatch(r"<[^<>@\s]+@example\.com>", first["Message-ID"]), first["Message-ID"]
    assert first["Message-ID"] != second["Message-ID"]
    assert first["X-Cronsvc-Event-Id"] == "dead:nightly-backup@1795500000000:3"
    assert second["X-Cronsvc-Event-Id"] == "test-1"
