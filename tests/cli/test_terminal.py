"""What the CLI prints cannot take over the terminal: text from outside (a job's output and
error, notes, actors, worker and job names, schedule ids) shows its control and bidi
characters as escapes, on stdout and stderr; ``--json`` keeps them exactly."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import yaml
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.cli.term import printable
from cronsvc.client.client import Client
from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.testing import Fleet, history
from tests.support.cli import error_line, ok
from tests.support.paths import CRONSVC, ROOT
from tests.support.wait import wait_for

K = Keys()
Invoke = Callable[..., Result]
# A terminal retitles its window (OSC ... BEL) and clears the screen (CSI 2J); the override
# makes what follows read backwards.
TAKEOVER = "\x1b]0;TITLE\x07\x1b[2J"
SHOWN = r"\x1b]0;TITLE\x07\x1b[2J"
BIDI = "\u202e"
# What a terminal obeys rather than shows, but the newline and tab that lay text out.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: str) -> str:
    """``text``, once it is known to hold nothing a terminal would obey."""
    assert not RAW.search(text), repr(text)
    return text


# -- the rule --------------------------------------------------------------------------------
def test_printable_shows_controls_as_escapes_and_keeps_the_layout() -> None:
    assert printable("a\x1b[2Jb\x07\x00") == r"a\x1b[2Jb\x07\x00"
    assert printable("ok\rFAILED") == r"ok\x0dFAILED"  # no overwriting what was printed
    assert printable("us\x1f del\x7f c1\x80\x9b\x9f nbsp\xa0é") == (
        "us\\x1f del\\x7f c1\\x80\\x9b\\x9f nbsp\xa0é")
    # The explicit bidi controls; a mark (U+200F) only sets a direction and stays.
    assert printable("a\u202eb\u202a\u2066c\u2069\u200f") == (
        "a\\u202eb\\u202a\\u2066c\\u2069\u200f")
    assert printable("line 1\n\tline 2\n") == "line 1\n\tline 2\n"
    assert printable("one\nline\there", cell=True) == r"one\x0aline\x09here"
    assert printable("C:\\x1b ↳ …") == "C:\\x1b ↳ …"  # shown once, it shows the same again
    assert printable(printable(TAKEOVER)) == SHOWN


def test_every_line_the_cli_prints_goes_through_the_terminal_module() -> None:
    """One home: a command that printed with click.echo or print would skip the rule."""
    home = ROOT / "cronsvc" / "cli"
    direct = []
    for path in sorted(home.glob("*.py")):
        if path.name == "term.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr in ("echo", "secho")
                     and isinstance(node.func.value, ast.Name) and node.func.value.id == "click")
                    or (isinstance(node.func, ast.Name) and node.func.id == "print")):
                direct.append(f"{path.name}:{node.lineno}")
    assert direct == []


# -- a real worker's run, shown by the installed command ---------------------------------------
def run_cli(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CRONSVC_REDIS_URL=fleet.redis_url, CRONSVC_CONFIG=str(fleet.config))
    done = subprocess.run([str(CRONSVC), *args], cwd=fleet.tmp, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=60)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


@pytest.mark.slow
def test_a_runs_output_error_and_worker_show_escaped_and_exact_in_json(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    # printf's octal escapes: ESC, BEL, then U+202E, a tab, C1 CSI (UTF-8) and DEL.
    script = r"printf '\033]0;TITLE\007\033[2Jleft\342\200\256right\t\302\233\177\n'"
    jobs = {"noisy": {"cron": "0 0 1 1 *", "command": ["sh", "-c", script]},
            "failing": {"cron": "0 0 1 1 *", "call": "tests.support.jobs:fail",
                        "kwargs": {"message": f"{TAKEOVER}{BIDI}gnilaf"}}}
    worker = f"w{BIDI}1\x1b]0;W\x07"
    fleet = Fleet(tmp_path, redis_url, jobs)
    with fleet.running(worker, planner=False):
        noisy, failing = fleet.trigger("noisy"), fleet.trigger("failing")
        wait_for(lambda: history(r, "noisy") and any(
            h["status"] == "dead" for h in history(r, "failing")),
            timeout=30, message="both runs to be recorded, the failing one dead")
        status = shown(run_cli(fleet, "status").stdout)
        assert r"w\u202e1\x1b]0;W\x07" in status.split("workers:", 1)[1]

    output = f"{TAKEOVER}left{BIDI}right\t\x9b\x7f\n"
    view = json.loads(run_cli(fleet, "show", noisy, "--json").stdout)
    assert (view["attempts"][0]["output"], view["attempts"][0]["worker"]) == (output, worker)
    text = shown(run_cli(fleet, "show", noisy).stdout)
    assert f"    {SHOWN}left\\u202eright\t\\x9b\\x7f" in text.splitlines()  # a tab lays it out
    assert r"attempt 1: ok on w\u202e1\x1b]0;W\x07 " in text

    error = f"RuntimeError: {TAKEOVER}{BIDI}gnilaf"
    records = json.loads(run_cli(fleet, "history", "failing", "--json").stdout)
    assert [h["reason"] for h in records] == [f"no attempts left: {error}", error]
    rows = shown(run_cli(fleet, "history", "failing").stdout).splitlines()
    # The failed attempt, then the dead line it caused.
    assert rows[1].startswith(f"{failing}  failed ") and rows[2].startswith("  ↳ ")
    assert rows[1].endswith(f"  RuntimeError: {SHOWN}\\u202egnilaf")
    assert rows[2].endswith(f"no attempts left: RuntimeError: {SHOWN}\\u202egnilaf")
    text = shown(run_cli(fleet, "show", failing).stdout)
    assert f"(RuntimeError: {SHOWN}\\u202egnilaf)" in text


# -- notes, actors, names and ids read from Redis ----------------------------------------------
@pytest.fixture
def cli(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """`cronsvc ARGS` in-process, as an operator whose login name is hostile too."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {
        "tick": {"cron": "*/10 * * * * *", "command": ["true"],
                 "description": f"ticks{TAKEOVER}"}}}))
    Client(redis_url, config=str(path)).publish_config()
    env = {"CRONSVC_REDIS_URL": redis_url, "CRONSVC_CONFIG": str(path),
           "LOGNAME": f"eve{BIDI}", "USER": f"eve{BIDI}"}
    return lambda *args: CliRunner().invoke(main, list(args), env=env)


