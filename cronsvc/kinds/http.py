"""``http``: one HTTP request per fire, with the fire id as its ``Idempotency-Key``, so
that the other side can tell a retry or a second delivery from a new fire.

``url`` and ``headers`` may hold ``${VAR}``, read from the worker's environment when the
request is sent: the job file, its published definition, the API, history and logs keep
the ``${VAR}``, and what came back is cleaned of every value read. The ``body`` (text,
or a mapping sent as JSON) may hold ``{{fire_id}}``, ``{{job}}``, ``{{scheduled_at}}``,
``{{attempt}}`` and ``{{payload}}``. The request follows the rules of everything cronsvc
sends (:mod:`cronsvc.outbound`): certificates checked, no redirect followed, and no
credential over ``http://`` beyond this machine. It runs on an event loop that a
timeout, a cancel, a lost lease or a shutdown ends at once
(:mod:`cronsvc.run.requests`). It reports the status line and the tail of the body, and
fails on a status that ``expect`` does not list (any 2xx by default).
"""

from __future__ import annotations

import json
import os
import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from cronsvc.clock import iso_utc
from cronsvc.durations import parse_duration
from cronsvc.errors import did_you_mean
from cronsvc.kinds.kind import Fields, Kind, Text
from cronsvc.outbound import (
    CREDENTIAL_HEADERS,
    HTTP,
    UNQUOTED,
    check_written_url,
    clear_credentials_problem,
    redirect_target,
    url_problem,
)
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import OUTPUT_CAP, Result, Stop
from cronsvc.run.requests import Answer, RequestFailed, send
from cronsvc.secrets import VAR, MissingVariable, expand, mask_url, secrets_in

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
PLACEHOLDERS = ("fire_id", "job", "scheduled_at", "attempt", "payload")
PLACEHOLDER = re.compile(r"\{\{([^{}]*)\}\}")
#: Set on every request from the fire: a job's own headers cannot fake its identity.
FIRE_HEADERS = ("Idempotency-Key", "X-Cronsvc-Job", "X-Cronsvc-Fire-Id",
                "X-Cronsvc-Scheduled-At", "X-Cronsvc-Attempt")
_RESERVED = {name.lower() for name in FIRE_HEADERS}
USER_AGENT = "cronsvc-http/1"
_INSTEAD = ("write ${NAME} instead and set NAME in the workers' environment, so the secret "
            "stays out of the file and its history")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # a header's name (RFC 9110)


def _status(code: int) -> int:
    if not 100 <= code <= 599:
        raise ValueError("not an HTTP status: expected 100 to 599")
    return code


Seconds = Annotated[float, BeforeValidator(parse_duration)]
Status = Annotated[int, AfterValidator(_status)]


