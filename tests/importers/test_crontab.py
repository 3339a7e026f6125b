"""Crontabs, user and system, read into shell command jobs."""

from __future__ import annotations

import pytest

from cronsvc.importers.crontab import command_name, crontab_jobs, is_system_crontab

USER = r"""# m h dom mon dow command
PATH=/usr/local/bin:/usr/bin:/bin
MAILTO=ops@example.com, dba@example.com
*/5 * * * * /usr/local/bin/poll-queue --once
CRON_TZ=Europe/Berlin
30 2 * * 1-5 cd /srv/app && ./venv/bin/python manage.py clearsessions
TZ=America/New_York
0 9 1 * * date +\%Y-\%m > /tmp/month
MAILTO=""
SHELL=/bin/bash
@daily backup.sh --full
@weekly backup.sh --verify
"""


def test_a_user_crontab_becomes_shell_command_jobs() -> None:
    result = crontab_jobs(USER, "crontab.txt")
    assert result.refused == []
    assert result.document["notify"] == {
        "mail": {"email": {"to": ["ops@example.com", "dba@example.com"],
                           "smtp": "${SMTP_URL}"}}}
    path = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    assert result.jobs == {
        "poll-queue": {"cron": "*/5 * * * *", "shell": True,
                       "command": "/usr/local/bin/poll-queue --once", "env": path,
                       "notify": ["mail"], "description": "crontab.txt:4"},
        "manage": {"cron": "30 2 * * 1-5", "timezone": "Europe/Berlin", "shell": True,
                   "command": "cd /srv/app && ./venv/bin/python manage.py clearsessions",
                   "env": path, "notify": ["mail"], "description": "crontab.txt:6"},
        # TZ= is the zone of the schedule and in the command's environment too; \% is a %.
        "date": {"cron": "0 9 1 * *", "timezone": "America/New_York", "shell": True,
                 "command": "date +%Y-%m > /tmp/month",
                 "env": {**path, "TZ": "America/New_York"}, "notify": ["mail"],
                 "description": "crontab.txt:8"},
        # MAILTO="" stops the mail; SHELL= is the program that runs the line.
        "backup": {"cron": "@daily", "timezone": "America/New_York",
                   "command": ["/bin/bash", "-c", "backup.sh --full"],
                   "env": {**path, "TZ": "America/New_York"}, "description": "crontab.txt:11"},
        "backup-2": {"cron": "@weekly", "timezone": "America/New_York",
                     "command": ["/bin/bash", "-c", "backup.sh --verify"],
                     "env": {**path, "TZ": "America/New_York"},
                     "description": "crontab.txt:12"},
    }
    assert any("set SMTP_URL" in str(n) and n.place == "crontab.txt:3" for n in result.notes)


SYSTEM = """SHELL=/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
17 *\t* * *\troot    cd / && run-parts --report /etc/cron.hourly
0 3 * * * postgres /usr/local/bin/dump-all.sh
"""


def test_a_system_crontab_has_the_user_column() -> None:
    result = crontab_jobs(SYSTEM, "/etc/cron.d/maintenance")
    assert result.document["defaults"] == {"env": {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}}
    assert result.jobs == {
        "cron.hourly": {"cron": "17 * * * *", "shell": True,
                        "command": "cd / && run-parts --report /etc/cron.hourly",
                        "description": "/etc/cron.d/maintenance:3, as user root"},
        "dump-all": {"cron": "0 3 * * *", "shell": True,
                     "command": "/usr/local/bin/dump-all.sh",
                     "description": "/etc/cron.d/maintenance:4, as user postgres"},
    }
    assert any("cron ran these as postgres, root" in n.message for n in result.notes)
    # The same lines read as a user crontab: the user is part of the command.
    assert crontab_jobs(SYSTEM, "mine", system=False).jobs["root"]["command"] == (
        "root    cd / && run-parts --report /etc/cron.hourly")


def test_what_cron_would_not_run_the_same_is_refused_at_its_line() -> None:
    text = "\n".join([
        "@reboot /usr/local/bin/warm-cache",
        "0 * * * * mail -s report ops%body of the mail",
        "61 * * * * true",
        "@fortnightly true",
        "CRON_TZ=Mars/Olympus",
        "0 6 * * * true",
        "CRON_TZ=UTC",
        "0 7 * * * true",
        "0 8 * * *",
    ])
    result = crontab_jobs(text, "tab")
    assert list(result.jobs) == ["true"]
    assert [(n.place, n.message.split(":")[0]) for n in result.refused] == [
        ("tab:1", "@reboot"),
        ("tab:2", "an unescaped '%'"),
        ("tab:3", "'61 * * * *'"),
        ("tab:4", "unknown macro @fortnightly (cronsvc knows @annually, @daily, @hourly, "
                  "@midnight, @monthly, @weekly, @yearly)"),
        ("tab:5", "CRON_TZ=Mars/Olympus"),
        ("tab:6", "CRON_TZ at tab"),
        ("tab:9", "expected 5 time fields, then the command"),
    ]


def test_lines_without_a_zone_are_noted_as_utc_unless_one_is_given() -> None:
    assert any("no CRON_TZ" in n.message for n in crontab_jobs("0 6 * * * true", "t").notes)
    given = crontab_jobs("0 6 * * * true", "t", timezone="Europe/Paris")
    assert given.jobs["true"]["timezone"] == "Europe/Paris"
    assert not any("no CRON_TZ" in n.message for n in given.notes)


@pytest.mark.parametrize(("command", "name"), [
    ("/usr/local/bin/backup.sh --full", "backup"),
    ("cd /srv/app && /usr/bin/python3 bin/report.py --daily", "report"),
    ("test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily )",
     "cron.daily"),
    ("nice -n 10 flock -n /tmp/lock /opt/sync >> /var/log/sync.log 2>&1", "sync"),
    ("FOO=1 node scripts/clean.js", "clean"),
    ("cd /tmp", ""),
])
def test_a_job_is_named_for_what_it_runs(command: str, name: str) -> None:
    assert command_name(command) == name


def test_system_crontabs_are_told_by_their_path() -> None:
    assert is_system_crontab("/etc/crontab") and is_system_crontab("/etc/cron.d/php")
    assert not is_system_crontab("/var/spool/cron/crontabs/alice")
