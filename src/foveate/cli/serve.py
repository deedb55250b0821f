"""``foveate serve``: the HTTP API on uvicorn."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import app, err


@app.command()
def serve(
    host: str | None = typer.Option(
        None,
        "--host",
        help="Address to listen on (default 127.0.0.1; another needs FOVEATE_API_KEY or --allow-public).",
    ),
    port: int | None = typer.Option(None, "--port", help="Port (default 8000)."),
    store: Path | None = typer.Option(
        None, "--store", "-s", help="Texture store folder (default ~/.cache/foveate/store)."
    ),
    preset: str | None = typer.Option(None, "--preset", "-p", help="Encode preset for uploads (default: default)."),
    workers: int | None = typer.Option(None, "--workers", help="Encode workers (default 2)."),
    pool: str | None = typer.Option(None, "--pool", help="Encode pool: thread (default) or process."),
    queue: int | None = typer.Option(None, "--queue", help="Encode jobs that may wait; more answer 503 (default 16)."),
    max_upload_mb: float | None = typer.Option(None, "--max-upload-mb", help="Larger uploads answer 413 (default 32)."),
    max_pixels: int | None = typer.Option(None, "--max-pixels", help="Larger images answer 422 (default 25M)."),
    cache_mb: float | None = typer.Option(
        None, "--cache-mb", help="Decoded textures kept in memory (default 512 MiB)."
    ),
    store_max_mb: float | None = typer.Option(
        None, "--store-max-mb", help="Store cap, LRU eviction (default: the store's saved cap)."
    ),
    request_timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds before a request answers 504 (default 60)."
    ),
    allow_public: bool = typer.Option(
        False, "--allow-public", help="Serve non-loopback clients without FOVEATE_API_KEY (a proxy authenticates)."
    ),
    weights: str | None = typer.Option(
        None,
        "--weights",
        help="Relevance weights of every select: default "
        "(the trained ones foveate ships), handset, or a "
        "file from foveate train.",
    ),
    public_docs: bool = typer.Option(
        False, "--public-docs", help="/docs, /redoc and /openapi.json without the API key."
    ),
    header_timeout: float | None = typer.Option(
        None, "--header-timeout", help="Seconds a connection may take to send a request head (default 10)."
    ),
    max_connections: int | None = typer.Option(
        None,
        "--max-connections",
        help="Open connections at most; "
        "beyond, the longest-idle one is "
        "closed (default: 1000, or the "
        "open-file limit less 256).",
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve the HTTP API (FastAPI on uvicorn): upload once, select per query.  Every flag also reads the
    environment variable FOVEATE_<FLAG> (FOVEATE_STORE, FOVEATE_PRESET, FOVEATE_MAX_UPLOAD_MB, FOVEATE_TIMEOUT,
    ...); flags win.  Only from the environment: FOVEATE_API_KEY (bearer token), FOVEATE_RETRY_AFTER,
    FOVEATE_TORCH_THREADS.  Without an API key only loopback clients are served (unless --allow-public).  Needs the
    'serve' extra (pip install 'foveate\\[serve]')."""
    from ..core.extras import require

    require("serve", "foveate serve")
    from ..service import ServiceSettings, create_app
    from ..service.server import check_listen, check_log_level, run_server
    from ..store import TextureStore

    settings = ServiceSettings.from_env(
        host=host,
        port=port,
        store=store,
        preset=preset,
        workers=workers,
        pool=pool,
        queue=queue,
        max_upload_mb=max_upload_mb,
        max_pixels=max_pixels,
        cache_mb=cache_mb,
        store_max_mb=store_max_mb,
        request_timeout=request_timeout,
        allow_public=allow_public or None,
        public_docs=public_docs or None,
        header_timeout=header_timeout,
        max_connections=max_connections,
        weights=weights,
    )
    settings.check_bind()
    check_listen(settings.host, settings.port)  # a port in use fails here, as one line, before the banner
    check_log_level(log_level)
    from ..weights import load_weights

    load_weights(settings.weights)  # a bad weights file fails here, as one line
    TextureStore(settings.store).close()  # a bad store folder fails here, as one line
    from ..channels.registry import resolve_groups
    from ..core.config import EncodeConfig

    resolve_groups(EncodeConfig(preset=settings.preset))  # an unknown preset fails here, as one line
    auth = "bearer token" if settings.api_key else "none"
    err.print(
        f"foveate serve: http://{settings.host}:{settings.port} (docs at /docs, inspector at /ui), "
        f"store {settings.store}, preset {settings.preset}, weights {settings.weights}, "
        f"{settings.workers} {settings.pool} workers, "
        f"auth {auth}" + ("" if settings.api_key or settings.allow_public else " (loopback clients only)"),
        highlight=False,
    )
    run_server(create_app(settings), settings, log_level)
