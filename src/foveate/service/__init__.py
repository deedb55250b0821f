"""The HTTP service: ``foveate serve`` (FastAPI on uvicorn) over the texture store.

    from foveate.service import ServiceSettings, create_app
    app = create_app(ServiceSettings(store="textures/", preset="fast"))

Layout: ``settings`` (env vars / flags), ``engine`` (encode pool, single-flight upload, in-memory texture
LRU), ``app`` (lifespan, the routes), ``guard`` (what every request passes first: bind policy, key, per-route body
limits, timeout -- a new route declares its body limit with ``guard.body_limit``), ``errors`` (error -> status
mapping and handlers), ``deps`` (the key as an OpenAPI security scheme), ``routes/`` (one module per resource),
``schemas`` (pydantic models), ``metrics`` (Prometheus), ``server`` (uvicorn with a head deadline and a
connection cap), ``logs`` (repeated log lines rate-limited), ``process`` (run a server as a subprocess).  The
load test is ``foveate.bench.service``; the threat model is docs/security.md.  Needs the ``serve`` extra
(``pip install 'foveate[serve]'``): importing this package without it raises
:class:`~foveate.core.errors.MissingExtraError`, which says so.
"""

from .._lazy import lazy_exports
from ..core.extras import require

require("serve", "foveate.service")

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{n: ".app" for n in ("app_from_env", "create_app")},
        "ServiceSettings": ".settings",
    },
)
