"""The FastAPI application: lifespan (engine start/stop), the request guard (``guard``: bind policy, auth, body
limits, timeout), error mapping, routes."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from .. import __version__
from .deps import require_key
from .engine import Engine
from .errors import install_error_handlers
from .guard import Guard
from .logs import rate_limit_logs
from .metrics import Metrics
from .routes import inspector, prompt, system, textures
from .settings import ServiceSettings

DESCRIPTION = """Encode an image once (`POST /v1/textures`), then select a fixed budget of VLM tokens for
each query (`POST /v1/textures/{id}/select`), with overlays, mosaics, token tensors and crops.  Texture ids
are content hashes: uploading the same image again returns the same id without encoding it again.
Errors are JSON objects whose `detail` says what to do."""


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    """The foveate HTTP API.  The engine (store, encode pool, cache) starts with the app's lifespan."""
    settings = settings or ServiceSettings.from_env()
    from ..weights import load_weights

    weights = load_weights(settings.weights)  # once: a missing or bad weights file fails the start, not a select
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        import torch

        # here, in the event loop's thread: OpenMP's thread count is per thread, and threads started later
        # (the request and encode pools) inherit the value set last
        torch.set_num_threads(settings.torch_threads)
        rate_limit_logs()  # however the app was started: repeated identical log lines are summarised
        engine = await asyncio.to_thread(Engine, settings, metrics, weights)
        app.state.engine = engine
        try:
            yield
        finally:
            engine.close()

    app = FastAPI(title="foveate", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.metrics = metrics
    app.add_middleware(Guard, settings=settings, metrics=metrics)
    install_error_handlers(app)
    app.include_router(system.router)
    app.include_router(system.metrics_router, dependencies=[Depends(require_key)])
    app.include_router(textures.router, dependencies=[Depends(require_key)])
    app.include_router(prompt.router, dependencies=[Depends(require_key)])
    app.include_router(inspector.models_router, dependencies=[Depends(require_key)])
    app.include_router(inspector.router)  # the page's static files: open paths of the guard, like /healthz
    return app


def app_from_env() -> FastAPI:
    """For ``uvicorn --factory foveate.service:app_from_env``: settings from ``FOVEATE_*`` variables."""
    return create_app(ServiceSettings.from_env())
