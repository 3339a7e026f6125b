"""Prometheus metrics (each process's counters and the fleet's gauges), and OpenTelemetry
traces of a worker's fires."""
