"""``foveate bench-serve``: load-test a real server subprocess.

1. start ``foveate serve`` on a free loopback port (:class:`ServerProcess`);
2. upload ``images`` generated images (crops of the bundled photo and page, each made distinct);
3. ``clients`` concurrent clients send ``requests`` select requests in all (random texture, query, mode,
   budget), checking every answer;
4. report p50 / p90 / p99 latency, throughput, errors, and the server's resident memory before and after.

``--pools thread,process`` also measures upload (decode + encode + store) throughput per encode pool kind.
The tests call :func:`select_load` directly, on a smaller scale.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
from rich.console import Console
from rich.table import Table

from ..service.process import ServerProcess, _vm_rss
from .common import EXAMPLES


def sample_images(n: int, size: int = 512, seed: int = 0) -> list[bytes]:
    """``n`` distinct PNG images of ``size`` x ``size``: shifted, flipped crops of the bundled photo and page
    with a few seeded random pixels, so every one has its own content hash."""
    from ..core.io import load_image

    rng = np.random.default_rng(seed)
    bases = [load_image(EXAMPLES / "photo.jpg"), load_image(EXAMPLES / "page.png")]
    out = []
    for i in range(n):
        img = bases[i % 2]
        h, w = img.shape[:2]
        side = min(h, w)
        y, x = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
        crop = cv2.resize(img[y : y + side, x : x + side], (size, size), interpolation=cv2.INTER_AREA)
        crop = np.roll(crop, int(rng.integers(0, size)), axis=1)
        if i % 4 >= 2:
            crop = crop[:, ::-1]
        crop = np.ascontiguousarray(crop)
        ys, xs = rng.integers(0, size, 16), rng.integers(0, size, 16)
        crop[ys, xs] = rng.integers(0, 256, (16, 3), dtype=np.uint8)
        ok, buf = cv2.imencode(".png", cv2.cvtColor(crop, cv2.COLOR_RGB2BGR))
        out.append(buf.tobytes())
    return out


def random_select(rng: random.Random, size: tuple[int, int]) -> dict:
    """A random valid select body for an image of ``size`` = (width, height)."""
    w, h = size
    kind = rng.randrange(4)
    body: dict = {"budget": rng.choice([64, 128, 196, 273]), "mode": rng.choice(["quadtree", "topk"])}
    if kind == 0:
        body["points"] = [[rng.uniform(0, w), rng.uniform(0, h)]]
    elif kind == 1:
        x0, y0 = rng.uniform(0, w * 0.7), rng.uniform(0, h * 0.7)
        body["boxes"] = [[x0, y0, x0 + rng.uniform(8, w * 0.3), y0 + rng.uniform(8, h * 0.3)]]
    elif kind == 2:
        body["text"] = rng.choice(["total due", "who signed it?", "the astronaut's face", "invoice date"])
    return body


async def upload_all(url: str, images: list[bytes], clients: int = 4, headers: dict | None = None) -> list[dict]:
    """Upload images concurrently; returns the response documents in order (raises on any non-2xx)."""
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=300, headers=headers) as client:
        sem = asyncio.Semaphore(clients)

        async def one(data: bytes) -> dict:
            async with sem:
                r = await client.post("/v1/textures", content=data, headers={"content-type": "image/png"})
                r.raise_for_status()
                return r.json()

        return list(await asyncio.gather(*(one(d) for d in images)))


async def select_load(
    url: str, textures: list[dict], clients: int, requests: int, seed: int = 0, headers: dict | None = None
) -> dict:
    """``clients`` concurrent clients send ``requests`` random select requests over ``textures`` (upload
    documents).  Every answer is checked (status 200, the right texture, at most ``budget`` tokens, boxes
    inside the image).  A select whose connection drops before any answer (``httpx.ReadError`` /
    ``RemoteProtocolError``: a kept-alive connection the server closed as the client reused it) is sent once more,
    as HTTP clients do with idempotent requests, and counted under ``statuses["retried"]``; a second drop is a
    failure.  Returns latencies (s), status counts, failures, wall seconds."""
    import httpx

    rng = random.Random(seed)
    jobs = []
    for _ in range(requests):
        t = rng.choice(textures)
        jobs.append((t, random_select(rng, (t["width"], t["height"]))))
    latencies: list[float] = []
    select_ms: list[float] = []  # the selection's own timings_ms.total: scoring + selection, in the server
    statuses: Counter = Counter()
    failures: list[str] = []
    it = iter(jobs)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits, headers=headers) as client:

        async def worker() -> None:
            for tex, body in it:
                t0 = time.perf_counter()
                try:
                    try:
                        r = await client.post(f"/v1/textures/{tex['id']}/select", json=body)
                    except (httpx.ReadError, httpx.RemoteProtocolError):
                        statuses["retried"] += 1
                        r = await client.post(f"/v1/textures/{tex['id']}/select", json=body)
                except httpx.HTTPError as exc:
                    statuses["transport"] += 1
                    failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                latencies.append(time.perf_counter() - t0)
                statuses[r.status_code] += 1
                problem = _check_selection(r, tex, body)
                if problem:
                    failures.append(problem)
                else:
                    select_ms.append(r.json()["timings_ms"]["total"])

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    return {
        "latencies": latencies,
        "select_ms": select_ms,
        "statuses": dict(statuses),
        "failures": failures,
        "seconds": wall,
    }


def _check_selection(r, tex: dict, body: dict) -> str | None:
    if r.status_code != 200:
        return f"{r.status_code}: {r.text[:200]}"
    doc = r.json()
    if doc["texture_id"] != tex["id"]:
        return f"answer for texture {doc['texture_id']}, asked {tex['id']}"
    if not 0 < doc["num_tokens"] <= body["budget"] or len(doc["tokens"]) != doc["num_tokens"]:
        return f"{doc['num_tokens']} tokens for budget {body['budget']}"
    for t in doc["tokens"]:
        x0, y0, x1, y1 = t["box"]
        if not (0 <= x0 < x1 <= tex["width"] and 0 <= y0 < y1 <= tex["height"]):
            return f"token box {t['box']} outside the {tex['width']}x{tex['height']} image"
    return None


def summarize(load: dict) -> dict:
    lat = np.array(load["latencies"]) * 1000.0
    n = len(lat)
    return {
        "requests": n + load["statuses"].get("transport", 0),
        "errors": len(load["failures"]),
        "statuses": {str(k): v for k, v in load["statuses"].items()},
        "seconds": round(load["seconds"], 3),
        "throughput_rps": round(n / load["seconds"], 1) if load["seconds"] else None,
        "p50_ms": round(float(np.percentile(lat, 50)), 2) if n else None,
        "p90_ms": round(float(np.percentile(lat, 90)), 2) if n else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 2) if n else None,
        "max_ms": round(float(lat.max()), 2) if n else None,
        "select_ms_p50": round(float(np.median(load["select_ms"])), 3) if load["select_ms"] else None,
    }


def tree_rss_bytes(pid: int) -> int | None:
    """Resident memory of a process and all its descendants (Linux /proc), or None."""
    total, todo, seen = 0, [pid], set()
    try:
        while todo:
            p = todo.pop()
            if p in seen:
                continue
            seen.add(p)
            total += _vm_rss(p) or 0
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = (task / "children").read_text().split()
                todo.extend(int(k) for k in kids)
    except OSError:
        return total or None
    return total


def _pool_bench(kind: str, workers: int, images: list[bytes], preset: str) -> dict:
    """Upload throughput (decode + encode + store) of one encode pool kind, after a warm-up round."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(
            Path(tmp) / "store",
            preset=preset,
            args=("--pool", kind, "--workers", str(workers), "--queue", str(4 * len(images))),
        ) as srv,
    ):
        warm = sample_images(workers, size=64, seed=999)
        asyncio.run(upload_all(srv.url, warm, clients=workers))
        t0 = time.perf_counter()
        docs = asyncio.run(upload_all(srv.url, images, clients=2 * workers))
        wall = time.perf_counter() - t0
        assert srv.proc is not None  # started by the with statement
        rss = tree_rss_bytes(srv.proc.pid)
    created = sum(d["created"] for d in docs)
    return {
        "pool": kind,
        "workers": workers,
        "images": len(images),
        "created": created,
        "seconds": round(wall, 3),
        "uploads_per_s": round(len(images) / wall, 2),
        "encode_ms_median": round(float(np.median([d["encode_ms"] for d in docs])), 1),
        "rss_mib_with_workers": _mib(rss),
    }


