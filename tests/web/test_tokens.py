"""One rule for every token's secret, wherever it comes from: stripped, at least 16
characters, no whitespace inside; a bad one is one line naming its variable or its
file:line, and a blank one no longer counts as "a token is set"."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cronsvc.errors import ConfigError
from cronsvc.process.redis_server import free_port
from cronsvc.web.tokens import Token, load_tokens
from tests.support.paths import ROOT

GOOD = "operator-secret-0123456789"


@pytest.mark.parametrize(("environ", "problem"), [
    ({"CRONSVC_WEB_TOKEN": " "}, "CRONSVC_WEB_TOKEN: the secret is blank: set one of at least "
                                 "16 characters, or unset it"),
    ({"CRONSVC_WEB_TOKEN": ""}, "CRONSVC_WEB_TOKEN: the secret is blank: set one of at least "
                                "16 characters, or unset it"),
    ({"CRONSVC_WEB_TOKEN": "x"}, "CRONSVC_WEB_TOKEN: the secret has 1 character; at least 16"),
    ({"CRONSVC_WEB_READ_TOKEN": "reader secret 0123456789"},
     "CRONSVC_WEB_READ_TOKEN: the secret has whitespace inside: use one word"),
])
def test_a_blank_short_or_spaced_secret_of_the_environment_is_refused(
        environ: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_tokens(environ=environ)
    assert refused.value.problems == [problem]


def test_the_token_file_meets_the_same_rule_and_secrets_are_stripped(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("ci operator ci-secret-0123456789\ngrafana read short\n")
    with pytest.raises(ConfigError) as refused:
        load_tokens(str(tokens), environ={})
    assert refused.value.problems == [f"{tokens}:2: the secret has 5 characters; at least 16"]
    assert load_tokens(environ={"CRONSVC_WEB_TOKEN": f"  {GOOD}\n"}) == [
        Token("operator", "operator", GOOD)]


def test_a_blank_token_does_not_open_a_public_address(tmp_path: Path, redis_url: str) -> None:
    config = tmp_path / "schedules.yaml"
    config.write_text("jobs: {}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONSVC_WEB_")}
    env.update(PYTHONPATH=str(ROOT), CRONSVC_WEB_TOKEN=" ")
    done = subprocess.run([sys.executable, "-m", "cronsvc", "web", "--config", str(config),
                           "--redis-url", redis_url, "--host", "0.0.0.0",
                           "--port", str(free_port())],
                          capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stderr.strip().splitlines()) == (1, [
        "CRONSVC_WEB_TOKEN: the secret is blank: set one of at least 16 characters, or unset "
        "it"])
