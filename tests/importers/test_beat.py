"""A real Celery app's beat schedule, read into jobs of kind celery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from celery import Celery
from celery.schedules import crontab

from cronsvc.importers.beat import beat_jobs
from cronsvc.importers.celery_cron import celery_cron
from cronsvc.schedule.expand import Spec, occurrences
from tests.support.beat_app import app as project_app


def _app(**conf: object) -> Celery:
    app = Celery("t", broker="redis://127.0.0.1:1/0")
    app.conf.update(conf)
    return app


def test_the_project_app_maps_crontab_timedelta_and_seconds() -> None:
    result = beat_jobs(project_app, "proj.celery:app")
    assert result.jobs == {
        "send-digest": {
            "cron": "0 9 * * mon-fri", "timezone": "Europe/Berlin",
            "celery": {"task": "proj.tasks.digest", "app": "proj.celery:app", "queue": "reports",
                       "args": [1], "kwargs": {"a": 2}, "options": {"priority": 5}}},
        "refresh-cache": {"every": "5m",
                          "celery": {"task": "proj.tasks.refresh", "app": "proj.celery:app"}},
        "ping": {"every": "30s", "celery": {"task": "proj.tasks.ping", "app": "proj.celery:app",
                                            "options": {"expires": 25}}},
        "night-shift": {"cron": "*/30 22-2 * * *", "timezone": "Europe/Berlin",
                        "celery": {"task": "proj.tasks.night", "app": "proj.celery:app"}},
    }
    refused = {note.place: note.message for note in result.refused}
    assert set(refused) == {"beat_schedule['lights-on']", "beat_schedule['rounded']"}
    assert "solar (sunset at 52.52, 13.405)" in refused["beat_schedule['lights-on']"]
    assert refused["beat_schedule['rounded']"].startswith("relative=True")
    assert "written as job 'send-digest'" in str(result.notes[0])


def test_utc_is_left_out_and_a_relative_entry_is_refused() -> None:
    app = _app(timezone="UTC", beat_schedule={
        "a": {"task": "t.a", "schedule": crontab(minute=5)},
        "b": {"task": "t.b", "schedule": 60, "relative": True}})
    result = beat_jobs(app)
    assert result.jobs == {"a": {"cron": "5 * * * *", "celery": {"task": "t.a"}}}
    assert [n.place for n in result.refused] == ["beat_schedule['b']"]


def test_local_time_without_a_zone_is_refused_for_crontabs_only() -> None:
    app = _app(enable_utc=False, timezone=None, beat_schedule={
        "a": {"task": "t.a", "schedule": crontab(minute=5)},
        "b": {"task": "t.b", "schedule": timedelta(hours=1)}})
    result = beat_jobs(app)
    assert list(result.jobs) == ["b"]
    assert "enable_utc is False" in result.refused[0].message


@pytest.mark.parametrize(("entry", "expected"), [
    ({"task": "t", "schedule": crontab(day_of_month="1-7", day_of_week=1)},
     "day_of_month and day_of_week are both set"),
    ({"task": "t", "schedule": 60, "args": [datetime(2026, 1, 1)]}, "args: not JSON"),
    ({"task": "t", "schedule": 60, "options": {"queue": object()}}, "options: not JSON"),
    ({"task": "t", "schedule": 0.5}, "cronsvc intervals are 1s or more"),
    ({"task": "t", "schedule": "daily"}, "schedule of type str"),
    ({"task": "t", "schedule": 60, "when": 1}, "unknown key when"),
    ({"schedule": 60}, "expected a dict with task"),
])
def test_what_cannot_fire_the_same_is_refused(entry: dict[str, object], expected: str) -> None:
    result = beat_jobs(_app(beat_schedule={"x": entry}))
    assert result.jobs == {}
    assert expected in result.refused[0].message, result.refused


def test_the_starting_deadline_of_crontabs_is_kept() -> None:
    app = _app(beat_cron_starting_deadline=120, beat_schedule={
        "a": {"task": "t.a", "schedule": crontab(minute=0)},
        "b": {"task": "t.b", "schedule": 600}})
    jobs = beat_jobs(app).jobs
    assert jobs["a"]["starting_deadline"] == "2m" and "starting_deadline" not in jobs["b"]


@pytest.mark.parametrize("tab", [
    crontab(minute=0, hour=9, day_of_week="mon-fri"),
    crontab(minute="*/15", hour="8-17"),
    crontab(minute=[5, 35], hour="22-2"),
    crontab(minute=0, hour=0, day_of_month="2-30/2"),
    crontab(minute=30, hour=6, day_of_week="*/2", day_of_month="1-7"),
    crontab(minute=0, hour=12, month_of_year="*/3", day_of_month=1),
    crontab(minute=59, hour=23, day_of_week="sun,sat"),
    crontab(minute="1-59/7", hour={3, 4, 5}),
])
def test_the_cron_fires_on_the_minutes_celery_matches(tab: crontab) -> None:
    """Every minute of half a year, asked of Celery's own expanded sets (day of week 0 =
    Sunday), against the fires cronsvc expands from the expression written."""
    cron, problem = celery_cron(tab)
    assert cron is not None, problem
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=190)
    fires = {t for t in occurrences(Spec(cron=cron), start - timedelta(minutes=1), end)
             if t < end}
    minute, wanted = start, set()
    while minute < end:
        if (minute.minute in tab.minute and minute.hour in tab.hour
                and minute.isoweekday() % 7 in tab.day_of_week
                and minute.day in tab.day_of_month and minute.month in tab.month_of_year):
            wanted.add(minute)
        minute += timedelta(minutes=1)
    assert fires == wanted
