"""Running one fire: the executor, `call` jobs, the watchdog of commands. Pure of
Redis.
"""