def run_service_bench(
    clients: int = 16,
    requests: int = 2000,
    images: int = 20,
    size: int = 512,
    preset: str = "fast",
    pools: list[str] | None = None,
    workers: int = 2,
    torch_threads: int = 1,
    json_path: Path | None = None,
    console: Console | None = None,
) -> dict:
    from ..core.device import resolve_device
    from .common import machine_info

    console = console or Console()
    pics = sample_images(images, size=size)
    result: dict = {
        "machine": machine_info(resolve_device("cpu")),
        "clients": clients,
        "images": images,
        "size": size,
        "preset": preset,
        "torch_threads": torch_threads,
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerProcess(Path(tmp) / "store", preset=preset, env={"FOVEATE_TORCH_THREADS": str(torch_threads)}) as srv,
    ):
        with console.status(f"uploading {images} images ..."):
            t0 = time.perf_counter()
            docs = asyncio.run(upload_all(srv.url, pics))
            upload_s = time.perf_counter() - t0
        rss0 = srv.rss_bytes()
        rounds = []
        for seed in (0, 1):  # a second round shows whether memory settles
            with console.status(f"round {seed + 1}: {requests} selects from {clients} clients ..."):
                cpu0, client0 = srv.cpu_seconds(), time.process_time()
                load = asyncio.run(select_load(srv.url, docs, clients, requests, seed=seed))
                cpu1, client1 = srv.cpu_seconds(), time.process_time()
            rec = summarize(load)
            rec["rss_mib"] = _mib(srv.rss_bytes())
            rec["server_cpu_ms_per_request"] = (
                round((cpu1 - cpu0) * 1000 / requests, 3) if cpu0 is not None and cpu1 is not None else None
            )
            rec["client_cpu_ms_per_request"] = round((client1 - client0) * 1000 / requests, 3)
            rec["failures"] = load["failures"][:5]
            rounds.append(rec)
    result.update({"upload_seconds": round(upload_s, 3), "rss_mib_after_uploads": _mib(rss0), "rounds": rounds})
    t = Table(
        title=f"{requests} selects, {clients} clients, {images} textures of {size}x{size} ({preset}, "
        f"{torch_threads} torch thread{'s' if torch_threads > 1 else ''})",
        box=None,
    )
    for col in (
        "round",
        "requests",
        "errors",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "select ms (p50)",
        "server CPU ms/req",
        "client CPU ms/req",
        "server RSS MiB",
    ):
        t.add_column(col, justify="right")
    for i, x in enumerate(rounds, 1):
        t.add_row(
            str(i),
            str(x["requests"]),
            str(x["errors"]),
            f"{x['throughput_rps']}",
            f"{x['p50_ms']}",
            f"{x['p90_ms']}",
            f"{x['p99_ms']}",
            f"{x['max_ms']}",
            f"{x['select_ms_p50']}",
            f"{x['server_cpu_ms_per_request']}",
            f"{x['client_cpu_ms_per_request']}",
            f"{x['rss_mib']}",
        )
    console.print(t)
    console.print(
        f"server RSS {_mib(rss0)} MiB after {images} uploads ({upload_s:.2f} s), "
        f"{rounds[0]['rss_mib']} after round 1, {rounds[1]['rss_mib']} after round 2",
        highlight=False,
    )
    for x in rounds:
        if x["errors"]:
            console.print(f"[red]errors:[/] {x['failures']}")
    if pools:
        fresh = sample_images(images, size=size, seed=7)
        result["pools"] = []
        p = Table(title=f"encode pool: {images} uploads of {size}x{size}, {workers} workers ({preset})", box=None)
        for col in ("pool", "uploads/s", "seconds", "encode ms (median, incl. queue)", "RSS MiB (server + workers)"):
            p.add_column(col, justify="right")
        for kind in pools:
            with console.status(f"encode pool {kind} ..."):
                rec = _pool_bench(kind, workers, fresh, preset)
            result["pools"].append(rec)
            p.add_row(
                kind,
                f"{rec['uploads_per_s']}",
                f"{rec['seconds']}",
                f"{rec['encode_ms_median']}",
                f"{rec['rss_mib_with_workers']}",
            )
        console.print(p)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(result, indent=1))
        console.print(f"wrote {json_path}")
    return result


def _mib(n: int | None) -> float | None:
    return round(n / 2**20, 1) if n else None
