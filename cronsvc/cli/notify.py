"""``cronsvc notify``: the channels of the job file's ``notify:`` section."""

from __future__ import annotations

import click

from cronsvc.cli.options import config_option, config_path, friendly
from cronsvc.cli.term import echo


@click.group()
def notify() -> None:
    """The notification channels of the job file."""


@notify.command("test")
@click.argument("channel")
@config_option
@friendly
def test(channel: str, config: str | None) -> None:
    """Send a sample event through CHANNEL, to check it before relying on it."""
    import time

    from cronsvc.config.models import load_config
    from cronsvc.errors import CronsvcError, did_you_mean
    from cronsvc.notify.channels import send
    from cronsvc.notify.events import sample

    path = config_path(config)
    loaded = load_config(path)
    found = loaded.notify.get(channel)
    if found is None:
        known = sorted(loaded.notify)
        hint = did_you_mean(channel, known) or (
            f"; the file declares {', '.join(known)}" if known else
            f"; {path} has no notify: section")
        raise CronsvcError(f"unknown channel {channel!r}{hint}")
    echo(send(channel, found, sample(time.time_ns() // 1_000_000)))
