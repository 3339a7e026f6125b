"""``cronsvc validate`` shows every problem of a file in one run: the errors of the jobs
that do not check, beside the warnings and the ``--imports`` findings of those that do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cronsvc.testing.children import child_env

FILE = """\
jobs:
  broken:
    cron: "not a cron"
    command: ["true"]
  never:
    cron: "0 0 31 2 *"
    command: ["true"]
  shelly:
    cron: "0 3 * * *"
    call: "os:system"
    args: ["ls"]
  missing:
    cron: "0 4 * * *"
    call: "nosuchmodule:run"
"""


def validate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "s.yaml").write_text(FILE)
    return subprocess.run([sys.executable, "-m", "cronsvc", "validate", "s.yaml", *args],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                          timeout=60)


def test_errors_warnings_and_imports_are_shown_in_one_run(tmp_path: Path) -> None:
    done = validate(tmp_path, "--imports")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "s.yaml:3: jobs.broken.cron: 'not a cron': expected 5 fields (6 with seconds first), "
        "got 3",
        "s.yaml:14: jobs.missing.call: cannot import nosuchmodule:run: ModuleNotFoundError: "
        "No module named 'nosuchmodule'",
        "s.yaml:6: warning: jobs.never.cron: '0 0 31 2 *' never fires (no fire in the next "
        "9 years)",
        "s.yaml:10: warning: jobs.shelly.call: 'os:system' can run any program or code "
        "(no shell: true needed): call a function of your own instead",
    ], done.stderr


def test_json_and_strict_say_the_same_at_once(tmp_path: Path) -> None:
    found = json.loads(validate(tmp_path, "--json").stdout)
    assert found["jobs"] is None
    assert [e.split(":")[1] for e in found["errors"]] == ["3"]
    assert [w.split(":")[1] for w in found["warnings"]] == ["6", "10"]
    strict = validate(tmp_path, "--strict")
    assert strict.returncode == 1
    assert [line.split(":")[1] for line in strict.stderr.splitlines()] == ["3", "6", "10"]
    assert "warning" not in strict.stderr


def test_an_unquoted_cron_is_told_to_be_quoted_at_its_line(tmp_path: Path) -> None:
    said = []
    for name, text in {"block": "jobs:\n  tick:\n    command: [\"true\"]\n"
                                "    cron: */5 * * * *   # every 5 minutes\n",
                       "flow": "jobs:\n  tick: {cron: @daily, command: [\"true\"]}\n"}.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        done = subprocess.run([sys.executable, "-m", "cronsvc", "validate", f"{name}.yaml"],
                              cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 1
        said.append(done.stderr)
    assert said == [
        "block.yaml:4: YAML syntax error: expected alphabetic or numeric character, but found "
        "'/' (quote a value starting with *, or YAML reads an alias: cron: \"*/5 * * * *\")\n",
        "flow.yaml:2: YAML syntax error: found character '@' that cannot start any token "
        "(quote a value starting with @, YAML reserves @: cron: \"@daily\")\n"]
