"""A crontab as ``command`` jobs, one per line, run by a shell as cron runs them.

A user crontab has five time fields then the command; a system one (``/etc/crontab``,
``/etc/cron.d/*``) has the user to run as in between. Settings apply to the lines after
them, as in cronie: ``CRON_TZ=`` (and ``TZ=``, which is also put in the command's
environment) becomes ``timezone``, ``MAILTO=`` an email channel under ``notify:``,
``SHELL=`` the shell the command runs in, and any other ``VAR=VALUE`` the job's ``env``.

Refused, with the line: ``@reboot`` (cronsvc fires on a schedule, never at boot), a
command with an unescaped ``%`` (crontab sends what follows as standard input, and a
cronsvc command has none), and any line cron itself would not read.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from cronsvc.errors import ScheduleError
from cronsvc.importers.imported import Imported, Names, Quoted, hoist_defaults
from cronsvc.schedule.expand import zone
from cronsvc.schedule.fields import ALIASES, validate_cron

_SETTING = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")
_SH = ("/bin/sh", "sh")
#: Words that run another command, and how many arguments of their own come first.
_WRAPPERS = {"sudo": 0, "nice": 0, "ionice": 0, "env": 0, "timeout": 1, "flock": 1,
             "chronic": 0, "exec": 0, "nohup": 0, "time": 0, "setlock": 1}
#: A script's extension, left out of the job's name.
_SCRIPT = re.compile(r"\.(py|sh|bash|pl|rb|php|js)$")
#: Programs that run a script: a job is named after the script.
_RUNNERS = frozenset({"sh", "bash", "zsh", "python", "python3", "perl", "ruby", "php", "node",
                      "run-parts", "uv", "poetry", "pipenv"})


def is_system_crontab(path: str) -> bool:
    """Whether the file at ``path`` has the user column: ``/etc/crontab`` and the files of
    a ``cron.d`` folder do."""
    p = PurePath(path)
    return p.as_posix() == "/etc/crontab" or p.parent.name == "cron.d"


@dataclass
class _Settings:
    """What the lines read so far set, for the lines after them."""

    env: dict[str, str] = field(default_factory=dict)
    timezone: str | None = None
    zone_problem: str | None = None
    shell: str = "/bin/sh"
    mailto: str | None = None  # the channel's name
    mail_from: str | None = None


def crontab_jobs(text: str, source: str, *, system: bool | None = None,
                 timezone: str | None = None) -> Imported:
    """The job file for the crontab ``text`` read from ``source`` (which names it in
    notes). ``system``: whether it has the user column (default: from its path);
    ``timezone``: the zone cron ran in, for the lines before any ``CRON_TZ=``."""
    out = Imported()
    system = is_system_crontab(source) if system is None else system
    state = _Settings(timezone=timezone)
    names = Names()
    users: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        place = f"{source}:{number}"
        if not line or line.startswith("#"):
            continue
        setting = _SETTING.fullmatch(line)
        if setting:
            _set(out, state, place, setting[1], _unquote(setting[2].strip()))
            continue
        found = _job(out, state, place, line, system)
        if found is not None:
            job, command, user = found
            users.update([user] if user else [])
            out.jobs[names.make(command_name(command), f"line-{number}")] = job
    _closing_notes(out, source, state, users, timezone, any(out.jobs))
    hoist_defaults(out, ("timezone", "env", "notify"))
    return out


def _set(out: Imported, state: _Settings, place: str, name: str, value: str) -> None:
    if name in ("CRON_TZ", "TZ"):
        try:
            zone(value)
            state.timezone, state.zone_problem = value, None
        except ScheduleError as exc:
            state.zone_problem = f"{name} at {place}: {exc}"
            out.refuse(place, f"{name}={value}: {exc}")
        if name == "CRON_TZ":
            return
    if name == "MAILTO":
        state.mailto = _channel(out, state, place, value) if value else None
    elif name == "MAILFROM":
        state.mail_from = value or None
    elif name == "SHELL":
        state.shell = value or "/bin/sh"
    else:
        state.env[name] = value


def _channel(out: Imported, state: _Settings, place: str, value: str) -> str:
    """The name of the email channel for MAILTO=``value``, declared under ``notify:``."""
    to = [a for a in re.split(r"[,\s]+", value) if a]
    channels: dict[str, Any] = out.document.setdefault("notify", {})
    email: dict[str, Any] = {"to": to, "smtp": "${SMTP_URL}"}
    if state.mail_from:
        email["from"] = state.mail_from
    for name, channel in channels.items():
        if channel["email"] == email:
            return name
    name = "mail" if not channels else f"mail-{len(channels) + 1}"
    channels[name] = {"email": email}
    out.note(place, f"MAILTO={value}: channel notify.{name}; cron handed its mail to this "
                    "host's MTA, cronsvc sends through SMTP: set SMTP_URL "
                    "(smtp://user:password@host:587) where the planners run")
    return name


def _job(out: Imported, state: _Settings, place: str, line: str,
         system: bool) -> tuple[dict[str, Any], str, str | None] | None:
    """The job of one cron line, its command and the user it ran as (a system crontab's),
    or None after refusing it."""
    fields = 1 if line.startswith("@") else 5
    words = line.split(None, fields + system)
    if len(words) <= fields + system:
        out.refuse(place, f"expected {'a macro' if fields == 1 else '5 time fields'}, "
                          f"{'the user, ' if system else ''}then the command")
        return None
    cron, command = " ".join(words[:fields]), words[-1]
    if cron == "@reboot":
        out.refuse(place, "@reboot: cronsvc fires on a schedule, never at boot; run it from "
                          "the host's init (a systemd unit) instead")
        return None
    if cron.startswith("@") and cron.lower() not in ALIASES:
        out.refuse(place, f"unknown macro {cron} (cronsvc knows {', '.join(sorted(ALIASES))})")
        return None
    problem = _cron_problem(cron) or state.zone_problem or _percent_problem(command)
    if problem:
        out.refuse(place, problem)
        return None
    command = command.replace("\\%", "%")
    job: dict[str, Any] = {"cron": Quoted(cron)}
    if state.timezone:
        job["timezone"] = state.timezone
    if state.shell in _SH:
        job.update(shell=True, command=command)
    else:  # the shell cron was told to use, without a second shell around it
        job["command"] = [state.shell, "-c", command]
    if state.env:
        job["env"] = dict(state.env)
    if state.mailto:
        job["notify"] = [state.mailto]
    user = words[fields] if system else None
    job["description"] = place + (f", as user {user}" if user else "")
    return job, command, user


def _cron_problem(cron: str) -> str | None:
    try:
        validate_cron(cron)
    except ScheduleError as exc:
        return f"{cron!r}: {exc}"
    return None


def _percent_problem(command: str) -> str | None:
    """Why ``command`` cannot run as written: crontab turns its first unescaped ``%`` into
    the start of standard input, and every other one into a newline."""
    if re.search(r"(?<!\\)%", command):
        return ("an unescaped '%': crontab sends what follows as standard input, which a "
                "cronsvc command does not have; write \\% for a literal '%', or pipe the "
                "input in (printf 'a\\nb\\n' | cmd)")
    return None


def command_name(command: str) -> str:
    """A name for the job running ``command``: the program it is for, past ``cd ... &&``,
    ``sudo`` and the like, or the script an interpreter runs (``backup`` for
    ``cd /srv && /usr/bin/python3 bin/backup.py --full``)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    segments: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", "||", ";", "|", "(", ")"):
            segments.append([])
        else:
            segments[-1].append(word.strip("()"))
    for segment in segments:
        found = _program(segment)
        if found:
            return found
    return ""


def _program(words: list[str]) -> str | None:
    """The name of what one segment of a command line runs, or None when it only
    prepares (``cd``, ``test``) or names nothing."""
    runner, skip = False, 0
    for word in words:
        base = PurePath(word).name if word else ""
        if not base or "=" in word and not runner or word.startswith(("-", ">", "<", "2>")):
            continue
        if skip or base.isdigit():  # a wrapper's own argument: a lock file, a niceness
            skip -= 1 if skip else 0
            continue
        if runner:
            return _SCRIPT.sub("", base)
        if base in ("cd", "test", "["):
            return None  # the segment only prepares: the command is in the next one
        if base in _WRAPPERS:
            skip = _WRAPPERS[base]
            continue
        if base in _RUNNERS or re.fullmatch(r"python[\d.]*", base):
            runner = True
            continue
        return _SCRIPT.sub("", base)
    return None


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _closing_notes(out: Imported, source: str, state: _Settings, users: set[str],
                   timezone: str | None, any_jobs: bool) -> None:
    if users:
        out.note(source, f"cron ran these as {', '.join(sorted(users))}; a cronsvc worker runs "
                         "every command as its own user (each job's description says whose)")
    if any_jobs and timezone is None and not any("timezone" in j for j in out.jobs.values()):
        out.note(source, "no CRON_TZ: cron fired these in the host's local time; they are "
                         "written in UTC (pass --timezone ZONE for another)")
    if state.mailto or out.document.get("notify"):
        out.note(source, "cron mailed whatever a command printed; cronsvc tells a channel "
                         "of failures (dead), missed fires and recoveries: see notify_on")
