"""Importers: another scheduler's definitions turned into a job file.

One module per source: :mod:`~cronsvc.importers.beat` (a Celery app's ``beat_schedule``),
:mod:`~cronsvc.importers.crontab` (a user or system crontab) and
:mod:`~cronsvc.importers.cronjob` (Kubernetes CronJob manifests). Each is a function from
the source to an :class:`~cronsvc.importers.imported.Imported`: the job file as a plain
document (what ``yaml.safe_dump`` writes) and the notes a person must read, each naming
its place (``FILE:LINE`` or an entry's name); a note that refuses an entry says so.

Why a layer of its own, above ``config`` and ``schedule``: an importer checks what it
writes with the job file's own rules (names, zones, cron fields), so the file it makes
reads the same way in every planner. It knows neither Redis nor the CLI: ``cronsvc
import`` (:mod:`cronsvc.cli.imports`) reads the files and prints.
"""
