"""A ``/metrics`` page as samples keyed by name and labels."""

from __future__ import annotations

import urllib.request

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    """Every sample served on ``http://127.0.0.1:{port}/metrics``."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels``, or None."""
    return samples.get((name, frozenset(labels.items())))
