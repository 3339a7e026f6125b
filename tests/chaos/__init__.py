"""Fault injection with a run ledger kept outside Redis (``pytest -m chaos``)."""
