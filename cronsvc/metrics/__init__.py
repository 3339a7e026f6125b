"""Prometheus metrics: each process's counters and the fleet's gauges."""
