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
