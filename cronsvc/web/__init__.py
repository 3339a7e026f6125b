"""The dashboard and the HTTP API (``cronsvc web``), both built on :class:`cronsvc.Client`.

- :mod:`cronsvc.web.app`: the ASGI app, its error replies and the static files;
- :mod:`cronsvc.web.middleware`: what every request meets first (its Host, its size, who
  is asking, CSRF) and the headers every response carries;
- :mod:`cronsvc.web.security`: who is asking, and CSRF; :mod:`cronsvc.web.tokens`: the
  tokens; :mod:`cronsvc.web.sessions`: browser sessions; :mod:`cronsvc.web.hosts`: the
  names the server answers to;
- :mod:`cronsvc.web.api`: ``/api/v1``, JSON with pydantic models (:mod:`cronsvc.web.models`);
- :mod:`cronsvc.web.pages`: server-rendered pages (Jinja2 templates, plain JavaScript),
  and :mod:`cronsvc.web.signin` signing in and out;
- :mod:`cronsvc.web.server`: serving it with uvicorn, as :mod:`cronsvc.web.settings` says.
"""
