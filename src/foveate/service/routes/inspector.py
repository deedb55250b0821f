"""``GET /ui``: the inspector page (static files shipped in the package: ``foveate/service/ui``), and
``GET /v1/vlm-models``: the model table its model picker is filled from.

The page is a client of the ``/v1`` routes (upload, select, overlay, mosaic, crops, prompt); nothing here selects.
Its files hold no data, so they are served like ``/healthz`` (the guard's open paths): a browser cannot send a bearer
header when it opens a page, and every request the page makes carries the key typed into it.  Without a key, the
bind policy refuses them to non-loopback clients like every other path."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from ...vlm import list_models, model_row

router = APIRouter(tags=["inspector"])
models_router = APIRouter(prefix="/v1", tags=["prompt"])

#: the page's files and their media types: nothing else is served (no directory listing, no path from the URL)
FILES = {"index.html": "text/html", "app.js": "text/javascript", "app.css": "text/css"}
#: every script, style and image comes from this server (no CDN); pictures arrive as blob: and data: URLs
CSP = (
    "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self' blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


def _file(name: str) -> Response:
    data = (resources.files("foveate.service") / "ui" / name).read_bytes()
    return Response(
        data,
        media_type=f"{FILES[name]}; charset=utf-8",
        headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/ui", include_in_schema=False)
async def page() -> Response:
    return _file("index.html")


@router.get("/ui/app.js", include_in_schema=False)
async def script() -> Response:
    return _file("app.js")


@router.get("/ui/app.css", include_in_schema=False)
async def style() -> Response:
    return _file("app.css")


def example_name(pattern: str) -> str | None:
    """A model name the row matches and resolves to (``claude-opus-4-7*`` -> ``claude-opus-4-7``), or None where the
    pattern is only a family prefix (``claude-*``, ``qwen/qwen3-vl-*``)."""
    name = pattern.rstrip("*")
    if not name or any(c in name for c in "*?[") or name.endswith(("-", "/")):
        return None
    return name if model_row(name).pattern == pattern else None


@models_router.get("/vlm-models", summary="The model table: model names -> the token rule their provider bills by")
async def vlm_models() -> list[dict]:
    """The rows of ``foveate models --json`` (pattern, rule, family, source, read), first match wins, with ``name``:
    a model name the row resolves to (null where the pattern is a family prefix).  Any name the table matches is
    accepted as the prompt and crops routes' ``model``."""
    return [
        {
            "pattern": row.pattern,
            "name": example_name(row.pattern),
            "rule": row.rule,
            "family": row.family,
            "source": row.source,
            "read": row.read,
        }
        for row in list_models()
    ]
