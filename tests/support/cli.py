"""What the CLI tests ask of a finished command: its output, or its one error line."""

from __future__ import annotations

from click.testing import Result


def ok(result: Result) -> str:
    """The output of a command that succeeded."""
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result.stdout


def error_line(result: Result, code: int) -> str:
    """The one line on stderr of a failed command (and no traceback)."""
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]