class Request(BaseModel):
    """The ``http:`` mapping of a job. ``headers`` and ``method`` come before ``url`` and
    ``body``, whose checks read them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str | None = None  # GET without a body, POST with one
    headers: dict[str, Text] = {}
    url: str
    body: str | dict[str, Any] | None = None
    timeout: Seconds = 30.0  # the request's own; the job's timeout bounds the whole run
    expect: tuple[Status, ...] = ()  # none: any 2xx

    @field_validator("method", mode="before")
    @classmethod
    def _method(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str) or value.upper() not in METHODS:
            raise ValueError(f"not an HTTP method: expected one of {', '.join(METHODS)}")
        return value.upper()

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"{name!r} is not a header name")
            if name.lower() in _RESERVED or name.lower().startswith("x-cronsvc-"):
                raise ValueError(f"{name}: set by cronsvc on every request, from the fire")
            if "\r" in text or "\n" in text:
                raise ValueError(f"{name}: a header's value is one line")
        return value

    @field_validator("expect", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return (value,) if isinstance(value, int | str) else value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str, info: ValidationInfo) -> str:
        check_written_url(value, HTTP)
        problem = clear_credentials_problem(value, info.data.get("headers", {}))
        if problem:
            raise PydanticCustomError(UNQUOTED, problem)
        return value

    @field_validator("body", mode="before")
    @classmethod
    def _body(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        if not isinstance(value, str | dict):
            raise ValueError("expected text, or a mapping (sent as JSON)")
        method = info.data.get("method")
        if method in ("GET", "HEAD"):
            raise ValueError(f"a {method} request sends no body: set method POST, PUT or "
                             "PATCH (or leave it out: POST with a body)")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not JSON: {exc}") from None
        for name in _placeholders(value):
            if name not in PLACEHOLDERS:
                known = ", ".join("{{%s}}" % p for p in PLACEHOLDERS)  # noqa: UP031
                raise ValueError(f"unknown placeholder {{{{{name}}}}}: expected one of "
                                 f"{known}{did_you_mean(name, PLACEHOLDERS)}")
        return value

    @property
    def verb(self) -> str:
        """The method sent: as written, else GET without a body and POST with one."""
        return self.method or ("GET" if self.body is None else "POST")


class HttpFields(Fields):
    """``http``: the request a fire sends."""

    http: Request | None = None


class Http(Kind):
    key = "http"
    hint = "http (a request to send)"
    fields = HttpFields
    per_job = frozenset({"http"})

    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        spec: Request = job.http
        where = f"jobs.{job.name}.http"
        try:
            url = expand(spec.url, f"{where}.url")
            headers = {name: expand(text, f"{where}.headers.{name}")
                       for name, text in spec.headers.items()}
        except MissingVariable as exc:
            return Result("failed", error=str(exc))
        # Again with the values: a ${VAR} may have held a scheme, a host, a user.
        problem = url_problem(url, HTTP) or clear_credentials_problem(url, headers)
        if problem:
            return Result("failed", error=f"{where}.url: {problem}")
        content, content_type = _content(spec, ctx)
        if content_type and not any(n.lower() == "content-type" for n in headers):
            headers["Content-Type"] = content_type
        headers = {"User-Agent": USER_AGENT, **headers, **_fire_headers(ctx)}
        try:
            answer = send(spec.verb, url, headers, content, spec.timeout, stop)
        except RequestFailed as exc:
            return _clean(Result("failed", error=f"cannot reach {_written(spec.url)}: {exc}"),
                          spec)
        if isinstance(answer, str):
            return stop.stopped(answer)
        return _clean(_judged(spec, answer), spec)

    def shown(self, job: Any) -> dict[str, Any]:
        spec: Request = job.http
        return {"url": _written(spec.url), "method": spec.verb,
                "headers": {name: _header_shown(name, text)
                            for name, text in spec.headers.items()},
                "body": spec.body, "request_timeout": spec.timeout,  # "timeout" is the job's
                "expect": list(spec.expect) or "2xx"}

    def text(self, field: str, value: Any) -> str:
        # Headers as they are written on the wire; the statuses as a list to read.
        if field == "headers":
            return ", ".join(f"{name}: {text}" for name, text in value.items())
        if field == "expect" and isinstance(value, list):
            return ", ".join(map(str, value))
        return super().text(field, value)

    def warnings(self, job: Any) -> list[tuple[str, str]]:
        spec: Request = job.http
        found = [(f"http.headers.{name}", f"a credential written in the file: {_INSTEAD}")
                 for name, text in spec.headers.items()
                 if name.lower() in CREDENTIAL_HEADERS and not VAR.search(text)]
        if _written(spec.url) != spec.url:
            found.append(("http.url", f"a password written in the file: {_INSTEAD}"))
        return found


def _placeholders(value: object) -> list[str]:
    """The names of the ``{{...}}`` in a body's text, in a mapping's values too."""
    if isinstance(value, str):
        return [m.group(1).strip() for m in PLACEHOLDER.finditer(value)]
    if isinstance(value, dict):
        return [name for item in value.values() for name in _placeholders(item)]
    if isinstance(value, list):
        return [name for item in value for name in _placeholders(item)]
    return []


def _content(spec: Request, ctx: FireContext) -> tuple[bytes | None, str | None]:
    """The body to send, its placeholders filled in, and its Content-Type."""
    if spec.body is None:
        return None, None
    values = {"fire_id": ctx.fire_id, "job": ctx.job, "scheduled_at": iso_utc(ctx.scheduled_ms),
              "attempt": str(ctx.attempt), "payload": json.dumps(ctx.payload)}

    def text(value: str) -> str:
        return PLACEHOLDER.sub(lambda m: values[m.group(1).strip()], value)

    def filled(value: Any) -> Any:
        if isinstance(value, str):
            # Exactly "{{payload}}" is the payload itself; in a longer text, its JSON.
            whole = PLACEHOLDER.fullmatch(value)
            return ctx.payload if whole and whole.group(1).strip() == "payload" else text(value)
        if isinstance(value, dict):
            return {key: filled(item) for key, item in value.items()}
        return [filled(item) for item in value] if isinstance(value, list) else value

    if isinstance(spec.body, str):
        return text(spec.body).encode(), "text/plain; charset=utf-8"
    return json.dumps(filled(spec.body)).encode(), "application/json"


def _fire_headers(ctx: FireContext) -> dict[str, str]:
    """The fire's identity, and its trace context (``traceparent``) when it is traced."""
    values = (ctx.fire_id, ctx.job, ctx.fire_id, iso_utc(ctx.scheduled_ms), str(ctx.attempt))
    return {**dict(zip(FIRE_HEADERS, values, strict=True)), **(ctx.trace or {})}


