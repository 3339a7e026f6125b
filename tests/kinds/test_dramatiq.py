"""The ``dramatiq`` kind's keys: the broker a URL names, the options cronsvc keeps for
itself, and ``${VAR}`` read when sending, never kept."""

from __future__ import annotations

import pytest

from cronsvc.config.models import parse_config
from cronsvc.errors import ConfigError
from cronsvc.kinds import dramatiq
from cronsvc.secrets import MissingVariable


def job(target: str) -> str:
    return f"jobs:\n  d:\n    every: 1m\n    dramatiq: {target}\n"


@pytest.mark.parametrize(("target", "expected"), [
    ("{actor: a, broker: 'http://x'}",
     "s.yaml:4: jobs.d.dramatiq.broker: 'http://x': expected a broker URL: redis://, "
     "rediss://, amqp:// or amqps://"),
    ("{actor: a, broker: 'redis://x', options: {cronsvc: 1}}",
     "s.yaml:4: jobs.d.dramatiq.options: options may not set cronsvc: it carries the "
     "fire's delivery"),
    ("{broker: 'redis://x'}", "s.yaml:4: jobs.d.dramatiq.actor: missing (required)"),
])
def test_a_bad_target_is_located(target: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(job(target), "s.yaml")
    assert caught.value.problems == [expected]


@pytest.mark.parametrize(("url", "broker"), [
    ("redis://h:6379/0", "redis"), ("rediss://h/1", "redis"), ("AMQP://h", "rabbitmq"),
    ("amqps://u:p@h/v", "rabbitmq"),
])
def test_the_url_names_the_broker(url: str, broker: str) -> None:
    assert dramatiq.broker_of(url) == broker


def test_a_broker_from_the_environment_is_read_when_sending(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config(job("{actor: a, broker: '${DRAMATIQ_TEST_BROKER}'}"), "s.yaml")
    target = config.jobs["d"].dramatiq
    assert target.broker == "${DRAMATIQ_TEST_BROKER}"  # the definition keeps the name only
    monkeypatch.delenv("DRAMATIQ_TEST_BROKER", raising=False)
    with pytest.raises(MissingVariable, match="dramatiq.broker: environment variable "
                                              "DRAMATIQ_TEST_BROKER is not set"):
        dramatiq.broker_for(target.broker)
    monkeypatch.setenv("DRAMATIQ_TEST_BROKER", "ftp://nowhere")
    with pytest.raises(RuntimeError, match="dramatiq.broker: expected a broker URL"):
        dramatiq.broker_for(target.broker)


def test_an_amqp_broker_has_publisher_confirms_and_is_made_once() -> None:
    url = "amqp://guest:guest@127.0.0.1:1/cronsvc-test"  # made without connecting
    made = dramatiq.broker_for(url)
    assert type(made).__name__ == "RabbitmqBroker" and made.confirm_delivery
    assert made.middleware == [] and dramatiq.broker_for(url) is made
