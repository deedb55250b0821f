"""Errors -> JSON with a ``detail`` that says what to do: foveate's typed errors mapped to HTTP statuses, the
service's own (texture not found, body over the route's limit, queue full), and the handlers that answer them."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.errors import (
    ConfigError,
    FoveateError,
    ImageDecodeError,
    ImageTooLargeError,
    QueryError,
    StoreError,
    StoreFullError,
    TextureKindError,
    UnsupportedInputError,
)
from .engine import Busy
from .guard import BodyTooLarge

#: foveate's typed errors -> HTTP status (first match wins; order from specific to general)
ERROR_STATUS: tuple[tuple[type[FoveateError], int], ...] = (
    (ImageTooLargeError, 422),
    (ImageDecodeError, 400),
    (UnsupportedInputError, 415),
    (QueryError, 422),
    (ConfigError, 422),  # includes BudgetError
    (TextureKindError, 422),  # a document's id where the route needs one image
    (StoreFullError, 507),  # the texture alone is over the store cap: a retry cannot help
    (StoreError, 503),
    (FoveateError, 400),
)


#: FastAPI's detail when reading a JSON body failed other than as malformed JSON (bytes that are not UTF-8, nesting
#: deeper than the parser's recursion limit)
BODY_PARSE_ERROR = "There was an error parsing the body"


class TextureNotFound(Exception):
    def __init__(self, tid: str) -> None:
        super().__init__(tid)
        self.tid = tid


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(FoveateError)
    async def foveate_error(request: Request, exc: FoveateError) -> JSONResponse:
        status = next(code for cls, code in ERROR_STATUS if isinstance(exc, cls))
        headers = {"Retry-After": str(app.state.settings.retry_after)} if status == 503 else None
        detail = str(exc)
        if isinstance(exc, StoreFullError):
            detail = (
                f"the texture is {exc.size / 2**20:.1f} MiB, more than the server's whole store cap of "
                f"{exc.cap / 2**20:.1f} MiB, so it cannot be stored; the operator can raise --store-max-mb "
                "(FOVEATE_STORE_MAX_MB), or send a smaller image"
            )
        return JSONResponse({"detail": detail}, status_code=status, headers=headers)

    @app.exception_handler(Busy)
    async def busy(request: Request, exc: Busy) -> JSONResponse:
        app.state.metrics.rejected.labels("queue_full").inc()
        return JSONResponse(
            {"detail": f"the encode queue is full; retry in {exc.retry_after} s"},
            status_code=503,
            headers={"Retry-After": str(exc.retry_after)},
        )

    @app.exception_handler(TextureNotFound)
    async def not_found(request: Request, exc: TextureNotFound) -> JSONResponse:
        return JSONResponse(
            {
                "detail": f"no texture {exc.tid}: upload the image with POST /v1/textures (the same "
                "image always gets the same id)"
            },
            status_code=404,
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in exc.errors()
        ]
        parts = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:5])
        return JSONResponse(
            {"detail": f"invalid request ({parts}); the schema is at /docs", "errors": errors}, status_code=422
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc, BodyTooLarge):
            app.state.metrics.rejected.labels("too_large").inc()
        detail = exc.detail
        if exc.status_code == 400 and detail == BODY_PARSE_ERROR:  # as malformed JSON is: a 422 that says what to do
            msg = "invalid request (body: not JSON this server can read); send one JSON object in UTF-8, the schema "
            return JSONResponse({"detail": msg + "is at /docs"}, status_code=422)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}; the API is listed at /docs"
        elif exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}; the API is listed at /docs"
        return JSONResponse({"detail": str(detail)}, status_code=exc.status_code, headers=exc.headers)
