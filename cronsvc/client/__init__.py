"""The Python API of a running fleet: the Client, the fleet reader and the models it
returns.
"""

# What a Client call raises when Redis cannot answer it (the library's own errors): the web
# answers them with 503 without importing the library.
from cronsvc.store.faults import LIBRARY_ERRORS as OUTAGES

__all__ = ["OUTAGES"]
