"""A Celery app as a project writes one, for ``cronsvc import celery``: a beat schedule
with a crontab, a timedelta, a number of seconds, a queue and options, and two entries
cronsvc refuses (a solar schedule and a relative interval). Nothing here connects to
the broker: the import only reads the configuration."""

from __future__ import annotations

from datetime import timedelta

from celery import Celery
from celery.exceptions import ImproperlyConfigured
from celery.schedules import crontab, schedule, solar

app = Celery("proj", broker="redis://127.0.0.1:1/0")
app.conf.timezone = "Europe/Berlin"


def _solar(event: str, lat: float, lon: float) -> solar:
    """A solar schedule; celery[solar] (ephem) is not installed here, so without it the
    object is made with the three fields the importer reads, as a pickle would hold."""
    try:
        return solar(event, lat, lon)
    except ImproperlyConfigured:
        made = solar.__new__(solar)
        made.event, made.lat, made.lon = event, lat, lon
        return made


app.conf.beat_schedule = {
    "send digest": {
        "task": "proj.tasks.digest",
        "schedule": crontab(minute=0, hour=9, day_of_week="mon-fri"),
        "args": (1,),
        "kwargs": {"a": 2},
        "options": {"queue": "reports", "priority": 5},
    },
    "refresh-cache": {"task": "proj.tasks.refresh", "schedule": timedelta(minutes=5)},
    "ping": {"task": "proj.tasks.ping", "schedule": 30.0, "options": {"expires": 25}},
    "night-shift": {"task": "proj.tasks.night",
                    "schedule": crontab(minute="*/30", hour="22-2")},
    "lights-on": {"task": "proj.tasks.lights", "schedule": _solar("sunset", 52.52, 13.405)},
    "rounded": {"task": "proj.tasks.rounded",
                "schedule": schedule(timedelta(hours=1), relative=True)},
}
