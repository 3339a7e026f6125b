"""Processes on one machine: `cronsvc up`, the embedded redis-server, signals, logging."""
