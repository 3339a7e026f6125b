"""The machine a benchmark ran on, and the Markdown of ``bench/REPORT.md``."""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence

import psutil

from bench.common import Section, redis_server


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> list[tuple[str, str]]:
    """Rows describing the host and the Redis the benchmarks start."""
    with redis_server() as (server, r):
        version = r.info("server")["redis_version"]
        conf = {k: v for k, v in r.config_get("*").items()
                if k in ("appendonly", "appendfsync", "save")}
    persistence = (f"AOF (appendonly {conf['appendonly']}, appendfsync {conf['appendfsync']}), "
                   f"RDB snapshots {'off' if not conf['save'] else conf['save']}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        ("CPU", f"{cpu_model()}, {psutil.cpu_count()} cores"),
        ("memory", f"{psutil.virtual_memory().total / 2**30:.1f} GiB"),
        ("OS", platform.platform()),
        ("Python", sys.version.split()[0]),
        ("Redis", f"redis-server {version} ({server.binary})"),
        ("persistence", persistence),
        ("load average at start (1, 5, 15 min)", load),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(host: Sequence[tuple[str, str]], sections: Sequence[Section], minutes: float,
           command: str) -> str:
    lines = [
        "# cronsvc benchmark report",
        "",
        f"`{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{minutes:.1f} minutes. Other work on the same machine makes timings noisy: "
        "the load average is shown below.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {_cell(v)} |" for k, v in host),
        f"| load average at end | {', '.join(f'{x:.2f}' for x in os.getloadavg())} |",
        "",
        "## Figures",
        "",
        "| figure | value | target | verdict | reference, measured in the same run |",
        "|---|---|---|---|---|",
    ]
    for s in sections:
        for f in s.figures:
            lines.append(f"| {_cell(f.name)} | {_cell(f.value)} | {_cell(f.target)} | "
                         f"{f.verdict} | {_cell(f.reference)} |")
    lines += ["", "## How each figure was measured", ""]
    for s in sections:
        lines += [f"### {s.title}", ""]
        lines += [f"- {note}" for note in s.notes] or ["- (no notes)"]
        lines.append("")
    return "\n".join(lines)
