"""What the web tests share beyond :class:`cronsvc.testing.WebServer`: a token, a job file."""

from __future__ import annotations

from pathlib import Path

import yaml

#: An operator token long enough for any bind.
OPERATOR_TOKEN = "operator-secret-0123456789"


def one_job_file(tmp: Path) -> Path:
    """A job file of one on-demand command job, ``digest``."""
    path = tmp / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {"digest": {"command": ["true"]}}}))
    return path
