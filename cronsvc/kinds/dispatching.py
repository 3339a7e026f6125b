"""What every kind that hands a fire to another system shares (``celery``, ``rq``,
``dramatiq``, ``arq``): how its target is shown, and what ``cronsvc validate`` warns of.
Each sends through :func:`cronsvc.run.dispatch.dispatch`; see docs/dispatch.md."""

from __future__ import annotations

from typing import Any, ClassVar

from cronsvc.kinds.kind import Kind
from cronsvc.secrets import VAR, mask_url, netloc_parts


class Dispatching(Kind):
    """A kind whose job is one key holding its target (``celery: {...}``)."""

    #: The target's fields that hold a URL (a broker's, a Redis server's).
    url_fields: ClassVar[tuple[str, ...]] = ()

    def shown(self, job: Any) -> dict[str, Any]:
        target = getattr(job, self.key).model_dump(exclude_defaults=True)
        for field in self.url_fields:
            if target.get(field):
                target[field] = mask_url(target[field])
        return {self.key: target}

    def warnings(self, job: Any) -> list[tuple[str, str]]:
        target = getattr(job, self.key)
        out = []
        for field in self.url_fields:
            url = getattr(target, field, None) or ""
            _, password, _ = netloc_parts(url.partition("://")[2].partition("/")[0])
            if password and not VAR.fullmatch(password):
                out.append((f"{self.key}.{field}", "a password written in the file: write "
                            "${NAME} instead and set NAME in the workers' environment, so "
                            "the secret stays out of the file and its history"))
        if target.wait and job.timeout is None:
            out.append((self.key, "no timeout: a fire whose outcome never comes back (its "
                        "task's worker died) holds a slot and its lease for ever; set "
                        "timeout, longer than the task's longest run"))
        return out
