"""The FastAPI application: lifespan (engine start/stop), the request guard, auth, error mapping, routes."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from .. import __version__
from .deps import require_key
from .engine import Engine
from .errors import PayloadTooLarge, install_error_handlers, too_large_detail
from .metrics import Metrics
from .routes import prompt, system, textures
from .settings import ServiceSettings

DESCRIPTION = """Encode an image once (`POST /v1/textures`), then select a fixed budget of VLM tokens for
each query (`POST /v1/textures/{id}/select`), with overlays, mosaics, token tensors and crops.  Texture ids
are content hashes: uploading the same image again returns the same id without encoding it again.
Errors are JSON objects whose `detail` says what to do."""


# ----------------------------------------------------------------------------------------------------------
# Guard: body size limit, request timeout, request metrics (pure ASGI, so it sees every request)


class Guard:
    def __init__(self, app, settings: ServiceSettings, metrics: Metrics) -> None:
        self.app = app
        self.limit = int(settings.max_upload_mb * 2**20)
        self.timeout = settings.request_timeout
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        state = {"status": 500, "started": False, "received": 0}

        async def send_tracked(message) -> None:
            if message["type"] == "http.response.start":
                state["started"], state["status"] = True, message["status"]
            await send(message)

        async def receive_limited():
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.limit:
                    raise PayloadTooLarge()
            return message

        try:
            length = dict(scope["headers"]).get(b"content-length", b"")
            if length.isdigit() and int(length) > self.limit:
                self.metrics.rejected.labels("too_large").inc()
                await _send_json(send_tracked, 413, too_large_detail(self.limit))
                return
            await asyncio.wait_for(self.app(scope, receive_limited, send_tracked), self.timeout)
        except TimeoutError:
            self.metrics.rejected.labels("timeout").inc()
            if not state["started"]:
                await _send_json(send_tracked, 504, {
                    "detail": f"the request took longer than {self.timeout:g} s and was stopped; retry later (an "
                              "upload that was received is still encoded and stored: the retry then answers 200)"})
        finally:
            route = scope.get("route")
            name = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(scope["method"], name, str(state["status"])).inc()
            self.metrics.latency.labels(scope["method"], name).observe(time.perf_counter() - t0)


async def _send_json(send, status: int, body: dict) -> None:
    import json

    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


# ----------------------------------------------------------------------------------------------------------
# Auth


# ----------------------------------------------------------------------------------------------------------
# Errors -> JSON with a detail that says what to do


# ----------------------------------------------------------------------------------------------------------
# The app


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    """The foveate HTTP API.  The engine (store, encode pool, cache) starts with the app's lifespan."""
    settings = settings or ServiceSettings.from_env()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        import torch

        # here, in the event loop's thread: OpenMP's thread count is per thread, and threads started later
        # (the request and encode pools) inherit the value set last
        torch.set_num_threads(settings.torch_threads)
        engine = await asyncio.to_thread(Engine, settings, metrics)
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
    return app


def app_from_env() -> FastAPI:
    """For ``uvicorn --factory foveate.service:app_from_env``: settings from ``FOVEATE_*`` variables."""
    return create_app(ServiceSettings.from_env())
