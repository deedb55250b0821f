"""``GET``/``HEAD /healthz`` (no auth: for load balancers) and ``GET /metrics`` (Prometheus text)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from ... import __version__
from ..schemas import Health

router = APIRouter(tags=["system"])
metrics_router = APIRouter(tags=["system"])


@router.head("/healthz", include_in_schema=False)
@router.get("/healthz", response_model=Health, summary="Liveness and a few figures")
async def healthz(request: Request) -> Health:
    engine = request.app.state.engine
    return Health(
        status="ok",
        version=__version__,
        preset=engine.config.preset,
        pool=engine.pool.kind,
        workers=engine.pool.workers,
        queue=engine.pool.pending,
        queue_capacity=engine.pool.capacity,
        store_entries=engine.store.stats()["entries"],
        cache_entries=len(engine.cache),
    )


@metrics_router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)
