"""The gateway's ASGI app: the three provider routes (pictures re-planned, then forwarded), everything else under
``/v1/`` forwarded untouched, ``/healthz`` and ``/metrics``.

Per request: read the body (under ``--max-body-mb``), find the latest user turn's pictures (:mod:`.rewrite`; with
``replan_history`` the earlier user turns' pictures too, all planned for the latest turn's text; pictures by URL of
``fetch_hosts`` fetched by :mod:`.fetch`), get each one's texture (:mod:`.cache`: memory, store or one shared
encode; a PDF's document texture likewise), re-plan it for the turn's text under the ``model``'s rule (:mod:`.replan`;
a PDF across its pages: :mod:`.docplan`), forward (:mod:`.upstream`) and
relay the answer as it comes, with ``x-foveate-image-tokens``, ``x-foveate-sent-tokens``, ``x-foveate-cache`` and
``x-foveate-budget``.
A request forwarded as it came (its bytes unchanged) says why in ``x-foveate-passthrough``: ``off`` (the client sent
``x-foveate: off``), ``no-picture``, ``no-text``, ``unknown-model``, ``no-saving``, ``fetch-failed`` (a picture by
URL refused or not fetched); ``error`` where foveate itself failed (logged: the request is not lost for it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
import time
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from starlette.requests import ClientDisconnect
from starlette.responses import Response, StreamingResponse

from .. import __version__
from ..core.config import EncodeConfig
from ..core.errors import DocumentEncryptedError, DocumentTooLongError, ImageError, ImageTooLargeError, QueryError
from ..store import TextureStore
from ..vlm.models import ModelError, model_rule
from ..weights import load_weights
from .cache import EncodeCache
from .docplan import replan_document
from .errors import GatewayGuard, error_response
from .fetch import Fetcher, FetchFailed
from .metrics import GatewayMetrics
from .replan import replan
from .rewrite import DIALECTS, BadBody, Dialect, Slot, Turn, replace
from .settings import GatewaySettings
from .upstream import Upstream, UpstreamTimeout, UpstreamUnreachable, chunks, forward_headers, relay_headers

log = logging.getLogger("foveate.gateway")

ROUTES = {
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
    "/v1/messages": "anthropic",
}


class TooLarge(Exception):
    pass


class Unsupported(Exception):
    """A PDF foveate does not take (password-protected, over the page cap, a page over the pixel limit): the request
    goes on as it came, with ``x-foveate-passthrough: error`` (the provider decides)."""


#: what makes a PDF :class:`Unsupported` rather than a client's mistake
UNSUPPORTED_DOCUMENT = (DocumentEncryptedError, DocumentTooLongError, ImageTooLargeError)


#: seconds the gateway waits for the next bytes of a request's body (a body shorter than its ``Content-Length``
#: answers 408 then, rather than holding the connection until the client gives up)
BODY_IDLE_S = 10.0


class BodyStalled(Exception):
    pass


async def read_body(request: Request, limit: int, idle: float = BODY_IDLE_S) -> bytes:
    """The body, refused past ``limit`` bytes however it is sent (a declared length was checked by the guard), and
    when no byte of it came for ``idle`` seconds (:class:`BodyStalled`)."""
    parts: list[bytes] = []
    size = 0
    stream = request.stream()
    while True:
        try:
            chunk = await asyncio.wait_for(anext(stream), idle)
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise BodyStalled(size) from None
        size += len(chunk)
        if size > limit:
            raise TooLarge()
        parts.append(chunk)
    return b"".join(parts)


def create_app(upstream: str | None = None, settings: GatewaySettings | None = None, **overrides: Any) -> FastAPI:
    """The gateway in front of ``upstream`` (or ``settings.upstream``); ``overrides``: other
    :class:`GatewaySettings` fields.  Mount it in your own ASGI app, or run it with ``foveate gateway``."""
    if settings is None:
        settings = GatewaySettings(upstream=upstream or "", **overrides)
    weights = load_weights("default")
    metrics = GatewayMetrics()
    config = EncodeConfig(preset=settings.preset, max_pixels=settings.max_pixels)
    from ..channels.registry import resolve_groups

    resolve_groups(config)  # an unknown preset fails here, not at the first picture

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        store = await asyncio.to_thread(TextureStore, settings.store)
        app.state.cache = EncodeCache(
            store,
            config,
            settings.workers,
            int(settings.cache_mb * 2**20),
            settings.max_pixels,
            settings.torch_threads,
            on_encode=metrics.encodes.inc,
        )
        app.state.upstream = Upstream(settings.upstream, settings.upstream_timeout)
        app.state.fetcher = (
            Fetcher(settings.fetch_hosts, settings.max_body, settings.fetch_timeout) if settings.fetch_hosts else None
        )
        try:
            yield
        finally:
            await app.state.upstream.aclose()
            if app.state.fetcher is not None:
                await app.state.fetcher.aclose()
            app.state.cache.close()
            store.close()

    app = FastAPI(title="foveate gateway", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.metrics = metrics
    app.add_middleware(GatewayGuard, settings=settings)

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok", "version": __version__, "upstream": settings.upstream}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    async def provider(request: Request) -> Response:
        return await handle(request, DIALECTS[ROUTES[request.url.path]])

    for path in ROUTES:
        app.add_api_route(path, provider, methods=["POST"], include_in_schema=False)

    @app.api_route("/v1/{rest:path}", methods=["GET", "POST", "DELETE"], include_in_schema=False)
    async def passthrough(request: Request) -> Response:
        return await handle(request, None)

    async def handle(request: Request, dialect: Dialect | None) -> Response:
        t0 = time.perf_counter()
        path = request.url.path
        cache: EncodeCache = request.app.state.cache
        info: dict[str, Any] = {"path": path, "method": request.method}
        try:
            raw = await read_body(request, settings.max_body)
        except BodyStalled as exc:
            message = f"the request body stopped after {exc} bytes (nothing for {BODY_IDLE_S:g} s); send all of it"
            return finish(info, t0, error_response(path, 408, message, {"connection": "close"}))
        except ClientDisconnect:  # the client went away mid-body: nobody to answer
            return finish(info, t0, Response(status_code=499))
        except TooLarge:
            return finish(
                info,
                t0,
                error_response(
                    path,
                    413,
                    f"the request body is over the gateway's limit of {settings.max_body_mb:g} MiB; send smaller "
                    "pictures, or raise --max-body-mb",
                    {"connection": "close"},
                ),
            )
        out = raw
        extra: dict[str, str] = {}
        if dialect is not None:
            try:
                out, extra = await rewrite(request, raw, dialect, cache, info)
            except BadBody as exc:
                return finish(info, t0, error_response(path, 400, str(exc)))
            except ImageTooLargeError as exc:
                return finish(info, t0, error_response(path, 413, f"a picture is too large: {exc}"))
            except (ImageError, QueryError) as exc:
                return finish(info, t0, error_response(path, 400, f"a picture or PDF could not be read: {exc}"))
            except Exception as exc:  # foveate's own failure (a full store, a bug): the request goes on as it came
                log.error("re-planning failed, forwarding the request unchanged: %s", type(exc).__name__, exc_info=exc)
                out, extra = raw, said(info, "error")
        t1 = time.perf_counter()
        metrics.added.observe(t1 - t0)
        info["foveate_ms"] = round((t1 - t0) * 1e3, 2)
        up: Upstream = request.app.state.upstream
        try:
            answer = await up.open(request.method, path, request.url.query.encode(), forward(request), out)
        except UpstreamTimeout:
            message = f"the upstream did not answer within {settings.upstream_timeout:g} s"
            return finish(info, t0, error_response(path, 504, message, extra))
        except UpstreamUnreachable as exc:
            message = f"the upstream {settings.upstream} could not be reached ({exc})"
            return finish(info, t0, error_response(path, 502, message, extra))
        info["upstream_ms"] = round((time.perf_counter() - t1) * 1e3, 2)
        headers = relay_headers(answer.headers) + list(extra.items())
        response = StreamingResponse(chunks(answer), answer.status_code)
        response.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        return finish(info, t0, response)

    def forward(request: Request) -> list[tuple[str, str]]:
        return forward_headers(request.headers.items())

    async def rewrite(
        request: Request, raw: bytes, dialect: Dialect, cache: EncodeCache, info: dict[str, Any]
    ) -> tuple[bytes, dict[str, str]]:
        """The body to forward and the headers to add.  The body is ``raw`` itself whenever nothing is replaced."""
        if request.headers.get("x-foveate", "").strip().lower() == "off":
            return raw, said(info, "off")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise BadBody("the request body is not valid JSON") from None
        except RecursionError:
            raise BadBody("the request body's JSON is nested too deeply") from None
        if not isinstance(body, dict):
            raise BadBody("the request body must be a JSON object")
        model = body.get("model")
        if not isinstance(model, str) or not model.strip():
            raise BadBody("the request body needs a string 'model'")
        info["model"], info["stream"] = model, body.get("stream") is True
        turn = dialect.turn(body)
        turns = [turn] if turn is not None else []
        question = turn.question if turn is not None else ""
        if settings.replan_history:
            turns = dialect.earlier(body) + turns
            question = question or dialect.question(body)  # a latest turn of plain text asks too
        fetcher: Fetcher | None = request.app.state.fetcher
        urls = [(k, i, u) for k, t in enumerate(turns) for i, u in t.urls if fetcher is not None and fetcher.listed(u)]
        if not urls and not any(t.slots for t in turns):
            return raw, said(info, "no-picture")
        if not question:
            return raw, said(info, "no-text")
        try:
            rule = model_rule(model)
        except ModelError:
            return raw, said(info, "unknown-model")
        try:
            if urls and fetcher is not None:
                await fetch_pictures(fetcher, turns, urls, info)
            slots = [(k, s) for k, t in enumerate(turns) for s in t.slots]  # (which turn, which picture)
            found = await asyncio.gather(*(texture(cache, s) for _, s in slots))
        except FetchFailed as exc:
            log.info("a picture's fetch failed, forwarding the request unchanged: %s", exc)
            return raw, said(info, "fetch-failed")
        except Unsupported as exc:
            log.info("a document foveate does not take, forwarding the request unchanged: %s", exc)
            return raw, said(info, "error")
        plans = await asyncio.gather(
            *(
                cache.run(replan_document, e.texture, question, rule, dialect, settings.budget, weights)
                if s.document
                else cache.run(replan, e.texture, question, rule, dialect, s.media, settings.budget, weights)
                for e, (_, s) in zip(found, slots)
            )
        )
        hit = all(e.hit for e in found)
        for e in found:
            metrics.cache.labels("hit" if e.hit else "miss").inc()
        image_tokens = sum(p.image_tokens for p in plans)
        sent_tokens = sum(p.sent_tokens for p in plans)
        metrics.image_tokens.inc(image_tokens)
        metrics.sent_tokens.inc(sent_tokens)
        info.update(cache="hit" if hit else "miss", image_tokens=image_tokens, sent_tokens=sent_tokens)
        info["pictures"] = [len(slots), sum(p.pictures for p in plans)]
        extra = {
            "x-foveate-image-tokens": str(image_tokens),
            "x-foveate-sent-tokens": str(sent_tokens),
            "x-foveate-cache": "hit" if hit else "miss",
            "x-foveate-budget": ",".join(str(p.budget) for p in plans),
        }
        info["budget"] = [p.budget for p in plans]
        replacements: dict[int, dict[int, list[dict[str, Any]]]] = {}
        for (k, s), p in zip(slots, plans):
            if p.parts is not None:
                replacements.setdefault(k, {})[s.index] = p.parts
        if not replacements:
            return raw, {**extra, **said(info, "no-saving")}
        for k, done in replacements.items():
            replace(turns[k], done)
        return _dumps(body), extra

    async def fetch_pictures(
        fetcher: Fetcher, turns: list[Turn], urls: list[tuple[int, int, str]], info: dict[str, Any]
    ) -> None:
        """Fetch the pictures given by a listed host's URL; each becomes a slot of its turn."""
        got = await asyncio.gather(*(fetcher.fetch(u) for _, _, u in urls))
        for (k, i, _), (data, media) in zip(urls, got):
            doc = data.startswith(b"%PDF-")
            media = "application/pdf" if doc else media if media.startswith("image/") else "image/png"
            b64 = base64.b64encode(data).decode("ascii")
            turns[k].slots.append(Slot(i, b64, data, media, fetched=True, document=doc))
        info["fetched"] = len(urls)

    async def texture(cache: EncodeCache, slot: Slot):
        """The slot's texture (a PDF's document texture); a fetched picture or PDF that cannot be read (or is too
        large) is a failed fetch; a PDF foveate does not take is :class:`Unsupported`."""
        get = cache.document if slot.document else cache.texture
        try:
            return await get(slot.b64, slot.raw)
        except (ImageError, QueryError) as exc:
            if slot.fetched:
                raise FetchFailed(f"the fetched picture could not be used ({exc})") from None
            if slot.document and isinstance(exc, UNSUPPORTED_DOCUMENT):
                raise Unsupported(str(exc)) from None
            raise

    def said(info: dict[str, Any], reason: str) -> dict[str, str]:
        metrics.passthrough.labels(reason).inc()
        info["passthrough"] = reason
        return {"x-foveate-passthrough": reason}

    def finish(info: dict[str, Any], t0: float, response: Response) -> Response:
        route = info["path"] if info["path"] in ROUTES else "other"
        metrics.requests.labels(route, str(response.status_code)).inc()
        if settings.log_requests:
            info.update(status=response.status_code, ms=round((time.perf_counter() - t0) * 1e3, 2), time=time.time())
            sys.stderr.write(json.dumps(info) + "\n")
            sys.stderr.flush()
        return response

    return app


def _dumps(body: dict[str, Any]) -> bytes:
    """The re-planned body as UTF-8 JSON; a string with a lone surrogate (which JSON's ``\\ud800`` escapes carry and
    UTF-8 cannot) goes as the escape the client sent."""
    text = json.dumps(body, ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(body).encode()


def app_from_env() -> FastAPI:
    """For ``uvicorn --factory foveate.gateway:app_from_env``: settings from ``FOVEATE_*`` variables."""
    return create_app(settings=GatewaySettings.from_env())
