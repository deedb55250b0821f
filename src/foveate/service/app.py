"""The FastAPI application: lifespan (engine start/stop), the request guard, auth, error mapping, routes."""

from __future__ import annotations

import asyncio
import secrets
import time
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..core.errors import (
    ConfigError,
    FoveateError,
    ImageDecodeError,
    ImageTooLargeError,
    QueryError,
    StoreError,
    UnsupportedInputError,
)
from .engine import Busy, Engine
from .metrics import Metrics
from .settings import ServiceSettings

DESCRIPTION = """Encode an image once (`POST /v1/textures`), then select a fixed budget of VLM tokens for
each query (`POST /v1/textures/{id}/select`), with overlays, mosaics, token tensors and crops.  Texture ids
are content hashes: uploading the same image again returns the same id without encoding it again.
Errors are JSON objects whose `detail` says what to do."""

#: foveate's typed errors -> HTTP status (first match wins; order from specific to general)
ERROR_STATUS: tuple[tuple[type[FoveateError], int], ...] = (
    (ImageTooLargeError, 422),
    (ImageDecodeError, 400),
    (UnsupportedInputError, 415),
    (QueryError, 422),
    (ConfigError, 422),  # includes BudgetError
    (StoreError, 503),
    (FoveateError, 400),
)


class PayloadTooLarge(Exception):
    pass


class TextureNotFound(Exception):
    def __init__(self, tid: str) -> None:
        super().__init__(tid)
        self.tid = tid


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
                await _send_json(send_tracked, 413, _too_large(self.limit))
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


def _too_large(limit: int) -> dict:
    return {"detail": f"the request body is over the upload limit of {limit / 2**20:g} MiB; send a smaller "
                      "(downscaled or recompressed) image, or raise the server's --max-upload-mb"}


async def _send_json(send, status: int, body: dict) -> None:
    import json

    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


# ----------------------------------------------------------------------------------------------------------
# Auth

bearer = HTTPBearer(auto_error=False, description="The server's FOVEATE_API_KEY, when it has one.")


async def require_key(request: Request, cred: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    key = request.app.state.settings.api_key
    if key is None:
        return
    if cred is None or not secrets.compare_digest(cred.credentials.encode(), key.encode()):
        raise HTTPException(401, "missing or wrong API key: send 'Authorization: Bearer <key>' with the server's "
                                 "FOVEATE_API_KEY", headers={"WWW-Authenticate": "Bearer"})


# ----------------------------------------------------------------------------------------------------------
# Errors -> JSON with a detail that says what to do


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(FoveateError)
    async def foveate_error(request: Request, exc: FoveateError) -> JSONResponse:
        status = next(code for cls, code in ERROR_STATUS if isinstance(exc, cls))
        headers = {"Retry-After": str(app.state.settings.retry_after)} if status == 503 else None
        return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> JSONResponse:
        app.state.metrics.rejected.labels("queue_full").inc()
        return JSONResponse({"detail": f"the encode queue is full; retry in {exc.retry_after} s"}, status_code=503,
                            headers={"Retry-After": str(exc.retry_after)})

    @app.exception_handler(PayloadTooLarge)
    async def too_large(request: Request, exc: PayloadTooLarge) -> JSONResponse:
        app.state.metrics.rejected.labels("too_large").inc()
        return JSONResponse(_too_large(int(app.state.settings.max_upload_mb * 2**20)), status_code=413)

    @app.exception_handler(TextureNotFound)
    async def not_found(request: Request, exc: TextureNotFound) -> JSONResponse:
        return JSONResponse({"detail": f"no texture {exc.tid}: upload the image with POST /v1/textures (the same "
                                       "image always gets the same id)"}, status_code=404)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in exc.errors()]
        parts = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:5])
        return JSONResponse({"detail": f"invalid request ({parts}); the schema is at /docs", "errors": errors},
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}; the API is listed at /docs"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}; the API is listed at /docs"
        return JSONResponse({"detail": str(detail)}, status_code=exc.status_code, headers=exc.headers)


# ----------------------------------------------------------------------------------------------------------
# The app


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    """The foveate HTTP API.  The engine (store, encode pool, cache) starts with the app's lifespan."""
    from .routes import system, textures

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
    return app


def app_from_env() -> FastAPI:
    """For ``uvicorn --factory foveate.service:app_from_env``: settings from ``FOVEATE_*`` variables."""
    return create_app(ServiceSettings.from_env())