def test_a_note_and_an_actor_show_escaped_in_ls_and_audit_and_exact_in_json(
        cli: Invoke) -> None:
    note = f"{TAKEOVER}{BIDI}db\x9b\x7f\tx"
    assert "paused tick since " in shown(ok(cli("pause", "tick", "--note", note)))
    (row,) = shown(ok(cli("audit"))).splitlines()[1:]
    assert r"cli:eve\u202e  pause" in row and f"{SHOWN}\\u202edb\\x9b\\x7f\\x09x" in row
    (tick,) = shown(ok(cli("ls"))).splitlines()[1:]
    assert "yes: since " in tick and tick.endswith(f"ticks{SHOWN}")  # from the job file
    wide = shown(ok(cli("ls", "--wide")))  # where notes are cut to a line, the tab is a space
    assert f"{SHOWN}\\u202edb\\x9b\\x7f x  ticks{SHOWN}" in wide
    for args in (["audit", "--json"], ["ls", "--json"]):
        text = ok(cli(*args))  # json.dumps escapes them all: nothing to show differently
        assert text.isascii() and not RAW.search(text), args
    (entry,) = json.loads(ok(cli("audit", "--json")))
    assert (entry["actor"], entry["note"]) == (f"cli:eve{BIDI}", note)
    (job,) = json.loads(ok(cli("ls", "--json")))
    assert job["pause_note"] == note


def test_job_names_fire_ids_and_schedule_ids_from_redis_show_escaped(
        cli: Invoke, r: redis.Redis) -> None:
    # Whoever can write to Redis can name things as they like: a job beside tick...
    hostile = f"ti{BIDI}ck"
    r.hset(K.jobs, hostile, r.hget(K.jobs, "tick"))
    r.hset(K.specs, hostile, r.hget(K.specs, "tick"))
    names = [line.split()[0] for line in shown(ok(cli("ls"))).splitlines()[1:]]
    assert names == ["tick", r"ti\u202eck"]
    # ...named in the error line of a typo...
    assert shown(error_line(cli("pause", "tik"), 1)) == (
        r"unknown job 'tik'; did you mean tick, ti\u202eck?")
    # ...a fire of it among the dead: no fire id (a job name holds no such character), so
    # left out of the listing and named on stderr, escaped...
    r.zadd(K.dead, {fire_id(hostile, 1000): 2000})
    dead = cli("dead")
    assert shown(ok(dead)) == "no dead fires\n"
    assert r"cron:dead 'ti\u202eck@1000': not a fire id" in shown(dead.stderr)
    assert json.loads(ok(cli("dead", "--json"))) == []
    # ...and a schedule stored under an id the CLI would refuse, with an actor it takes.
    assert ok(cli("schedule", "add", "s1", "--job", "tick", "--every", "1h",
                  "--actor", TAKEOVER)) == "created s1\n"
    sid = f"s{BIDI}1\x1b]0;X\x07"
    r.hset(K.schedules, sid, r.hget(K.schedules, "s1"))
    rows = shown(ok(cli("schedule", "ls"))).splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["s1", r"s\u202e1\x1b]0;X\x07"]
    assert all(row.endswith(f"by {SHOWN}") for row in rows)
    assert f"by {SHOWN} (rev" in shown(ok(cli("schedule", "show", "s1")))
    listed = json.loads(ok(cli("schedule", "ls", "--json")))["schedules"]
    assert [(s["id"], s["actor"]) for s in listed] == [("s1", TAKEOVER), (sid, TAKEOVER)]
