"""The web tests' fixtures: the browser the page tests drive, and a published job file of
one on-demand job (a test module with its own ``config`` or ``client`` uses that instead)."""

from pathlib import Path

import pytest

from cronsvc.client.client import Client
from cronsvc.testing import published
from tests.support.browser import browser  # noqa: F401 - a fixture
from tests.support.web import one_job_file


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return one_job_file(tmp_path)


@pytest.fixture
def client(redis_url: str, config: Path) -> Client:
    return published(redis_url, config)
