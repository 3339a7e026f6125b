"""The ``arq`` kind in a venv without arq (the main one): its jobs load, validate and show,
and a fire of one fails saying what to install; the ids its deliveries go by."""

from __future__ import annotations

import importlib.util
import json
from textwrap import dedent

import pytest

from cronsvc.config.models import parse_config
from cronsvc.errors import ConfigError
from cronsvc.kinds import KINDS, execute
from cronsvc.kinds.arq import job_id, to_json
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import Delivery

GOOD = """\
jobs:
  digest:
    cron: "0 2 * * *"
    arq:
      function: digest
      redis: "redis://:${ARQ_PASSWORD}@arq-redis:6379/0"
      args: [core]
      kwargs: {size: 3}
      options: {expires: 1h}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(dedent(text), "s.yaml")
    return caught.value.problems


def test_an_arq_job_loads_and_shows_its_target_its_password_masked() -> None:
    job = parse_config(GOOD, "s.yaml").jobs["digest"]
    assert job.kind == "arq"
    assert KINDS["arq"].shown(job) == {"arq": {
        "function": "digest", "redis": "redis://:***@arq-redis:6379/0",
        "args": ("core",), "kwargs": {"size": 3}, "options": {"expires": 3600.0}}}


@pytest.mark.parametrize(("was", "line", "problem"), [
    ("kwargs", "kwargs: {cronsvc: 1}",
     "s.yaml:8: jobs.digest.arq.kwargs: may not set cronsvc: 'cronsvc' carries the fire"),
    ("kwargs", "kwargs: {_job_id: x}", "s.yaml:8: jobs.digest.arq.kwargs: may not set _job_id"),
    ("options", "options: {job_id: x}", "s.yaml:9: jobs.digest.arq.options.job_id: "),
    ("options", "options: {expires: soon}", "s.yaml:9: jobs.digest.arq.options.expires: "),
    ("options", "serializer: pickle", "s.yaml:9: jobs.digest.arq.serializer: unknown key"),
])
def test_a_bad_target_is_named_by_its_line_and_key(was: str, line: str, problem: str) -> None:
    text = "\n".join(f"      {line}" if row.startswith(f"      {was}:") else row
                     for row in GOOD.splitlines())
    found = problems(text)
    assert len(found) == 1 and found[0].startswith(problem), found


def test_a_redis_url_is_checked_unless_it_comes_from_a_variable() -> None:
    [found] = problems(GOOD.replace("redis://:${ARQ_PASSWORD}@arq-redis:6379/0", "http://x"))
    assert found.startswith("s.yaml:6: jobs.digest.arq.redis: ")
    assert parse_config(GOOD.replace("redis://:${ARQ_PASSWORD}@arq-redis:6379/0",
                                     "${ARQ_URL}"), "s.yaml").jobs["digest"].kind == "arq"


@pytest.mark.skipif(importlib.util.find_spec("arq") is not None,
                    reason="arq is installed in this venv")
def test_without_arq_a_fire_fails_saying_what_to_install() -> None:
    job = parse_config(GOOD, "s.yaml").jobs["digest"]
    ctx = FireContext(job="digest", fire_id="digest@1000", scheduled_ms=1000, attempt=1)
    outcome = execute(job, ctx)
    assert outcome.status == "failed"
    assert outcome.error == ("RuntimeError: arq jobs need arq on the worker: "
                             "pip install 'cronsvc[arq]'")


def test_the_first_delivery_goes_by_the_fire_id_and_a_retry_by_one_of_its_own() -> None:
    first = Delivery("digest@1000", "digest", 1000, 1, "k")
    assert job_id(first) == "digest@1000"
    assert job_id(Delivery("digest@1000#t1", "digest", 1000, 3, "k")) == "digest@1000#t1~3"


def test_a_job_is_json_and_what_json_cannot_say_is_its_repr() -> None:
    failed = {"r": RuntimeError("no"), "a": ["core"]}
    assert json.loads(to_json(failed)) == {"r": "RuntimeError('no')", "a": ["core"]}
