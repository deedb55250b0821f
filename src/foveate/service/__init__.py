"""The HTTP service: ``foveate serve`` (FastAPI on uvicorn) over the texture store.

    from foveate.service import ServiceSettings, create_app
    app = create_app(ServiceSettings(store="textures/", preset="fast"))

Layout: ``settings`` (env vars / flags), ``engine`` (encode pool, single-flight upload, in-memory texture
LRU), ``app`` (lifespan, guard middleware, the routes), ``errors`` (error -> status mapping and handlers), ``deps``
(auth), ``routes/`` (one module per resource), ``schemas`` (pydantic models), ``metrics`` (Prometheus), ``process``
(run a server as a subprocess).  The load test is ``foveate.bench.service``.
"""

from .app import app_from_env, create_app
from .settings import ServiceSettings

__all__ = ["ServiceSettings", "app_from_env", "create_app"]
