"""The outbox: what the scripts that record an outcome leave for later, and who takes it.

Each script that ends a fire (``lua/ack-8+.lua``, ``lua/fail-14.lua``,
``lua/claim-18.lua``) pushes onto its shard's outbox, in the same call, the events its job
wants told, the job's automatic pause and the jobs its end triggers
(``lua/includes/outbox.lua``), so each exists exactly when the outcome does.

- :mod:`cronsvc.outbox.entries`: an outbox entry, the Python twin of
  ``lua/includes/outbox.lua``;
- :mod:`cronsvc.outbox.router`: each entry read once and handed to the consumers of its
  event; it runs in the notifier, so in every planner and in ``cronsvc notifier``;
- :mod:`cronsvc.outbox.chains`: the ``on_success``/``on_failure`` jobs queued;
- :mod:`cronsvc.outbox.autopause`: a job paused after failures paused on every shard.

The other consumer, the notifications, is :mod:`cronsvc.notify.messages`, a layer above.
"""
