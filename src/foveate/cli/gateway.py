"""``foveate gateway``: foveate in front of an OpenAI- or Anthropic-compatible VLM API (uvicorn)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import app, err


@app.command()
def gateway(
    upstream: str | None = typer.Option(
        None, "--upstream", help="The provider's base URL, e.g. https://api.openai.com (FOVEATE_UPSTREAM)."
    ),
    host: str | None = typer.Option(
        None,
        "--host",
        help="Address to listen on (default 127.0.0.1; another needs FOVEATE_API_KEY or --allow-public).",
    ),
    port: int | None = typer.Option(None, "--port", help="Port (default 8000)."),
    store: Path | None = typer.Option(
        None, "--store", "-s", help="Texture store folder (default ~/.cache/foveate/store)."
    ),
    budget: str | None = typer.Option(
        None,
        "--budget",
        "-b",
        help="Tokens selected per picture (default 273), or 'auto': per picture, the smallest of 64, 144, 273, 576 "
        "whose plan keeps the likely answer lines legible (273 without any).",
    ),
    preset: str | None = typer.Option(None, "--preset", "-p", help="Encode preset of the pictures (default: default)."),
    workers: int | None = typer.Option(None, "--workers", help="Encode threads (default 2)."),
    max_body_mb: float | None = typer.Option(None, "--max-body-mb", help="Larger bodies answer 413 (default 32)."),
    max_pixels: int | None = typer.Option(None, "--max-pixels", help="Larger pictures answer 413 (default 25M)."),
    cache_mb: float | None = typer.Option(
        None, "--cache-mb", help="Decoded textures kept in memory (default 512 MiB)."
    ),
    upstream_timeout: float | None = typer.Option(
        None, "--upstream-timeout", help="Seconds to wait for the upstream's answer; then 504 (default 600)."
    ),
    allow_public: bool = typer.Option(
        False, "--allow-public", help="Serve non-loopback clients without FOVEATE_API_KEY (a proxy authenticates)."
    ),
    log_requests: bool = typer.Option(
        False,
        "--log-requests",
        help="One JSON line per request on stderr (model, tokens, timings; no content, no keys).",
    ),
    replan_history: bool = typer.Option(
        False,
        "--replan-history",
        help="Re-plan the pictures of earlier user turns too, for the latest turn's question (default: as sent).",
    ),
    fetch_hosts: str | None = typer.Option(
        None,
        "--fetch-hosts",
        help="Comma-separated exact host names whose http(s) picture URLs are fetched and re-planned "
        "(https only; a private address only when listed as that address; default: none is fetched).",
    ),
    fetch_timeout: float | None = typer.Option(
        None, "--fetch-timeout", help="Seconds a picture's fetch may take; then the request passes (default 10)."
    ),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level."),
) -> None:
    """Put foveate in front of an OpenAI- or Anthropic-compatible VLM API: clients change only their base URL
    (OpenAI(base_url="http://127.0.0.1:8000/v1"), Anthropic(base_url="http://127.0.0.1:8000")).  The pictures of each
    request's latest user turn are encoded once (cached by content), selected for the turn's text and re-planned under
    the request's model's token rule; the rest of the body, the client's credentials and the upstream's answers pass
    through.  Every flag also reads FOVEATE_<FLAG>; only from the environment: FOVEATE_API_KEY (clients then send
    'x-foveate-key: <key>').  Needs the 'serve' extra (pip install 'foveate\\[serve]')."""
    from ..core.extras import require

    require("serve", "foveate gateway")
    from ..gateway import GatewaySettings, create_app
    from ..service.server import check_listen, check_log_level, run_server
    from ..store import TextureStore

    settings = GatewaySettings.from_env(
        upstream=upstream,
        host=host,
        port=port,
        store=store,
        budget=budget,
        preset=preset,
        workers=workers,
        max_body_mb=max_body_mb,
        max_pixels=max_pixels,
        cache_mb=cache_mb,
        upstream_timeout=upstream_timeout,
        allow_public=allow_public or None,
        log_requests=log_requests or None,
        replan_history=replan_history or None,
        fetch_hosts=fetch_hosts,
        fetch_timeout=fetch_timeout,
    )
    settings.check_bind()
    check_listen(settings.host, settings.port)
    check_log_level(log_level)
    TextureStore(settings.store).close()  # a bad store folder fails here, as one line
    auth = "x-foveate-key" if settings.api_key else "none"
    err.print(
        f"foveate gateway: http://{settings.host}:{settings.port} -> {settings.upstream}, store {settings.store}, "
        f"preset {settings.preset}, budget {settings.budget}, auth {auth}"
        + (", earlier turns re-planned" if settings.replan_history else "")
        + (f", fetching pictures from {','.join(settings.fetch_hosts)}" if settings.fetch_hosts else "")
        + ("" if settings.api_key or settings.allow_public else " (loopback clients only)"),
        highlight=False,
    )
    run_server(create_app(settings=settings), settings.server_settings(), log_level)
