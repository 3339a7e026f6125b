"""Kubernetes CronJob manifests as ``command`` jobs: the first container's argv, no shell.

``spec.schedule`` becomes ``cron`` (the ``@hourly`` kind of macro as it is, ``@every 90m``
as ``every``, a ``CRON_TZ=``/``TZ=`` prefix as the zone), ``spec.timeZone`` the zone,
``concurrencyPolicy`` ``overlap``, ``startingDeadlineSeconds`` ``starting_deadline``,
``suspend: true`` ``paused: true``, the Job's ``backoffLimit`` ``retries`` and its
``activeDeadlineSeconds`` ``timeout``; literal ``env`` values are carried over. What a
pod is beyond its argv (the image, volumes, resources, secrets) is not: the notes say
what to provide on the workers instead, and never carry a secret's value.

Refused: a container without ``command`` (its argv is the image's entrypoint, which
the manifest does not show), a Job of several pods per run (``parallelism`` or
``completions`` above 1), and any schedule cronsvc does not read.
"""

from __future__ import annotations

import re
from typing import Any

from cronsvc.config.yamlsource import KeyPath, Located, YamlSyntaxError, load_all
from cronsvc.durations import parse_duration
from cronsvc.errors import ScheduleError
from cronsvc.importers.imported import Imported, Names, Quoted, duration, hoist_defaults
from cronsvc.schedule.expand import zone
from cronsvc.schedule.fields import validate_cron

OVERLAP = {"Allow": "allow", "Forbid": "forbid", "Replace": "replace"}
API_VERSIONS = ("batch/v1", "batch/v1beta1")
_TZ_PREFIX = re.compile(r"(?:CRON_TZ|TZ)=(\S+)\s+(.*)")
#: The pod's settings cronsvc does not carry, named when a manifest sets them.
_POD_ONLY = ("volumes", "serviceAccountName", "nodeSelector", "affinity", "tolerations",
             "securityContext", "imagePullSecrets", "initContainers")
_CONTAINER_ONLY = ("resources", "volumeMounts", "envFrom", "ports", "securityContext")


def cronjob_jobs(text: str, source: str) -> Imported:
    """The job file for the manifests in ``text`` read from ``source`` (which names them
    in notes, ``FILE:LINE``). Documents of another kind are noted and left out."""
    out = Imported()
    try:
        documents = load_all(text)
    except YamlSyntaxError as exc:
        out.refuse(f"{source}:{exc.line}" if exc.line else source, f"YAML: {exc}")
        return out
    names = Names()
    for doc in documents:
        _document(out, names, _Place(source, doc))
    hoist_defaults(out, ("timezone",))
    return out


class _Place:
    """One manifest and how to name a place in it: ``FILE:LINE: NAME: spec.schedule``."""

    def __init__(self, source: str, doc: Located) -> None:
        self.source, self.doc = source, doc
        self.data: dict[Any, Any] = doc.data if isinstance(doc.data, dict) else {}
        self.name = str(self.get("metadata", "name") or "")

    def get(self, *path: str | int) -> Any:
        value: Any = self.data
        for key in path:
            if isinstance(value, dict):
                value = value.get(key)
            elif isinstance(value, list) and isinstance(key, int) and key < len(value):
                value = value[key]
            else:
                return None
        return value

    def at(self, *path: str | int) -> str:
        line = self.doc.line(tuple(path)) or self.doc.line(())
        dotted = ".".join(f"[{p}]" if isinstance(p, int) else p for p in path)
        where = f"{self.source}:{line}" if line else self.source
        return f"{where}: {self.name or 'CronJob'}" + (f": {dotted}".replace(".[", "[")
                                                        if dotted else "")


_POD = ("spec", "jobTemplate", "spec", "template", "spec")
_JOB = ("spec", "jobTemplate", "spec")


def _document(out: Imported, names: Names, m: _Place) -> None:
    if m.doc.data is None:
        return
    kind = m.get("kind")
    if kind != "CronJob":
        out.note(m.at("kind"), f"a {kind or 'document without kind'}, not a CronJob: left out")
        return
    if m.get("apiVersion") not in API_VERSIONS:
        out.refuse(m.at("apiVersion"), f"{m.get('apiVersion')!r}: expected one of "
                                       f"{', '.join(API_VERSIONS)}")
        return
    job = _schedule(out, m)
    command = _command(out, m) if job is not None else None
    if job is None or command is None or not _one_pod(out, m):
        return
    job.update(command=command)
    _policy(out, m, job)
    name = names.make(m.name, "cronjob")
    if name != m.name:
        out.note(m.at("metadata", "name"), f"written as job {name!r}")
    namespace = m.get("metadata", "namespace")
    job["description"] = f"CronJob {namespace}/{m.name}" if namespace else f"CronJob {m.name}"
    out.jobs[name] = job
    _not_carried(out, m)