def _judged(spec: Request, answer: Answer) -> Result:
    """ok for an expected status, else failed; the output is the status line and the
    tail of the body, within OUTPUT_CAP."""
    room = max(OUTPUT_CAP - len(answer.status_line) - 1, 0)
    output = f"{answer.status_line}\n{answer.tail[-room:] if room else ''}".rstrip("\n")
    expected = answer.status in spec.expect if spec.expect else 200 <= answer.status < 300
    if expected:
        return Result("ok", output=output)
    wanted = ", ".join(map(str, spec.expect)) or "2xx"
    error = f"HTTP {answer.status} {answer.reason}".rstrip() + f" (expected {wanted})"
    if 300 <= answer.status < 400 and answer.location:
        error += f": a redirect to {redirect_target(spec.url, answer.location)}, not followed"
    return Result("failed", output=output, error=error)


def _clean(result: Result, spec: Request) -> Result:
    """``result`` with every value of the request's ``${VAR}`` written back as ``${VAR}``:
    an answer that echoes a token must not put it into history."""
    names = {name for text in (spec.url, *spec.headers.values()) for name in VAR.findall(text)}
    # A value of a few characters (a port, a flag) would turn up everywhere and is no secret.
    secrets = sorted(((os.environ[n], n) for n in names if len(os.environ.get(n, "")) >= 4),
                     key=lambda item: -len(item[0]))
    output, error = result.output, result.error
    for value, name in secrets:
        output = output.replace(value, "${%s}" % name)  # noqa: UP031
        error = None if error is None else error.replace(value, "${%s}" % name)  # noqa: UP031
    return result._replace(output=output, error=error)


def _written(url: str) -> str:
    """``url`` as the job file writes it, with a password written in it masked; one
    written as ``${VAR}`` stays (it is no secret)."""
    return url if all(VAR.fullmatch(s) for s in secrets_in(url)) else mask_url(url)


def _header_shown(name: str, text: str) -> str:
    """A header's value as the API shows it: a credential written as such is not shown."""
    if name.lower() in CREDENTIAL_HEADERS and not VAR.search(text):
        return "(written in the file, not shown)"
    return text


KIND = Http()
