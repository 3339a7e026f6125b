"""``project/`` is a user's project that the plugin test runs with pytest of its own:
its test needs the plugin's fixtures, so this run does not collect it."""

collect_ignore = ["project"]
