"""The HTTP service: ``foveate serve`` (FastAPI on uvicorn) over the texture store.

    from foveate.service import ServiceSettings, create_app
    app = create_app(ServiceSettings(store="textures/", preset="fast"))

Layout: ``settings`` (env vars / flags), ``engine`` (encode pool, single-flight upload, in-memory texture
LRU), ``app`` (lifespan, guard middleware, the routes), ``errors`` (error -> status mapping and handlers), ``deps``
(auth), ``routes/`` (one module per resource), ``schemas`` (pydantic models), ``metrics`` (Prometheus), ``process``
(run a server as a subprocess).  The load test is ``foveate.bench.service``.
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    **{n: ".app" for n in ("app_from_env", "create_app")},
    "ServiceSettings": ".settings",
})
