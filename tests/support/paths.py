"""Where things are: the checkout, the test data, and the installed ``cronsvc`` command."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# The entry point pip installed beside the interpreter running the tests (any venv).
CRONSVC = Path(sys.executable).parent / "cronsvc"
