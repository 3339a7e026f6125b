"""Benchmarks of cronsvc: ``make bench`` runs them all and writes ``bench/REPORT.md``."""
