"""What ``foveate gateway`` adds to a VLM request, beside a plain pass-through proxy measured the same way.

Three servers on loopback, each its own process: an upstream that answers every request at once (a fixed
chat-completion JSON), a plain pass-through proxy (Starlette + httpx: forward the body, relay the answer; nothing
else), and ``foveate gateway`` in front of the same upstream.  The same request bodies (the form page
``example:page`` with a question, OpenAI chat completions, ``gpt-5.2``) are posted to each:

* added latency per request, median and p90: (through the gateway or the proxy) - (to the upstream directly), for a
  cache miss on a page (a new picture each time: decode, encode, select, plan) and a cache hit (a new question on a
  picture seen before);
* requests/s at 16 concurrent clients (cache hits, questions varied) through each, and to the upstream directly.

    python scripts/bench_gateway.py --out out/bench-gateway.json [--preset default] [--misses 3] [--hits 40]
        [--budget 273|auto]

``tokens.budgets`` counts the budgets the gateway used (``x-foveate-budget``) over the cache-hit questions.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def upstream_app():
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    answer = json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-5.2",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()

    async def chat(request):
        await request.body()
        return Response(answer, media_type="application/json")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def proxy_app(upstream: str):
    """The plain pass-through proxy: the body forwarded as it came, the answer relayed as it comes."""
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    state = {}
    hop = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}

    @asynccontextmanager
    async def lifespan(app):
        state["client"] = httpx.AsyncClient(timeout=600, trust_env=False)
        yield
        await state["client"].aclose()

    async def forward(request):
        body = await request.body()
        headers = [(k, v) for k, v in request.headers.items() if k not in hop]
        req = state["client"].build_request(request.method, upstream + request.url.path, headers=headers, content=body)
        answer = await state["client"].send(req, stream=True)

        async def chunks():
            try:
                async for c in answer.aiter_raw():
                    yield c
            finally:
                await answer.aclose()

        out = [(k, v) for k, v in answer.headers.items() if k not in hop]
        return StreamingResponse(chunks(), answer.status_code, headers=dict(out))

    return Starlette(routes=[Route("/v1/chat/completions", forward, methods=["POST"])], lifespan=lifespan)


def serve(kind: str, port: int, upstream: str) -> None:
    import uvicorn

    app = upstream_app() if kind == "upstream" else proxy_app(upstream)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def start(cmd: list[str], url: str, env: dict | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{cmd[:4]} did not start")


def page_variant(seed: int) -> str:
    """The form page with a few pixels changed (a picture never seen), base64 PNG."""
    from PIL import Image

    from foveate.core.io import load_image

    rgb = load_image(ROOT / "src/foveate/examples/page.png").copy()
    if seed:
        rng = np.random.default_rng(seed)
        rgb[rng.integers(0, rgb.shape[0], 8), rng.integers(0, rgb.shape[1], 8)] = rng.integers(0, 255, (8, 3))
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def body(b64: str, question: str) -> bytes:
    content = [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64}},
        {"type": "text", "text": question},
    ]
    return json.dumps({"model": "gpt-5.2", "messages": [{"role": "user", "content": content}]}).encode()


HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}


def timed(client: httpx.Client, url: str, data: bytes) -> tuple[float, httpx.Response]:
    t0 = time.perf_counter()
    r = client.post(url + "/v1/chat/completions", content=data, headers=HEADERS)
    dt = time.perf_counter() - t0
    if r.status_code != 200:
        raise SystemExit(f"{url}: {r.status_code} {r.text[:200]}")
    return dt, r


def stats(ms: list[float]) -> dict:
    q = np.percentile(ms, [50, 90])
    return {"n": len(ms), "median_ms": round(float(q[0]), 2), "p90_ms": round(float(q[1]), 2)}


def throughput(url: str, bodies: list[bytes], clients: int, seconds: float) -> float:
    done = [0] * clients
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        with httpx.Client(timeout=120, trust_env=False) as c:
            k = i
            while time.monotonic() < stop:
                timed(c, url, bodies[k % len(bodies)])
                done[i] += 1
                k += clients

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("out/bench-gateway.json"))
    ap.add_argument("--preset", default="default")
    ap.add_argument("--misses", type=int, default=3)
    ap.add_argument("--hits", type=int, default=40)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--budget", default="273", help="the gateway's --budget: tokens, or auto")
    ap.add_argument("--serve", nargs=3, metavar=("KIND", "PORT", "UPSTREAM"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.serve[2])
        return
    from foveate.service.process import free_port

    ports = {k: free_port() for k in ("upstream", "proxy", "gateway")}
    urls = {k: f"http://127.0.0.1:{p}" for k, p in ports.items()}
    me = [sys.executable, __file__, "--serve"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOVEATE_") or k == "FOVEATE_CACHE"}
    store = tempfile.mkdtemp(prefix="bench-gateway-")
    procs = [start([*me, "upstream", str(ports["upstream"]), "-"], urls["upstream"])]
    procs.append(start([*me, "proxy", str(ports["proxy"]), urls["upstream"]], urls["proxy"]))
    gw_cmd = [sys.executable, "-m", "foveate.cli", "gateway", "--upstream", urls["upstream"], "--port"]
    gw_cmd += [str(ports["gateway"]), "--store", store, "--preset", args.preset, "--budget", args.budget]
    procs.append(start(gw_cmd, urls["gateway"] + "/healthz", env))
    try:
        page = page_variant(0)
        questions = [f"What is written in field {i} of the form?" for i in range(args.hits + 1)]
        result: dict = {"preset": args.preset, "budget": args.budget, "clients": args.clients, "cpus": os.cpu_count()}
        with httpx.Client(timeout=600, trust_env=False) as c:
            for _ in range(3):  # warm every connection and the gateway's query encoder (a miss, not counted)
                for url in urls.values():
                    timed(c, url, body(page, questions[0]))
            miss, miss_proxy = [], []
            for seed in range(1, args.misses + 1):
                data = body(page_variant(seed), questions[0])
                direct = timed(c, urls["upstream"], data)[0]
                dt, r = timed(c, urls["gateway"], data)
                assert r.headers["x-foveate-cache"] == "miss"
                miss.append((dt - direct) * 1e3)
                miss_proxy.append((timed(c, urls["proxy"], data)[0] - direct) * 1e3)
            hit, hit_proxy, sent, whole, budgets = [], [], [], 0, []
            for q in questions[1:]:
                data = body(page, q)
                direct = timed(c, urls["upstream"], data)[0]
                dt, r = timed(c, urls["gateway"], data)
                assert r.headers["x-foveate-cache"] == "hit"
                sent.append(int(r.headers["x-foveate-sent-tokens"]))
                budgets.append(r.headers["x-foveate-budget"])
                whole = int(r.headers["x-foveate-image-tokens"])
                hit.append((dt - direct) * 1e3)
                hit_proxy.append((timed(c, urls["proxy"], data)[0] - direct) * 1e3)
        result["added_latency"] = {
            "gateway_miss": stats(miss),
            "proxy_same_bodies_as_miss": stats(miss_proxy),
            "gateway_hit": stats(hit),
            "proxy_same_bodies_as_hit": stats(hit_proxy),
        }
        result["tokens"] = {"whole_page": whole, "sent_min": min(sent), "sent_median": statistics.median(sent)}
        result["tokens"]["sent_max"] = max(sent)
        result["tokens"]["budgets"] = {b: budgets.count(b) for b in sorted(set(budgets), key=int)}
        bodies = [body(page, q) for q in questions[1:]]
        rps = {k: throughput(urls[k], bodies, args.clients, args.seconds) for k in ("upstream", "proxy", "gateway")}
        result["requests_per_s"] = {k: round(v, 1) for k, v in rps.items()}
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
