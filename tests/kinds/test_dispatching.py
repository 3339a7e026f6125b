"""What every dispatching kind shares: its URLs shown without their passwords, and the
warnings of `cronsvc validate`."""

from __future__ import annotations

from pathlib import Path

from cronsvc.config.check import check_file, warnings
from cronsvc.config.models import load_config
from cronsvc.kinds import KINDS

FILE = """\
jobs:
  digest:
    cron: "0 2 * * *"
    celery: {task: proj.tasks.digest, broker: "redis://:hunter2@celery-redis:6379/0"}
  safe:
    cron: "0 2 * * *"
    timeout: 10m
    celery: {task: proj.tasks.digest, broker: "redis://:${CELERY_PASSWORD}@celery:6379/0"}
"""


def test_a_broker_url_is_shown_without_its_password(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(FILE)
    job = load_config(path).jobs["digest"]
    shown = KINDS["celery"].shown(job)
    assert shown == {"celery": {"task": "proj.tasks.digest",
                                "broker": "redis://:***@celery-redis:6379/0"}}
    assert "hunter2" not in repr(shown)


def test_validate_warns_of_a_written_password_and_of_no_timeout(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(FILE)
    found = warnings(check_file(str(path)), 0)
    assert any("jobs.digest.celery.broker: a password written in the file" in w for w in found)
    assert any("jobs.digest.celery: no timeout" in w for w in found)
    assert not any("jobs.safe" in w for w in found)
