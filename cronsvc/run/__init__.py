"""The means of running a fire: its context, what a run reports (outcomes), process
groups, calling a function, sending a request, the watchdog of commands. Which of them a
job uses is its kind's choice (:mod:`cronsvc.kinds`, the layer above). Pure of Redis.
"""
