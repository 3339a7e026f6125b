"""The ``notify:`` section as `cronsvc validate` reads it: what it refuses, located, and
what it warns of."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from cronsvc.cli.main import main

JOB = "jobs:\n  a: {cron: '@daily', command: ['true']}\n"


def validate(path: Path, text: str) -> tuple[int, list[str]]:
    path.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(path)])
    return result.exit_code, result.stderr.splitlines()


def test_a_channel_mailing_without_tls_says_so_and_is_warned_of(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    code, lines = validate(path, "notify:\n  relay:\n    email:\n      to: ops@example.com\n"
                                 "      smtp: smtp://127.0.0.1:25\n"
                                 "      insecure_plaintext: true\n" + JOB)
    assert code == 0
    assert lines == [f"{path}:6: warning: notify.relay.email.insecure_plaintext: mail and any "
                     "SMTP password go unencrypted (no TLS): only for a relay on this host or "
                     "a network you trust"]
    code, lines = validate(path, "notify:\n  relay:\n    email:\n      to: ops@example.com\n"
                                 "      smtp: smtps://mail.example.com\n"
                                 "      insecure_plaintext: true\n" + JOB)
    assert code == 1
    assert lines == [f"{path}:3: notify.relay.email: insecure_plaintext: smtps:// is TLS from "
                     "the start; use smtp:// for a relay without TLS"]


def test_urls_that_are_not_http_or_smtp_are_refused_where_they_are(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    code, lines = validate(path, """\
notify:
  ops:
    webhook: file:///etc/passwd
  chat:
    slack: hooks.slack.com/services/T0/B0/S3CRET-PATH
  teams:
    teams: "https:///webhookb2/S3CRET-PATH"
  mail:
    email: {to: ops@example.com, smtp: "http://mail.example.com"}
  later:
    webhook: ${HOOK_URL}
  host-later:
    webhook: https://${HOOK_HOST}:${HOOK_PORT}/cron
jobs:
  a:
    cron: '@daily'
    command: ['true']
    ping: gopher://hc.example.com/S3CRET-PATH
  b:
    cron: '@daily'
    command: ['true']
    ping: {start: 'https://hc.example.com/b/start', fail: 'file:///tmp/S3CRET-PATH'}
""")
    assert code == 1
    assert lines == [
        f"{path}:3: notify.ops.webhook: expected a URL starting http:// or https://",
        f"{path}:5: notify.chat.slack: expected a URL starting http:// or https://",
        f"{path}:7: notify.teams.teams: no host after https://",
        f"{path}:9: notify.mail.email.smtp: expected a URL starting smtp:// or smtps://",
        f"{path}:18: jobs.a.ping: expected a URL starting http:// or https://",
        f"{path}:22: jobs.b.ping.fail: expected a URL starting http:// or https://",
    ]
