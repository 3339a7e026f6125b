"""What runs in the workers of the queues cronsvc dispatches into: the guard that runs
each fire's delivery once and reports its outcome back (:mod:`cronsvc.contrib.guard`),
and its wiring into Celery, RQ, dramatiq and arq, one module each. Each needs its
library (``pip install 'cronsvc[celery]'`` and so on) and nothing else of cronsvc's
roles: it talks to cronsvc's Redis alone (``CRONSVC_REDIS_URL``)."""
