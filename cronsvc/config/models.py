"""The job file (``schedules.yaml``) as frozen models, with every check in one place.

:func:`parse_config` reports all problems of a file at once, each located:
``schedules.yaml:12: jobs.backup.cron: '61 * * * *': minute 61 out of range 0-59``.
The models also validate on their own, so code and tests may build a :class:`Job`
directly.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime, tzinfo
from functools import cached_property, partial
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from cronsvc.clock import dt_to_ms
from cronsvc.config.discover import MODULE_NAME, Collected, Declared
from cronsvc.config.discover import collect as collect_declared
from cronsvc.config.report import Report
from cronsvc.config.yamlsource import KeyPath, Located, YamlLimitError, YamlSyntaxError, load
from cronsvc.durations import parse_duration
from cronsvc.errors import ConfigError, ScheduleError, did_you_mean
from cronsvc.history import HISTORY_MAX
from cronsvc.keys import DEFAULT_POOL, EACH_HOST
from cronsvc.kinds import KINDS, KindFields, kind_problem
from cronsvc.kinds.kind import Text
from cronsvc.outbound import HTTP, SMTP, check_written_url
from cronsvc.policy import Policy
from cronsvc.run.output import DEFAULT_OUTPUT, OUTPUT_RETENTION_MS
from cronsvc.schedule.calendars import day_rules, mapping_rules
from cronsvc.schedule.expand import Spec, validate_cron, zone
from cronsvc.sizes import format_size, parse_size

#: A job file is a few KB, 10,000 jobs about 1 MB: a bigger one is a mistake or an attack.
MAX_FILE_BYTES = 4 * 2**20

JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_NAME_RULE = "use letters, digits, '_', '.' and '-', starting with a letter or digit"


def _optional_duration(value: object) -> float | None:
    return None if value is None else parse_duration(value)


Seconds = Annotated[float, BeforeValidator(parse_duration)]
OptionalSeconds = Annotated[float | None, BeforeValidator(_optional_duration)]
SecondsOrZero = Annotated[float, BeforeValidator(lambda v: parse_duration(v, allow_zero=True))]
Jitter = SecondsOrZero


def _optional_size(value: object) -> int | None:
    return None if value is None else parse_size(value)


#: What a run keeps of its output at least and at most (head and tail together).
OUTPUT_MIN, OUTPUT_MAX = 256, 16 * 2**20
Size = Annotated[int, BeforeValidator(parse_size), Field(ge=OUTPUT_MIN, le=OUTPUT_MAX)]
OptionalSize = Annotated[int | None, BeforeValidator(_optional_size),
                         Field(ge=OUTPUT_MIN, le=OUTPUT_MAX)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Ping(_Frozen):
    """Dead-man pings for an outside monitor (Healthchecks.io, Cronitor): ``start`` when a
    run begins, ``success`` or ``fail`` when it ends (``fail`` with the error and the
    output tail as the body). A plain URL is Healthchecks' form: ``URL/start``, ``URL``,
    ``URL/fail``. URLs are http(s) and may be ``${VAR}``, read from the environment when
    pinging (and checked then, if a variable stands for the scheme)."""

    start: str | None = None
    success: str | None = None
    fail: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_url(cls, value: object) -> object:
        if isinstance(value, str):
            check_written_url(value, HTTP)  # one error for the one URL written, not three
            base = value.rstrip("/")
            return {"start": f"{base}/start", "success": base, "fail": f"{base}/fail"}
        return value

    @field_validator("start", "success", "fail")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        check_written_url(value, HTTP)
        return value


#: What a job may ask to be told about (``notify_on``); ``paused`` (by ``pause_after_failures``)
#: is told to every channel of the job.
NOTIFY_EVENTS = ("failed", "dead", "missed", "skipped", "recovered", "lease_lost")
NotifyEvent = Literal["failed", "dead", "missed", "skipped", "recovered", "lease_lost"]
DEFAULT_NOTIFY_ON: tuple[NotifyEvent, ...] = ("dead", "missed", "recovered")


class _When(_Frozen):
    """A job's name and the keys of when it fires: a base of :class:`Job`, so that they
    come first among its fields, then what it runs (its kind's keys), then the rest."""

    name: str
    cron: str | None = None  # neither cron nor every: the job runs when triggered
    every: OptionalSeconds = None
    anchor: datetime | None = None  # of every: fires at anchor + k * every (default: epoch)
    start: datetime | None = None  # no fire before (a time without a zone is the job's)
    end: datetime | None = None  # no fire after
    max_runs: int | None = Field(default=None, ge=1)  # fires counted from start
    timezone: str = "UTC"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not JOB_NAME.fullmatch(value):
            raise ValueError(f"invalid job name {value!r}: {_NAME_RULE}")
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            validate_cron(value)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("every")
    @classmethod
    def _every(cls, value: float | None) -> float | None:
        if value is not None and (value < 1 or value * 1000 != int(value * 1000)):
            raise ValueError("an interval of at least 1s, in whole milliseconds")
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        check_timezone(value)
        return value


class Job(KindFields, _When):
    """One job of the file: its schedule, what it runs (the keys of its kind, see
    :mod:`cronsvc.kinds`) and its run policy."""

    env: dict[str, Text] = {}
    cwd: str | None = None
    timeout: OptionalSeconds = None
    retries: int = Field(default=0, ge=0)
    backoff: Seconds = 10.0
    backoff_max: Seconds = 3600.0
    overlap: Literal["allow", "forbid", "replace", "queue"] = "allow"
    max_concurrent: int | None = Field(default=None, ge=1)  # runs at once, fleet-wide
    pool: str = DEFAULT_POOL  # the workers that run it: those serving this pool
    catch_up: Literal["all", "latest", "none"] = "latest"
    starting_deadline: OptionalSeconds = None
    jitter: Jitter = 0.0
    paused: bool = False
    description: str = ""
    tags: tuple[str, ...] = ()
    ping: Ping | None = None  # not part of the definition: a monitor's URL is not what runs
    notify: tuple[str, ...] = ()  # channels of the file's notify section
    notify_on: tuple[NotifyEvent, ...] = DEFAULT_NOTIFY_ON
    # Paused after this many fires failed in a row: by the script, on the shard that saw
    # them; on the other shards by the outbox router (cronsvc.outbox.autopause), which runs
    # in every planner and in `cronsvc notifier`: without one of them running, the pause
    # stays on that one shard.
    pause_after_failures: int | None = Field(default=None, ge=1)
    # The file's named limits this job's tags join: (name, runs at once). Set from the
    # file's ``limits:`` section, never written in a job.
    slot_limits: tuple[tuple[str, int], ...] = ()
    # Days without fires: a calendar's name, {holidays: DE-BY, dates: [...]}, or a list of
    # those; business_days adds the weekends. Resolved into ``calendar`` with the file's
    # ``calendars:`` section (cronsvc.schedule.calendars), never written in a job.
    skip: str | dict[str, Any] | tuple[str | dict[str, Any], ...] | None = None
    business_days: bool = False
    # Of the days cron names, only the first or last business day of each month.
    only: Literal["first_business_day", "last_business_day"] | None = None
    # Jobs triggered when a fire of this one ends: succeeded, or failed for good. Queued by
    # the outbox router (cronsvc.outbox.chains), which runs in every planner and in
    # `cronsvc notifier`: without one of them running, no chained job runs.
    on_success: tuple[str, ...] = ()
    on_failure: tuple[str, ...] = ()
    calendar: tuple[str, ...] = ()
    # What a run keeps of its output (its head and tail): the worker section's ``output``
    # unless the job says; set when the file is read.
    output: OptionalSize = None
    # Records its history keeps (runs and skips): the worker section's ``history`` unless
    # the job says.
    history: int | None = Field(default=None, ge=1, le=HISTORY_MAX)
    # Where the job is written: ``schedules.yaml:14``, or ``proj/jobs.py:12`` for a job
    # declared in Python (cronsvc.config.declare). Set when the file is read, never
    # written in a job; no part of a digest: a job moved down a line is the same job.
    declared_at: str = ""

    @field_validator("notify", "notify_on", "on_success", "on_failure", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("pool")
    @classmethod
    def _pool(cls, value: str) -> str:
        return pool_name(value)

    @model_validator(mode="after")
    def _runnable(self) -> Job:
        problem = kind_problem(key for key in KINDS if getattr(self, key) is not None)
        if problem:
            raise ValueError(problem)
        problem = when_problem(self)
        if problem:
            raise ValueError(problem)
        for kind in KINDS.values():
            problem = kind.problem(self)
            if problem:
                raise ValueError(problem)
        if self.only is not None and self.cron is None:
            raise ValueError(f"only: {self.only} picks among the days of a cron schedule: "
                             "set cron too (its time of day)")
        if self.max_concurrent is not None and self.overlap in ("forbid", "replace"):
            raise ValueError(f"max_concurrent applies with overlap allow or queue (overlap "
                             f"{self.overlap} allows one run at a time)")
        return self

    @cached_property
    def kind(self) -> str:
        """The key of the job's kind in :data:`cronsvc.kinds.KINDS`: ``command`` (a
        process), ``call`` (a Python function in the worker)... (asked of every fire: found
        once)."""
        return next(key for key in KINDS if getattr(self, key) is not None)

    @property
    def every_ms(self) -> int | None:
        return None if self.every is None else round(self.every * 1000)

    @property
    def anchor_ms(self) -> int | None:
        return self._ms(self.anchor)

    @property
    def start_ms(self) -> int | None:
        return self._ms(self.start)

    @property
    def end_ms(self) -> int | None:
        return self._ms(self.end)

    def _ms(self, at: datetime | None) -> int | None:
        """A time of the file in ms; one written without a zone is in the job's zone."""
        if at is None:
            return None
        return dt_to_ms(at if at.tzinfo else at.replace(tzinfo=zone(self.timezone)))

    @property
    def schedule(self) -> Spec:
        """When the job fires, as plain values."""
        return Spec.of(self)

    @property
    def spec(self) -> dict[str, Any]:
        """The fields that decide when the job fires (published as the job's spec)."""
        return self.schedule.published()

    @cached_property
    def digest(self) -> str:
        """12 hex chars identifying the schedule and the pool whose queue holds its fires;
        changes only when the fire times, or where they wait, may."""
        if self.pool == DEFAULT_POOL:
            return _digest(self.spec)
        return _digest({**self.spec, "pool": self.pool})

    @cached_property
    def definition(self) -> str:
        """12 hex chars identifying what runs and how (its kind's keys, env, timeout,
        retries...): a worker runs a fire only if its own file has this definition."""
        fields = DEFINITION_FIELDS | KINDS[self.kind].fields.model_fields.keys()
        return _digest(self.model_dump(include=set(fields), mode="json"))

    def history_cap(self, worker: WorkerSettings) -> int:
        """Records the job's history keeps."""
        return self.history or worker.history

    @property
    def max_attempts(self) -> int:
        """Runs allowed for one fire: the first plus ``retries``."""
        return self.retries + 1

    def retry_delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.backoff * 2 ** max(attempt - 1, 0), self.backoff_max)


#: The fields of a job that say what runs and how a run ends (see Job.definition), with
#: those of its kind. The keys of command and call are in every job's: so were digests
#: computed before kinds had modules, and a digest that changes for a file that did not
#: makes the workers of a rolling deploy refuse its fires. A kind added since adds its own
#: keys to the digests of its jobs only.
DEFINITION_FIELDS = frozenset({"name", "shell", "command", "call", "args", "kwargs", "env", "cwd",
                               "timeout", "retries", "backoff", "backoff_max"})


def when_problem(job: Job) -> str | None:
    """Why the schedule fields of ``job`` do not fit together, or None."""
    if job.cron is not None and job.every is not None:
        return "set either cron or every, not both"
    if job.anchor is not None and job.every is None:
        return "anchor only applies to every"
    if job.start_ms is not None and job.end_ms is not None and job.end_ms <= job.start_ms:
        return "end must be after start"
    if job.max_runs is not None and job.start is None:
        return "max_runs counts fires from start: set start too"
    if job.max_runs is not None and job.cron is None and job.every is None:
        return "max_runs needs a schedule (cron or every)"
    return None


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


class RedisSettings(_Frozen):
    """Where Redis is; ``url`` None means an embedded server for ``up``."""

    url: str | None = None
    shards: int = Field(default=1, ge=1)
    prefix: str = ""
    cluster: bool = False

    @model_validator(mode="after")
    def _cluster_needs_shards(self) -> RedisSettings:
        # Unsharded key names carry no hash tag: on a cluster one script would span slots.
        if self.cluster and self.shards < 2:
            raise ValueError("cluster: true needs shards: 2 or more "
                             "(each shard's keys share one hash slot)")
        return self


class PlannerSettings(_Frozen):
    """How far ahead fires are planned, and how often."""

    horizon: Seconds = 7200.0
    tick: Seconds = 60.0


class NotifierSettings(_Frozen):
    """How the notifier tells people: repeats folded per ``fold`` window, retries from
    ``retry`` doubling up to ``retry_max``, a message given up on after ``give_up``; fleet
    events (no live worker or planner for ``fleet_after``, the queue later than
    ``queue_late``) go to the ``fleet`` channels; ``url`` is the dashboard links point at."""

    fold: Seconds = 600.0
    retry: Seconds = 5.0
    retry_max: Seconds = 300.0
    give_up: Seconds = 86400.0
    fleet: tuple[str, ...] = ()
    fleet_after: Seconds = 60.0
    queue_late: OptionalSeconds = 300.0
    url: str | None = None

    @field_validator("fleet", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value


def pool_name(value: str) -> str:
    """``value`` if it can name a pool (as a job name can); ValueError otherwise."""
    if not JOB_NAME.fullmatch(value):
        raise ValueError(f"invalid pool name {value!r}: {_NAME_RULE}")
    return value


def served_pool(value: str) -> str:
    """``value`` if a worker may serve it: ``each-host`` every worker serves on its own."""
    if value == EACH_HOST:
        raise ValueError(f"{EACH_HOST}: every worker runs those jobs for its host; leave it "
                         "out of pools")
    return pool_name(value)


_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def host_name(value: str) -> str:
    """``value`` if it can name a host in fire ids and key names; ValueError otherwise."""
    if not _HOST.fullmatch(value):
        raise ValueError(f"invalid host name {value!r}: letters, digits, '.', '_', '-'")
    return value


class WorkerSettings(_Frozen):
    """Parallel runs per worker, the pools it serves, lease length, shutdown grace, history
    kept per job."""

    concurrency: int = Field(default=4, ge=1)
    # Claim-and-run processes of `cronsvc worker`, under one supervisor (None: one per core).
    processes: int | None = Field(default=None, ge=1)
    # Async call runs at once: tasks on the worker's loop, holding no thread while they
    # wait, so far more than its slots (docs/job-file.md#async-calls).
    async_concurrency: int = Field(default=100, ge=1)
    pools: tuple[str, ...] = (DEFAULT_POOL,)
    host: str | None = None  # the host this worker runs each-host jobs for (default: its name)
    lease: Seconds = 30.0
    grace: Seconds = 30.0
    # Fires due within this long are claimed ahead and started at their due time: the
    # claim's wake and round trip are no part of their lag (0: claimed once due).
    claim_ahead: SecondsOrZero = Field(default=0.02, le=1)
    # Fires a worker holds at most, as a multiple of its slots: one whose claim ahead took
    # a free slot each, with more due within claim_ahead that the fleet's free slots left,
    # takes those too, up to this, to wait in it for a slot (1: never more than its slots).
    prefetch_multiplier: int = Field(default=4, ge=1, le=100)
    history: int = Field(default=100, ge=1, le=HISTORY_MAX)
    output: Size = DEFAULT_OUTPUT  # what a run keeps of its output, unless its job says
    # The most any job of this file may keep (its `output` included): the fleet's cap.
    output_max: Size = OUTPUT_MAX
    output_retention: Seconds = OUTPUT_RETENTION_MS / 1000  # how long a fire's outputs stay

    @field_validator("pools", mode="before")
    @classmethod
    def _pools(cls, value: object) -> object:
        names = [p.strip() for p in value.split(",")] if isinstance(value, str) else value
        if isinstance(names, (list, tuple)):
            if not names:
                raise ValueError("a worker serves at least one pool")
            return tuple(dict.fromkeys(served_pool(str(n)) for n in names))
        return value

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        return None if value is None else host_name(value)


class EmailChannel(_Frozen):
    """Mail through SMTP: ``smtp`` is ``smtp://user:password@host:587`` (STARTTLS, which the
    server must offer) or ``smtps://...`` (TLS from the start), the server's certificate
    verified either way; credentials may be ``${VAR}``. ``insecure_plaintext: true`` talks
    to an ``smtp://`` relay without TLS at all: mail and password go in clear."""

    to: tuple[str, ...] = Field(min_length=1)
    smtp: str
    sender: str | None = Field(default=None, alias="from")
    insecure_plaintext: bool = False

    @field_validator("to", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value

    @field_validator("smtp")
    @classmethod
    def _smtp(cls, value: str) -> str:
        check_written_url(value, SMTP)
        return value

    @model_validator(mode="after")
    def _plaintext_is_smtp(self) -> EmailChannel:
        if self.insecure_plaintext and self.smtp.lower().startswith("smtps:"):
            raise ValueError("insecure_plaintext: smtps:// is TLS from the start; "
                             "use smtp:// for a relay without TLS")
        return self


CHANNEL_KINDS = ("webhook", "slack", "teams", "email", "command")


class Channel(_Frozen):
    """One way to tell people: exactly one of ``webhook``, ``slack``, ``teams`` (their
    incoming-webhook URLs, http or https), ``email`` or ``command`` (an argv, no shell,
    given the event as JSON on stdin). Any text may be ``${VAR}``: read from the
    environment when sending, never written to Redis or to a log; a URL whose scheme is a
    variable is checked then."""

    webhook: str | None = None
    slack: str | None = None
    teams: str | None = None
    email: EmailChannel | None = None
    command: tuple[Text, ...] | None = None
    secret: str | None = None  # webhook: signs each body (HMAC-SHA256)
    timeout: Seconds = 10.0

    @field_validator("webhook", "slack", "teams")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        check_written_url(value, HTTP)
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Channel:
        kinds = [k for k in CHANNEL_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"set exactly one of {', '.join(CHANNEL_KINDS)}"
                             + (f" (got {' and '.join(kinds)})" if kinds else ""))
        if self.secret is not None and kinds[0] != "webhook":
            raise ValueError("secret: only a webhook is signed")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in CHANNEL_KINDS if getattr(self, k) is not None)


class Config(_Frozen):
    """A whole, valid job file, with the jobs its ``discover:`` modules declare."""

    source: str
    discover: tuple[str, ...] = ()  # modules whose declared jobs it holds
    watched: tuple[str, ...] = ()  # their files: a change of one is a change of the file
    redis: RedisSettings = RedisSettings()
    planner: PlannerSettings = PlannerSettings()
    worker: WorkerSettings = WorkerSettings()
    notifier: NotifierSettings = NotifierSettings()
    notify: dict[str, Channel] = {}
    limits: dict[str, int] = {}  # named limits: runs at once of the jobs tagged with the name
    calendars: dict[str, tuple[str, ...]] = {}  # named calendars: their rules
    jobs: dict[str, Job] = {}

    @cached_property
    def digest(self) -> str:
        """12 hex chars identifying the jobs of the file: their schedules, policies and
        definitions (not comments, order or the settings of the processes)."""
        return _digest(sorted((name, Policy.of(job).format()) for name, job in self.jobs.items()))

    @property
    def declared_in_python(self) -> list[str]:
        """The jobs declared in Python (by the modules of ``discover``), not in the file."""
        mine = f"{self.source}:"
        return [name for name, job in self.jobs.items()
                if job.declared_at and not job.declared_at.startswith(mine)]


SECTIONS: dict[str, type[BaseModel]] = {
    "redis": RedisSettings,
    "planner": PlannerSettings,
    "worker": WorkerSettings,
    "notifier": NotifierSettings,
}
TOP_KEYS = ("redis", "defaults", "planner", "worker", "notifier", "notify", "limits",
            "calendars", "discover", "jobs")
#: Fields of a job that reading the file sets: never written in a job.
SET_WHEN_READ = ("slot_limits", "calendar", "declared_at")
JOB_KEYS = tuple(name for name in Job.model_fields
                 if name != "name" and name not in SET_WHEN_READ)
# What a job is cannot have a default; how it runs can.
PER_JOB_ONLY = frozenset({"cron", "every", "anchor", "start", "end", "max_runs", "description",
                          "ping"}).union(*(kind.per_job for kind in KINDS.values()))


def check_timezone(key: str) -> tzinfo:
    """The zone named ``key``; ValueError ``unknown time zone 'X'`` if there is none."""
    try:
        return zone(key)
    except ScheduleError as exc:
        raise ValueError(str(exc)) from None


def load_config(path: str | Path) -> Config:
    """Read and check the job file at ``path``, with the jobs declared by the modules it
    names under ``discover:``; ConfigError lists every problem."""
    return parse_config(read_job_file(path), str(path))


def read_job_file(path: str | Path) -> str:
    """The text of the job file at ``path``; ConfigError if it is missing, unreadable
    or larger than :data:`MAX_FILE_BYTES`."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            # Read one byte past the bound: a file growing meanwhile cannot slip through.
            raw = f.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise ConfigError([f"{source}: larger than {MAX_FILE_BYTES // 2**20} MiB: "
                               "not read (is it the job file?)"])
        return raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{source}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError([f"{source}: cannot read: {reason}"]) from None


def redis_section(path: str | Path) -> RedisSettings | None:
    """The ``redis:`` settings of a job file broken elsewhere, if that section still reads
    and checks on its own (the defaults if the file has none); None if it does not.

    Operator commands need only these: a typo in one job must not keep an operator
    from pausing another one.
    """
    try:
        data = load(read_job_file(path)).data
    except (ConfigError, YamlSyntaxError):
        return None
    raw = data.get("redis") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(raw, dict | None):
        return None
    try:
        return RedisSettings.model_validate(raw or {})
    except ValidationError:
        return None


Collector = Callable[[Sequence[str]], Collected]


def parse_config(text: str, source: str, collect: Collector = collect_declared) -> Config:
    """Check YAML ``text`` (``source`` names it in messages) and build the config, with
    the jobs the modules of its ``discover:`` declare (as ``collect`` gathers them: in a
    child process)."""
    return parse_located(text, source, collect)[0]


def parse_located(text: str, source: str, collect: Collector = collect_declared
                  ) -> tuple[Config, Located]:
    """:func:`parse_config`, with the place of every key of the file (for warnings)."""
    config, located, problems = parse_partly(text, source, collect)
    if problems:
        raise ConfigError(problems)
    return config, located


def parse_partly(text: str, source: str, collect: Collector = collect_declared
                 ) -> tuple[Config, Located, list[str]]:
    """:func:`parse_located` going on past problems, for ``cronsvc validate`` to show all
    it can at once: the config of what checks (the jobs, channels and sections without a
    problem), where each key is, and every problem. ConfigError only when nothing reads
    (YAML syntax, not a mapping)."""
    try:
        located = load(text)
    except YamlSyntaxError as exc:
        place = f"{source}:{exc.line}" if exc.line else source
        what = "" if isinstance(exc, YamlLimitError) else "YAML syntax error: "
        raise ConfigError([f"{place}: {what}{exc}"]) from None
    report = Report(source, located)
    data = located.data
    if data is None:
        report.add((), "empty file: expected a mapping with 'jobs' (and optionally "
                   "redis, defaults, planner, worker, notify)")
        report.raise_if_any()
    if not isinstance(data, dict):
        report.add((), "expected a mapping with keys redis, defaults, planner, worker, notify, "
                       "jobs", line=1)
        report.raise_if_any()
    for path, line, first in located.duplicates:
        what = "duplicate job name" if len(path) == 2 and path[0] == "jobs" else "duplicate key"
        report.add(path, f"{what} (first at line {first})", line=line)
    report.unknown_keys((), data, TOP_KEYS)
    sections = {name: _section(report, data, name, model) for name, model in SECTIONS.items()}
    defaults = _defaults(report, data.get("defaults"))
    discover = _discover(report, data.get("discover"))
    collected = collect(discover) if discover else Collected()
    for i, at, problem in collected.problems:
        report.add(("discover", i), problem, place=at)
    jobs = _jobs(report, data, defaults, "discover" in data)
    jobs.update(_declared(report, collected.jobs, defaults))
    notify = _channels(report, data.get("notify"))
    _channels_named(report, jobs, sections.get("notifier"), notify, data.get("notify"))
    _chains_checked(report, jobs)
    limits = _limits(report, data.get("limits"))
    calendars = {name: rules for name, rules in _calendars(report, data.get("calendars")).items()
                 if rules is not None}
    worker = sections.get("worker") or WorkerSettings()
    _outputs_capped(report, jobs, worker)
    jobs = {name: job.model_copy(update={
        "output": job.output or worker.output,
        "slot_limits": tuple((tag, limits[tag]) for tag in job.tags if tag in limits),
        "calendar": _job_calendar(report, job, calendars),
        "declared_at": located.place(source, ("jobs", name))[0]}) for name, job in jobs.items()}
    return Config(source=source, jobs=jobs, notify=notify, limits=limits,
                  calendars={n: r for n, r in calendars.items()}, discover=tuple(discover),
                  watched=tuple(collected.files),
                  **{n: v for n, v in sections.items() if v is not None}), located, report.problems


def _discover(report: Report, value: object) -> list[str]:
    """``discover: [proj.jobs, proj.reports]``: the modules whose declared jobs the file
    holds (one may be written without the list)."""
    names = [value] if isinstance(value, str) else value
    if names is None:
        return []
    if not isinstance(names, list):
        report.add(("discover",), "expected a list of modules, such as [proj.jobs]")
        return []
    for i, name in enumerate(names):
        if not isinstance(name, str) or not MODULE_NAME.fullmatch(name):
            report.add(("discover", i), f"{name!r}: expected a module's dotted name, such "
                                        "as proj.jobs")
    good = [n for n in names if isinstance(n, str) and MODULE_NAME.fullmatch(n)]
    return good if len(good) == len(names) else []


def _declared(report: Report, declared: list[Declared], defaults: dict[str, Any]
              ) -> dict[str, Job]:
    """The jobs declared in Python, checked as if the file wrote them (its defaults
    apply), each located at its ``module:line``; one declared twice, or declared and
    written in the file, is an error at the second place, naming the first."""
    jobs: dict[str, Job] = {}
    located = report.located
    first: dict[str, str] = {}
    for decl in declared:
        where = ("jobs", decl.name)
        if where in located.lines or decl.name in first:
            other = located.place(report.source, where)[0] if where in located.lines \
                else first[decl.name]
            what = "in the job file" if where in located.lines else "in Python"
            report.add(where, f"declared twice: here, and {what} at {other}",
                       place=decl.place)
            continue
        first[decl.name] = decl.place
        located.outside[where] = decl.place
        for key, problem in decl.problems:
            report.add((*where, *key.split(".")), problem)
        # A declaration the decorator could not make (what it runs, a value) is checked
        # once that is fixed: its other messages would follow from the first.
        job = None if decl.problems else _job(report, decl.name, dict(decl.fields), defaults)
        if job is not None:
            jobs[decl.name] = job
    return jobs


def _channels(report: Report, value: object) -> dict[str, Channel]:
    raw = _mapping(report, ("notify",), value) or {}
    channels: dict[str, Channel] = {}
    for name, spec in raw.items():
        where = ("notify", str(name))
        if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
            report.add(where, f"invalid channel name: {_NAME_RULE}")
            continue
        try:
            channels[name] = Channel.model_validate(spec)
        except ValidationError as exc:
            report.validation(exc, _under(where), Channel.model_fields)
    return channels


def _chains_checked(report: Report, jobs: dict[str, Job]) -> None:
    """Every job a chain names exists, and no chain comes back to where it started."""
    for name, job in jobs.items():
        for field in ("on_success", "on_failure"):
            for target in getattr(job, field):
                if target not in jobs:
                    report.add(("jobs", name, field), f"unknown job {target!r}"
                               + (did_you_mean(target, list(jobs)) or ""))
    edges = {name: [t for t in (*job.on_success, *job.on_failure) if t in jobs]
             for name, job in jobs.items()}
    for start in sorted(edges):
        cycle = _cycle_from(start, edges)
        if cycle:
            last = cycle[-2]
            field = "on_success" if start in jobs[last].on_success else "on_failure"
            report.add(("jobs", last, field), "a chain that comes back: " + " -> ".join(cycle))


def _cycle_from(start: str, edges: dict[str, list[str]]) -> list[str] | None:
    """A chain from ``start`` back to it through names after it (so each cycle is found
    once, from its first name), or None."""
    seen = {start}

    def walk(path: list[str]) -> list[str] | None:
        for nxt in edges[path[-1]]:
            if nxt == start:
                return [*path, start]
            if nxt > start and nxt not in seen:
                seen.add(nxt)
                found = walk([*path, nxt])
                if found:
                    return found
        return None

    return walk([start])


def _calendars(report: Report, value: object) -> dict[str, tuple[str, ...] | None]:
    """``calendars: {bavaria: {holidays: DE-BY, dates: [2026-12-24]}}``: named calendars."""
    out: dict[str, tuple[str, ...] | None] = {}
    for name, spec in (_mapping(report, ("calendars",), value) or {}).items():
        where = ("calendars", str(name))
        if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
            report.add(where, f"invalid calendar name: {_NAME_RULE}")
            continue
        out[name] = _calendar_rules(report, where, spec, None)
    return out


def _calendar_rules(report: Report, where: KeyPath, spec: object,
                    named: dict[str, tuple[str, ...]] | None) -> tuple[str, ...] | None:
    """The rules of one calendar: a mapping {holidays, dates}, a calendar's name (a job's,
    given the ``named`` calendars), or a list of those; None after reporting a problem."""
    if isinstance(spec, str) and named is not None:
        if spec in named:
            return named[spec]
        known = ", ".join(sorted(named)) or "none"
        report.add(where, f"unknown calendar {spec!r} (declared under calendars: {known}; "
                          "or write {holidays: DE-BY, dates: [...]})")
        return None
    if isinstance(spec, (list, tuple)):
        rules: list[str] = []
        for i, item in enumerate(spec):
            found = _calendar_rules(report, (*where, i), item, named)
            if found is None:
                return None
            rules += found
        return tuple(dict.fromkeys(rules))
    try:
        return mapping_rules(spec)
    except ValueError as exc:
        field, problem = exc.args
        if not field and named is not None:
            problem += " or a calendar's name"
        report.add((*where, field) if field else where, problem)
        return None


def _job_calendar(report: Report, job: Job, named: dict[str, tuple[str, ...]]
                  ) -> tuple[str, ...]:
    rules = () if job.skip is None else _calendar_rules(
        report, ("jobs", job.name, "skip"), job.skip, named) or ()
    return day_rules(rules, job.business_days, job.only)


def _outputs_capped(report: Report, jobs: dict[str, Job], worker: WorkerSettings) -> None:
    """No job, nor the worker section's default, keeps more output than ``output_max``."""
    cap = format_size(worker.output_max)
    if worker.output > worker.output_max:
        report.add(("worker", "output"), f"{format_size(worker.output)} is over "
                                         f"worker.output_max ({cap})")
    for name, job in jobs.items():
        if job.output is not None and job.output > worker.output_max:
            report.add(("jobs", name, "output"), f"{format_size(job.output)} is over "
                                                f"worker.output_max ({cap}), the most a job "
                                                "of this file may keep")


def _limits(report: Report, value: object) -> dict[str, int]:
    """``limits: {db: 3}``: at most 3 runs at once of the jobs tagged ``db``."""
    limits: dict[str, int] = {}
    for name, cap in (_mapping(report, ("limits",), value) or {}).items():
        if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
            report.add(("limits", str(name)), f"invalid limit name: {_NAME_RULE}")
        elif isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            report.add(("limits", name), f"{cap!r}: expected runs at once, a whole number "
                                         "of 1 or more")
        else:
            limits[name] = cap
    return limits


def _channels_named(report: Report, jobs: dict[str, Job], notifier: NotifierSettings | None,
                    channels: dict[str, Channel], declared: object) -> None:
    """Every channel a job or the notifier names is declared under ``notify:``."""
    if isinstance(declared, dict) and len(declared) > len(channels):
        return  # a broken channel is reported already; its users would be reported twice
    known = ", ".join(sorted(channels)) or "none"
    uses: list[tuple[KeyPath, tuple[str, ...]]] = [
        (("jobs", name, "notify"), job.notify) for name, job in jobs.items()]
    if notifier is not None:
        uses.append((("notifier", "fleet"), notifier.fleet))
    for where, names in uses:
        for name in names:
            if name not in channels:
                report.add(where, f"unknown channel {name!r} (declared under notify: {known})")


def _under(where: tuple[str, ...]) -> Callable[[tuple[Any, ...]], KeyPath]:
    """The key path of a validation error's location inside ``where``."""
    return lambda loc: (*where, *loc)


def _mapping(report: Report, path: tuple[str, ...], value: object) -> dict[Any, Any] | None:
    if value is None:
        return {}
    if not isinstance(value, dict):
        report.add(path, f"expected a mapping, got {type(value).__name__}")
        return None
    return value


def _section(report: Report, data: dict[Any, Any], name: str, model: type[BaseModel]) -> Any:
    raw = _mapping(report, (name,), data.get(name))
    if raw is not None:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            report.validation(exc, lambda loc: (name, *loc), model.model_fields)
    return None


def _defaults(report: Report, value: object) -> dict[str, Any]:
    raw = dict(_mapping(report, ("defaults",), value) or {})
    for key in [k for k in raw if k in PER_JOB_ONLY]:
        report.add(("defaults", key), "cannot have a default: set it in each job")
        del raw[key]
    report.unknown_keys(("defaults",), raw, JOB_KEYS)
    good = {k: v for k, v in raw.items() if k in JOB_KEYS}
    # A stand-in job checks the defaults once, so each problem is reported once.
    try:
        Job.model_validate({"name": "defaults", "cron": "* * * * *", "call": "m:f", **good})
    except ValidationError as exc:
        report.validation(exc, lambda loc: ("defaults", *loc), Job.model_fields)
        bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
        good = {k: v for k, v in good.items() if k not in bad}
    return good


def _job_path(where: tuple[str, str], skip: set[str], loc: tuple[Any, ...]) -> KeyPath | None:
    return None if loc and loc[0] in skip else (*where, *loc)


def _jobs(report: Report, data: dict[Any, Any], defaults: dict[str, Any],
          discovers: bool) -> dict[str, Job]:
    if "jobs" not in data:
        if not discovers:
            report.add((), "jobs: missing (the file defines no jobs, and discovers none)")
        return {}
    raw_jobs = _mapping(report, ("jobs",), data["jobs"]) or {}
    jobs: dict[str, Job] = {}
    for name, raw in raw_jobs.items():
        job = _job(report, name, raw, defaults)
        if job is not None:
            jobs[job.name] = job
    return jobs


def _job(report: Report, name: Any, raw: object, defaults: dict[str, Any]) -> Job | None:
    """One job of the file (or declared in Python), every problem of it reported."""
    where = ("jobs", name)
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        report.add(where, f"invalid job name: {_NAME_RULE}")
        name = "invalid"  # still check the rest of the job
    if not isinstance(raw, dict):
        report.add(where, f"expected a mapping with what it runs ({', '.join(KINDS)}) "
                          "and when (cron or every)")
        return None
    for key in [k for k in raw if k in SET_WHEN_READ]:
        report.add((*where, key), "unknown key")
    raw = {k: v for k, v in raw.items() if k not in SET_WHEN_READ}
    problem = kind_problem(key for key in KINDS if raw.get(key) is not None)
    if problem:
        report.add(where, problem)
    try:
        return Job.model_validate({**defaults, **raw, "name": name})
    except ValidationError as exc:
        # The name was checked above; a problem of an inherited default was
        # reported under defaults already.
        skip = {"name", *defaults} - set(raw)
        report.validation(exc, partial(_job_path, where, skip), Job.model_fields)
        return None