def _schedule(out: Imported, m: _Place) -> dict[str, Any] | None:
    """``cron`` or ``every``, and ``timezone``; None after refusing the manifest."""
    schedule = m.get("spec", "schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        out.refuse(m.at("spec", "schedule"), "missing: a CronJob has a schedule")
        return None
    text, tz = schedule.strip(), m.get("spec", "timeZone")
    prefixed = _TZ_PREFIX.fullmatch(text)
    if prefixed:
        if tz and tz != prefixed[1]:
            out.refuse(m.at("spec", "schedule"), f"{text!r} names {prefixed[1]}, spec.timeZone "
                                                 f"{tz}: which one did it run in?")
            return None
        tz, text = prefixed[1], prefixed[2].strip()
    job: dict[str, Any] = {}
    try:
        if text.lower().startswith("@every "):
            job["every"] = duration(parse_duration(text[7:]))
        else:
            validate_cron(text)
            job["cron"] = Quoted(text)
        if tz:
            zone(str(tz))
            job["timezone"] = str(tz)
    except (ScheduleError, ValueError) as exc:
        field = "spec.timeZone" if tz and "zone" in str(exc) else "spec.schedule"
        out.refuse(m.at(*field.split(".")), f"{exc}")
        return None
    if "every" in job:
        out.note(m.at("spec", "schedule"), f"{text}: the controller counted from its own "
                 "start; cronsvc fires at whole multiples from 1970-01-01 UTC (see anchor)")
    return job


def _command(out: Imported, m: _Place) -> list[str] | None:
    """The first container's command and args, or None after refusing the manifest."""
    containers = m.get(*_POD, "containers")
    if not isinstance(containers, list) or not containers:
        out.refuse(m.at(*_POD), "no containers")
        return None
    first = containers[0] if isinstance(containers[0], dict) else {}
    where = (*_POD, "containers", 0)
    command, args = first.get("command"), first.get("args") or []
    if not command:
        out.refuse(m.at(*where), f"no command: the pod runs the entrypoint of image "
                                 f"{first.get('image')}, which the manifest does not show; "
                                 "write command: (and args:) in the manifest and import again")
        return None
    if not isinstance(command, list) or not isinstance(args, list):
        out.refuse(m.at(*where), "command and args: expected lists of words")
        return None
    if len(containers) > 1:
        others = ", ".join(str(c.get("name")) for c in containers[1:] if isinstance(c, dict))
        out.note(m.at(*_POD, "containers", 1), f"only the first container runs; left out: "
                                               f"{others}")
    if any("$(" in str(word) for word in [*command, *args]):
        out.note(m.at(*where), "Kubernetes replaced $(VAR) in command and args; cronsvc runs "
                               "them as written, without a shell: use shell: true and ${VAR}")
    out.note(m.at(*where, "image"), f"image {first.get('image')} is not carried over: the "
                                    f"workers run {command[0]} from their own PATH")
    return [str(word) for word in [*command, *args]]


def _one_pod(out: Imported, m: _Place) -> bool:
    for key in ("parallelism", "completions"):
        value = m.get(*_JOB, key)
        if isinstance(value, int) and value > 1:
            out.refuse(m.at(*_JOB, key), f"{value}: each run is {value} pods; a cronsvc fire "
                                         "runs once (write one job per pod)")
            return False
    return True


def _policy(out: Imported, m: _Place, job: dict[str, Any]) -> None:
    """Overlap, deadlines, pause, retries, timeout, cwd and env, in the job's key order."""
    first = _POD + ("containers", 0)
    env, cwd = _env(out, m, first), m.get(*first, "workingDir")
    if env:
        job["env"] = env
    if cwd:
        job["cwd"] = str(cwd)
    deadline = m.get(*_JOB, "activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline > 0:
        job["timeout"] = duration(deadline)
    backoff = m.get(*_JOB, "backoffLimit")
    retries = backoff if isinstance(backoff, int) and backoff >= 0 else 6
    if retries:
        job["retries"] = retries
    if not isinstance(backoff, int):
        out.note(m.at(*_JOB), "no backoffLimit: Kubernetes retries a failed Job 6 times, "
                              "so retries: 6 (backoff from 10s, doubling)")
    policy = m.get("spec", "concurrencyPolicy") or "Allow"
    if policy not in OVERLAP:
        out.note(m.at("spec", "concurrencyPolicy"), f"{policy!r}: unknown, left at allow")
    elif policy != "Allow":
        job["overlap"] = OVERLAP[policy]
    starting = m.get("spec", "startingDeadlineSeconds")
    if isinstance(starting, int | float) and starting > 0:
        job["starting_deadline"] = duration(float(starting))
    if m.get("spec", "suspend") is True:
        job["paused"] = True
    for key in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        if m.get("spec", key) is not None:
            out.note(m.at("spec", key), "not carried over: a worker keeps the last "
                                        "worker.history runs of each job (100 by default)")


def _env(out: Imported, m: _Place, container: KeyPath) -> dict[str, str]:
    """The literal variables; those from a secret or another source are named only."""
    env: dict[str, str] = {}
    for i, var in enumerate(m.get(*container, "env") or []):
        if not isinstance(var, dict) or "name" not in var:
            continue
        if "valueFrom" in var:
            source = var["valueFrom"] if isinstance(var["valueFrom"], dict) else {}
            ref = next(iter(source), "valueFrom")
            held = source.get(ref)
            whose = " ".join(f"{k}={v}" for k, v in held.items()
                             if k in ("name", "key")) if isinstance(held, dict) else ""
            out.note(m.at(*container, "env", i), f"{var['name']} comes from {ref} "
                     f"({whose}): not written; set it in the workers' environment")
        else:
            env[str(var["name"])] = str(var.get("value", ""))
    return env


def _not_carried(out: Imported, m: _Place) -> None:
    pod = [key for key in _POD_ONLY if m.get(*_POD, key)]
    container = [key for key in _CONTAINER_ONLY if m.get(*_POD, "containers", 0, key)]
    if pod or container:
        out.note(m.at(*_POD), f"not carried over: {', '.join(pod + container)} (what the "
                              "command needs must be on the workers)")
