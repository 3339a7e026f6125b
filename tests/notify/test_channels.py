"""Notification channels against real receivers: a local HTTP server for webhooks, Slack
and Teams (the signature checked), a local SMTP server with STARTTLS for mail (TLS itself
is test_mail_tls.py's), and a real command; the channel section of the job file; and
`cronsvc notify test`."""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import ssl
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.config.models import Channel, load_config
from cronsvc.errors import ConfigError
from cronsvc.notify.channels import SIGNATURE_HEADER, DeliveryError, send
from cronsvc.notify.events import Event
from tests.support.cli import error_line, ok
from tests.support.paths import ROOT
from tests.support.receivers import http_receiver, smtp_receiver

SECRET = "hook-secret-value-0123"
EVENT = Event(id="ev-1", event="dead", job="nightly-backup", at_ms=1_795_500_065_120,
              fire="nightly-backup@1795500000000", attempt=3, status="failed",
              error="exit 3", output="disk full", scheduled_ms=1_795_500_000_000,
              links={"job": "http://127.0.0.1:8080/jobs/nightly-backup"})


def channel(**spec: object) -> Channel:
    return Channel.model_validate(spec)


def test_a_webhook_gets_the_event_signed() -> None:
    env = {"HOOK_SECRET": SECRET}
    with http_receiver() as hook:
        said = send("ops", channel(webhook=f"{hook.url}/cron", secret="${HOOK_SECRET}"), EVENT,
                    env)
    assert said == f"notify.ops: {hook.url} answered 200"
    (got,) = hook.received
    assert got.path == "/cron"
    assert got.headers[SIGNATURE_HEADER] == "sha256=" + hmac.new(
        SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert (got.headers["X-Cronsvc-Event"], got.headers["X-Cronsvc-Delivery"]) == ("dead",
                                                                                 "ev-1")
    body = json.loads(got.body)
    assert body == {"version": 1, "id": "ev-1", "event": "dead", "job": "nightly-backup",
                    "fire": "nightly-backup@1795500000000", "attempt": 3, "status": "failed",
                    "error": "exit 3", "output": "disk full", "count": 1, "period_s": None,
                    "title": "nightly-backup: failed for good (no attempts left)",
                    "links": {"job": "http://127.0.0.1:8080/jobs/nightly-backup"},
                    "at": "2026-11-24T06:01:05.120Z", "scheduled_at": "2026-11-24T06:00:00Z"}
    assert SECRET.encode() not in got.body


def test_slack_and_teams_get_their_own_formats() -> None:
    with http_receiver() as hook:
        send("chat", channel(slack="${SLACK_URL}"), EVENT, {"SLACK_URL": f"{hook.url}/s"})
        send("teams", channel(teams=f"{hook.url}/t"), EVENT)
    slack, teams = (json.loads(r.body) for r in hook.received)
    assert slack["text"] == "nightly-backup: failed for good (no attempts left)"
    assert "exit 3" in slack["blocks"][1]["text"]["text"]
    assert (teams["@type"], teams["title"]) == ("MessageCard", slack["text"])


# Output that would act in a chat message if it were taken as markup.
HOSTILE = replace(EVENT, job="backup<!here>", error="<!here> & <https://evil.example|log in>",
                  output="```\n<!channel> [log in](https://evil.example) <b>now</b>\n```")


def test_slack_shows_a_job_s_output_as_text_that_cannot_act() -> None:
    with http_receiver() as hook:
        send("chat", channel(slack=hook.url), HOSTILE)
    message = json.loads(hook.received[0].body)
    title, details = (block["text"]["text"] for block in message["blocks"])
    assert message["text"] == "backup&lt;!here&gt;: failed for good (no attempts left)"
    assert title == f"*{message['text']}*"
    assert details.startswith("```") and details.endswith("```")
    inside = details[3:-3]
    assert "```" not in inside and "<" not in inside and ">" not in inside
    assert "error: &lt;!here&gt; &amp; &lt;https://evil.example|log in&gt;" in inside
    assert html.unescape(inside.replace("\u200b", "")) == HOSTILE.text()  # reads as written


def test_a_teams_card_shows_a_job_s_output_as_text_that_cannot_act() -> None:
    with http_receiver() as hook:
        send("teams", channel(teams=hook.url), HOSTILE)
    card = json.loads(hook.received[0].body)
    assert not set("<>[]") & set(card["text"])
    assert "&#91;log in&#93;(https://evil.example) &lt;b&gt;now&lt;/b&gt;" in card["text"]
    assert html.unescape(card["text"]).replace("  \n", "\n") == HOSTILE.text()
    assert card["title"] == HOSTILE.title()  # Teams shows a card's title as it is


def test_a_refusing_endpoint_or_a_missing_secret_is_one_line_without_the_secret() -> None:
    with http_receiver() as hook:
        hook.statuses = [500]
        secret_url = f"{hook.url}/services/T000/B000/XXXXSECRETXXXX"
        with pytest.raises(DeliveryError) as refused:
            send("chat", channel(slack=secret_url), EVENT)
    assert str(refused.value) == f"notify.chat: {hook.url} answered 500"
    with pytest.raises(DeliveryError, match=r"notify.ops.secret: environment variable "
                                            r"HOOK_SECRET is not set"):
        send("ops", channel(webhook="http://127.0.0.1:1/", secret="${HOOK_SECRET}"), EVENT, {})
    with pytest.raises(DeliveryError, match="cannot reach http://127.0.0.1:1"):
        send("ops", channel(webhook="http://127.0.0.1:1/"), EVENT)


def test_a_url_from_the_environment_is_checked_when_sending() -> None:
    for spec, env in (({"webhook": "${HOOK_URL}"}, {"HOOK_URL": "file:///etc/passwd"}),
                      ({"slack": "${SLACK_URL}"}, {"SLACK_URL": "hooks.slack.com/T0/S3CRET"})):
        with pytest.raises(DeliveryError) as refused:
            send("ops", channel(**spec), EVENT, env)
        assert str(refused.value) == "notify.ops: expected a URL starting http:// or https://"
    with pytest.raises(DeliveryError) as refused:
        send("mail", channel(email={"to": "a@example.com", "smtp": "${SMTP_URL}"}), EVENT,
             {"SMTP_URL": "smtp://user:S3CRET@"})
    assert str(refused.value) == "notify.mail.email.smtp: no host after smtp://"


def test_mail_goes_through_smtp(trusted_tls: ssl.SSLContext) -> None:
    with smtp_receiver(trusted_tls) as smtp:
        send("oncall", channel(email={"to": ["oncall@example.com", "lead@example.com"],
                                      "smtp": f"smtp://127.0.0.1:{smtp.port}",
                                      "from": "cron@example.com"}), EVENT)
    (mail,) = smtp.messages
    assert smtp.envelopes == [("cron@example.com", ["oncall@example.com", "lead@example.com"])]
    assert mail["Subject"] == "[cronsvc] nightly-backup: failed for good (no attempts left)"
    text = mail.get_payload()
    assert "fire: nightly-backup@1795500000000 (attempt 3)" in text and "disk full" in text


def test_a_command_gets_the_event_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "event.json"
    script = f"import sys; open({str(out)!r}, 'wb').write(sys.stdin.buffer.read())"
    said = send("local", channel(command=[sys.executable, "-c", script]), EVENT)
    assert said.endswith("took it") and json.loads(out.read_bytes())["id"] == "ev-1"
    with pytest.raises(DeliveryError, match="exited 3"):
        send("local", channel(command=[sys.executable, "-c", "raise SystemExit(3)"]), EVENT)


def test_the_job_file_names_a_wrong_channel_by_line(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text("notify:\n  ops:\n    webhook: http://a\n    slack: http://b\n"
                    "  mail:\n    email: {smtp: 'smtp://h:25'}\n"
                    "jobs:\n  a: {cron: '* * * * *', command: ['true']}\n")
    with pytest.raises(ConfigError) as bad:
        load_config(path)
    assert bad.value.problems == [
        f"{path}:2: notify.ops: set exactly one of webhook, slack, teams, email, command "
        "(got webhook and slack)",
        f"{path}:6: notify.mail.email.to: missing (required)"]


def test_cronsvc_notify_test_sends_a_sample(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    with http_receiver() as hook:
        path.write_text(yaml.safe_dump({
            "notify": {"ops": {"webhook": hook.url, "secret": "${HOOK_SECRET}"}},
            "jobs": {"a": {"cron": "* * * * *", "command": ["true"]}}}))
        runner = CliRunner()
        env = {"HOOK_SECRET": SECRET}
        said = ok(runner.invoke(main, ["notify", "test", "ops", "--config", str(path)], env=env))
        assert said.strip() == f"notify.ops: {hook.url} answered 200"
        assert json.loads(hook.received[0].body)["event"] == "test"
        assert "did you mean 'ops'" in error_line(runner.invoke(
            main, ["notify", "test", "opz", "--config", str(path)], env=env), 1)
        hook.statuses = [503]
        assert error_line(runner.invoke(main, ["notify", "test", "ops", "--config", str(path)],
                                        env=env), 1) == f"notify.ops: {hook.url} answered 503"


def test_a_job_or_the_fleet_naming_an_undeclared_channel_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text("notify:\n  ops: {webhook: http://a}\n"
                    "notifier:\n  fleet: [pager]\n"
                    "jobs:\n"
                    "  a:\n    cron: '* * * * *'\n    command: ['true']\n    notify: [opz]\n"
                    "  b:\n    cron: '* * * * *'\n    command: ['true']\n"
                    "    notify_on: [dead, exploded]\n    pause_after_failures: 0\n")
    with pytest.raises(ConfigError) as bad:
        load_config(path)
    assert bad.value.problems == [
        f"{path}:4: notifier.fleet: unknown channel 'pager' (declared under notify: ops)",
        f"{path}:9: jobs.a.notify: unknown channel 'opz' (declared under notify: ops)",
        f"{path}:13: jobs.b.notify_on[1]: 'exploded': input should be 'failed', 'dead', "
        "'missed', 'skipped', 'recovered' or 'lease_lost'",
        f"{path}:14: jobs.b.pause_after_failures: 0: input should be greater than or equal to 1"]


def uncommented(text: str) -> str:
    """The example file with its notification blocks switched on: the commented lines
    from ``# notify:`` and from ``# flaky-export:`` on, up to the next uncommented line
    (comments inside a block, ``#   #``, stay comments)."""
    out, on = [], False
    for line in text.splitlines():
        if line.startswith(("# notify:", "  # flaky-export:")):
            on = True
        elif not line.lstrip().startswith("#"):
            on = False
        if on and not line.lstrip().startswith(("# #", "#   #")):
            line = line.replace("# ", "", 1)
        out.append(line)
    return "\n".join(out) + "\n"


def test_the_example_file_s_failing_job_and_its_channel_are_valid_once_uncommented(
        tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(uncommented((ROOT / "schedules.yaml").read_text()))
    config = load_config(path)
    job = config.jobs["flaky-export"]
    assert job.notify == ("log",) and job.pause_after_failures == 10
    assert config.notifier.fleet == ("log",) and config.notify["log"].kind == "command"
