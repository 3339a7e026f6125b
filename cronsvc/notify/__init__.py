"""Telling people: the channels a job file declares under ``notify:`` (webhook, Slack,
Teams, email, a command) and the one event format they carry.

- :mod:`cronsvc.notify.events`: the event, and the JSON a webhook receives (the one home
  of that wire format);
- :mod:`cronsvc.notify.messages`: the events of the outbox turned into messages, one per
  channel;
- :mod:`cronsvc.notify.channels`: sending one event through one channel, with its secrets
  read from the environment at that moment.
"""
