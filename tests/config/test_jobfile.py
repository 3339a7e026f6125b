"""The one owner of a process's job file: the last good config, reloads, the watch, and the
state 'rejected since T' that the fleet shows until the file reads again."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
import yaml

from cronsvc.config.jobfile import JobFile
from cronsvc.config.models import parse_config
from cronsvc.errors import ConfigError
from tests.support.wait import wait_for


def write(path: Path, jobs: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump({"jobs": jobs}))
    tmp.replace(path)


JOB = {"cron": "* * * * *", "command": ["true"]}


def test_a_broken_file_keeps_the_last_good_one_and_says_so_once_until_it_reads_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.yaml"
    write(path, {"a": JOB})
    owner = JobFile(path)
    assert list(owner.config.jobs) == ["a"] and owner.broken is None
    assert owner.state() == {"path": str(path)}
    assert owner.reload() is None  # unchanged on disk
    path.write_text("jobs:\n  a: {cron: 'nope', command: ['true']}\n")
    with caplog.at_level(logging.ERROR, logger="cronsvc.config"):
        assert owner.reload(force=True) is None
        assert owner.reload(force=True) is None  # the same problems: said once
    assert list(owner.config.jobs) == ["a"]
    assert owner.broken is not None and "jobs.a.cron" in owner.broken.problems[0]
    assert sum("is invalid" in r.message for r in caplog.records) == 1
    state = owner.state()
    assert state["broken"] == {"since": owner.broken.since_ms,
                               "problem": owner.broken.problems[0], "problems": 1}
    write(path, {"a": JOB, "b": JOB})
    fresh = owner.reload()
    assert fresh is not None and list(fresh.jobs) == ["a", "b"] and owner.config is fresh
    assert owner.broken is None and "broken" not in owner.state()


def test_a_file_that_does_not_read_at_start_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("jobs: [")
    with pytest.raises(ConfigError):
        JobFile(path)


def test_a_config_built_in_code_never_changes(tmp_path: Path) -> None:
    config = parse_config(yaml.safe_dump({"jobs": {"a": JOB}}), "code")
    owner = JobFile.fixed(config)
    assert owner.config is config and owner.reload(force=True) is None
    owner.watch(lambda: None)  # nothing to watch: no thread
    assert owner.state() == {"path": "the job file given in code"}


def test_the_watch_tells_of_a_change_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    write(path, {"a": JOB})
    owner = JobFile(path)
    changed = threading.Event()
    owner.watch(changed.set, every=0.05)
    try:
        write(path, {"a": JOB, "b": JOB})
        wait_for(changed.is_set, message="the watch to see the change")
        assert owner.reload() is not None and list(owner.config.jobs) == ["a", "b"]
    finally:
        owner.stop()
