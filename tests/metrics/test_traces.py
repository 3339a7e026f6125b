"""When a worker traces: only when the OTEL_* variables ask, and without OpenTelemetry
installed, one warning and the worker runs its fires (the traces themselves:
tests/features/test_traces.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from cronsvc.metrics import traces as tracing
from cronsvc.metrics.traces import traces, wanted
from cronsvc.testing import Fleet, history
from tests.support.wait import wait_for

ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, False),
    ({"OTEL_SERVICE_NAME": "cron"}, False),  # names the service, asks for nothing
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{ENDPOINT}/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, False),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, False),
    ({"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
])
def test_traces_are_on_only_when_the_otel_variables_ask(environ: dict[str, str],
                                                        expected: bool) -> None:
    assert wanted(environ) is expected


def test_a_worker_whose_variables_ask_nothing_has_no_tracing_hook(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert traces("w1", lambda: 0) == []


def test_an_exporter_that_is_not_installed_is_said_and_tracing_is_off(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "nonesuch")
    tracing._tracer.cache_clear()
    try:
        assert traces("w1", lambda: 0) == []
    finally:
        tracing._tracer.cache_clear()
    assert "OTEL_TRACES_EXPORTER: no exporter named 'nonesuch' is installed; tracing is off" \
        in caplog.text


def test_without_opentelemetry_a_traced_worker_warns_once_and_runs(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    # An import path where OpenTelemetry cannot be imported, as on a machine without it.
    missing = tmp_path / "missing" / "opentelemetry"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text(
        "raise ImportError(\"No module named 'opentelemetry'\", name='opentelemetry')\n")
    fleet = Fleet(tmp_path, redis_url, {"report": {"call": "tests.support.jobs:tagged",
                                                   "kwargs": {"path": str(tmp_path / "l"),
                                                              "tag": "a"}}},
                  pythonpath=[missing.parent])
    fleet.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = ENDPOINT
    with fleet.running("w1", planner=False):
        for _ in range(2):
            fire = fleet.trigger("report")
            wait_for(lambda f=fire: any(h["fire"] == f and h["status"] == "ok"  # type: ignore[misc]
                                        for h in history(r, "report")),
                     timeout=30, message=f"{fire} recorded ok")
    log = fleet.log("w1")
    assert log.count("OpenTelemetry is not installed") == 1, log
    assert "pip install 'cronsvc[otel]'" in log and "Traceback" not in log
