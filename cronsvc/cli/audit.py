"""``cronsvc audit``: the log of every change made from the CLI, the API and the pages."""

from __future__ import annotations

import click

from cronsvc.cli.ops import connect_client, emit, json_option, operator


@operator("audit")
@click.option("-n", "count", type=click.IntRange(min=1), default=30, show_default=True,
              help="Entries to show, newest first.")
@json_option
def audit(config: str | None, redis_url: str | None, count: int, as_json: bool) -> None:
    """Who paused, resumed, triggered, retried, purged or changed what, and when."""
    client = connect_client(config, redis_url)
    actions = client.audit(limit=count).actions
    now = client.server_ms()

    def human(render: object) -> str:
        from cronsvc.cli import render as r

        if not actions:
            return "no action recorded yet"
        rows = [[r.when(a.at_ms, now), a.actor, a.action, a.target, a.note or "",
                 " ".join(f"{k}={v}" for k, v in a.detail.items())] for a in actions]
        return r.table(["WHEN", "WHO", "ACTION", "TARGET", "NOTE", "DETAIL"], rows)

    emit([a.as_dict() for a in actions], as_json, human)
