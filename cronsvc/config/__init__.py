"""The job file: models, YAML with line numbers, located errors, validate's checks,
reloads. Pure of Redis.
"""
