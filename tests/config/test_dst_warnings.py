"""``cronsvc validate`` warns of a fixed-time job whose time does not exist (it runs at the
transition) or happens twice (it runs in the first pass) on a DST night of the next 12
months; ``--strict`` makes that an error, ``--json`` prints it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.clock import dt_to_ms
from cronsvc.config.check import dst_notes
from cronsvc.config.models import Job

NOW = dt_to_ms(datetime(2026, 11, 24, tzinfo=UTC))


def job(cron: str, zone: str) -> Job:
    return Job.model_validate({"name": "j", "cron": cron, "timezone": zone,
                               "command": ["true"]})


@pytest.mark.parametrize(("cron", "zone", "notes"), [
    ("30 2 * * *", "Europe/Berlin", [
        "on 2027-03-28 02:30 does not exist in Europe/Berlin; runs at 03:00",
        "on 2027-10-31 02:30 happens twice in Europe/Berlin; runs once, at the first (CEST)"]),
    ("30 2 * * *", "America/New_York", [  # its fall-back hour is 01:00-02:00
        "on 2027-03-14 02:30 does not exist in America/New_York; runs at 03:00"]),
    ("30 1 * * *", "America/New_York", [
        "on 2027-11-07 01:30 happens twice in America/New_York; runs once, at the first (EDT)"]),
    ("0 2 * * 0", "Australia/Sydney", [
        "on 2027-04-04 02:00 happens twice in Australia/Sydney; runs once, at the first "
        "(AEDT)",
        "on 2027-10-03 02:00 does not exist in Australia/Sydney; runs at 03:00"]),
    ("30 2 * * *", "UTC", []),
    ("30 * * * *", "Europe/Berlin", []),  # not fixed-time: it follows the wall clock
    ("30 2 1 * *", "Europe/Berlin", []),  # its days miss both DST nights
])
def test_a_fixed_time_job_on_a_dst_night_is_noted(cron: str, zone: str,
                                                  notes: list[str]) -> None:
    assert dst_notes(job(cron, zone), NOW) == notes


def test_validate_warns_and_strict_or_json_say_so(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text("jobs:\n  backup:\n    cron: '30 2 * * *'\n    timezone: Europe/Berlin\n"
                    "    command: [backup]\n")
    runner = CliRunner()
    plain = runner.invoke(main, ["validate", str(path)])
    assert plain.exit_code == 0 and plain.stdout == f"{path}: 1 job OK (2 warnings)\n"
    gap = re.compile(rf"^{re.escape(str(path))}:3: warning: jobs\.backup\.cron: on "
                     r"\d{4}-\d\d-\d\d 02:30 does not exist in Europe/Berlin; runs at 03:00$")
    assert any(gap.match(line) for line in plain.stderr.splitlines())
    strict = runner.invoke(main, ["validate", str(path), "--strict"])
    assert strict.exit_code == 1 and ": warning:" not in strict.stderr
    assert len(strict.stderr.splitlines()) == 2 and "Traceback" not in strict.output
    as_json = runner.invoke(main, ["validate", str(path), "--json"])
    said = json.loads(as_json.stdout)
    assert as_json.exit_code == 0 and said["jobs"] == 1 and said["errors"] == []
    assert len(said["warnings"]) == 2
    both = runner.invoke(main, ["validate", str(path), "--json", "--strict"])
    assert both.exit_code == 1 and len(json.loads(both.stdout)["errors"]) == 2
