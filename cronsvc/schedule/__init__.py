"""When a job fires: cron fields, expansion into instants (the DST rule), words, one-
off times. Pure.
"""
