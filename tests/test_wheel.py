"""The built wheel carries the Lua scripts and the dashboard's templates and assets, and
the installed package finds them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cronsvc.store.scripts import load_sources
from tests.support.parts import missing
from tests.support.paths import ROOT


def build_wheel(out: Path) -> Path:
    """Build with pip; offline, fall back to the hatchling installed next to the tests."""
    base = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)]
    attempts = [base, [*base, "--no-build-isolation"]]
    errors = []
    for argv in attempts:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        wheels = list(out.glob("cronsvc-*.whl"))
        if proc.returncode == 0 and wheels:
            return wheels[0]
        errors.append(proc.stderr.strip().splitlines()[-1:] or ["?"])
    missing(f"cannot build a wheel here (no hatchling offline?): {errors}")


def test_installed_wheel_finds_its_scripts(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, capture_output=True, timeout=300)
    code = (
        "import cronsvc.store.scripts as m; "
        "print(m.__file__); print(m.lua_dir()); "
        "print(' '.join(f'{s.name}-{s.numkeys}' for s in m.load_sources().values()))"
    )
    # Run from an empty directory so neither the repo nor its editable install comes first.
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True, timeout=60).stdout.split("\n")
    module, lua, names = out[0], out[1], out[2]
    assert Path(module).is_relative_to(target)
    assert Path(lua) == target / "cronsvc" / "lua"
    assert sorted(names.split()) == sorted(f"{s.name}-{s.numkeys}"
                                           for s in load_sources().values())
    # The pages need nothing from the network: every template and asset is in the wheel.
    web = target / "cronsvc" / "web"
    for part in ("templates/base.html", "templates/jobs.html", "templates/schedule.html",
                 "static/app.js", "static/app.css", "static/layout.css", "static/labels.js",
                 "static/vendor/swagger-ui/swagger-ui-bundle.js",
                 "static/vendor/swagger-ui/swagger-ui.css"):
        assert (web / part).is_file(), part
