"""A webhook, a chat webhook or a monitor's ping URL that answers with a redirect has
not taken the message: nothing follows it (the signature would go along to wherever it
points), and the error says where it pointed, by scheme and host only. Real HTTP servers
on loopback: the one answering the redirect, and the one it points at."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from cronsvc.config.models import Channel, Job
from cronsvc.notify.channels import DeliveryError, send
from cronsvc.notify.events import Event
from cronsvc.notify.pings import Pinger
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Outcome
from tests.support.receivers import HttpReceiver, http_receiver
from tests.support.wait import wait_for

EVENT = Event(id="dead:nightly-backup@1795500000000:3", event="dead", job="nightly-backup",
              at_ms=1_795_500_065_120, error="exit 3")
TOKEN = "t0ken-in-the-location"


@pytest.fixture
def elsewhere() -> Iterator[HttpReceiver]:
    """Where the redirects point: it must hear nothing."""
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture
def hook(elsewhere: HttpReceiver) -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        receiver.location = f"{elsewhere.url}/stolen?token={TOKEN}"
        yield receiver


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_webhook_answering_a_redirect_is_not_delivered_nor_followed(
        hook: HttpReceiver, elsewhere: HttpReceiver, status: int) -> None:
    hook.statuses = [status]
    with pytest.raises(DeliveryError) as refused:
        send("ops", Channel.model_validate({"webhook": f"{hook.url}/cron", "secret": "s3cret"}),
             EVENT)
    assert str(refused.value) == (f"notify.ops: {hook.url} answered {status}, a redirect to "
                                  f"{elsewhere.url}: not followed")
    assert [r.method for r in hook.received] == ["POST"] and elsewhere.received == []


def test_a_relative_redirect_of_a_slack_webhook_shows_no_path(hook: HttpReceiver) -> None:
    hook.statuses, hook.location = [302], f"/services/T000/B000/{TOKEN}"
    with pytest.raises(DeliveryError) as refused:
        send("chat", Channel.model_validate({"slack": f"{hook.url}/services/T0/B0/XXXX"}), EVENT)
    assert str(refused.value) == (f"notify.chat: {hook.url} answered 302, a redirect to "
                                  f"{hook.url}: not followed")
    assert len(hook.received) == 1


def test_a_redirect_to_no_url_at_all_is_one_line_too(hook: HttpReceiver) -> None:
    hook.statuses, hook.location = [307], "http://[no-such-host/"
    with pytest.raises(DeliveryError) as refused:
        send("ops", Channel.model_validate({"webhook": hook.url}), EVENT)
    assert str(refused.value) == (f"notify.ops: {hook.url} answered 307, a redirect to "
                                  "an invalid URL: not followed")


def test_a_ping_answered_with_a_redirect_is_not_followed(
        hook: HttpReceiver, elsewhere: HttpReceiver, caplog: pytest.LogCaptureFixture) -> None:
    hook.statuses = [302]
    job = Job.model_validate({"name": "backup", "command": ["true"],
                              "ping": {"success": f"{hook.url}/ping/backup-uuid"}})
    pinger = Pinger(timeout=5)
    with caplog.at_level(logging.WARNING, logger="cronsvc.notify"):
        pinger.ended(job, FireContext(job.name, f"{job.name}@0", 0, 1), Outcome("ok", 0, 1))
        try:
            (warned,) = wait_for(lambda: [r.getMessage() for r in caplog.records],
                                 timeout=10, message="the ping's warning")
        finally:
            pinger.close()
    assert warned == (f"jobs.backup.ping: {hook.url} answered 302, a redirect to "
                      f"{elsewhere.url}: not followed")
    assert [r.path for r in hook.received] == ["/ping/backup-uuid"] and elsewhere.received == []
