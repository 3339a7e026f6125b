"""`cronsvc import`: the file written passes `cronsvc validate`, the fires and notes go
to stderr, and a refusal writes nothing (exit 1) unless --skip-unmappable."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.cli.next import render
from cronsvc.clock import now_dt
from cronsvc.schedule.expand import Spec
from tests.support.cli import error_line, ok
from tests.support.paths import DATA

CRONTAB = DATA / "imports" / "crontab"  # the example of docs/moving-in.md


def _import(*args: str) -> Result:
    return CliRunner().invoke(main, ["import", *args])


def _validated(path: Path) -> str:
    return ok(CliRunner().invoke(main, ["validate", str(path)]))


def test_a_crontab_import_refuses_then_writes_a_file_that_validates(tmp_path: Path) -> None:
    refused = _import("crontab", str(CRONTAB))
    assert refused.exit_code == 1 and refused.stdout == ""
    assert f"{CRONTAB}:11: refused: @reboot" in refused.stderr
    assert "nothing written: 1 entry refused" in refused.stderr

    out = tmp_path / "schedules.yaml"
    written = _import("crontab", str(CRONTAB), "--skip-unmappable", "-o", str(out))
    assert written.exit_code == 0, written.stderr
    assert f"{CRONTAB}:11: refused: @reboot" in written.stderr
    assert f"wrote 4 jobs to {out}, 1 left out" in written.stderr
    assert _validated(out) == f"{out}: 4 jobs OK\n"
    text = out.read_text()
    assert 'cron: "30 2 * * 1-5"' in text and "smtp: ${SMTP_URL}" in text
    assert "command: /srv/app/bin/invoice-run --month $(date +%Y-%m)\n" in text


def test_the_fires_shown_are_those_of_cronsvc_next(tmp_path: Path) -> None:
    tab = tmp_path / "crontab"
    tab.write_text("CRON_TZ=Europe/Berlin\n30 2 * * 1-5 /usr/local/bin/backup.sh\n")
    result = _import("crontab", str(tab))
    expected = render(Spec(cron="30 2 * * 1-5", timezone="Europe/Berlin", name="backup"),
                      now_dt(), 3, False).splitlines()
    lines = result.stderr.splitlines()
    assert lines[0].startswith("backup: 30 2 * * 1-5 (Europe/Berlin), after ")
    # The header holds the time of asking; the three fires are the same.
    assert lines[1:4] == expected[1:4]
    assert ok(result).startswith("jobs:\n  backup:\n")


def test_cronjob_manifests_import_to_a_file_that_validates(tmp_path: Path) -> None:
    manifests = str(DATA / "imports" / "cronjobs.yaml")
    assert _import("cronjob", manifests).exit_code == 1
    out = tmp_path / "schedules.yaml"
    written = _import("cronjob", manifests, "--skip-unmappable", "-o", str(out))
    assert written.exit_code == 0, written.stderr
    assert "DATABASE_URL comes from secretKeyRef" in written.stderr
    assert _validated(out) == f"{out}: 2 jobs OK\n"
    assert "    paused: true\n" in out.read_text()


def test_a_celery_app_imports_as_celery_jobs() -> None:
    result = _import("celery", "--app", "tests.support.beat_app:app")
    assert result.exit_code == 1 and result.stdout == ""
    assert "beat_schedule['lights-on']: refused: schedule: solar" in result.stderr
    written = _import("celery", "--app", "tests.support.beat_app", "--skip-unmappable")
    assert ok(written).startswith(
        "defaults:\n"
        "  timeout: 1h\n"
        "jobs:\n"
        "  send-digest:\n"
        '    cron: "0 9 * * mon-fri"\n'
        "    timezone: Europe/Berlin\n"
        "    celery: {task: proj.tasks.digest, app: 'tests.support.beat_app:app', "
        "queue: reports, args: [1], kwargs: {a: 2}, options: {priority: 5}}\n"
        "  refresh-cache:\n"
        "    every: 5m\n")
    assert "send-digest: 0 9 * * mon-fri (Europe/Berlin), after" in written.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["celery", "--app", "tests.support.no_such_module:app"],
     "--app tests.support.no_such_module:app: cannot import tests.support.no_such_module: "
     "ModuleNotFoundError: No module named 'tests.support.no_such_module'"),
    (["celery", "--app", "tests.support.paths:app"],
     "--app tests.support.paths:app: tests.support.paths has no Celery app named app"),
    (["crontab", str(DATA / "imports" / "cronjobs.yaml"), "--timezone", "Mars/Olympus"],
     "unknown time zone 'Mars/Olympus'"),
])
def test_bad_arguments_are_one_line(args: list[str], message: str) -> None:
    assert message in error_line(_import(*args), 1)
