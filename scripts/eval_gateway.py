"""The OCR answer check through ``foveate gateway``: on what the upstream received, against the whole page sent
directly.

A real gateway process (default preset) in front of a recording stand-in upstream on loopback (the hosted providers
are not reachable here; it answers a fixed reply in the provider's format and keeps each body it receives).  For each
sampled query of a text set (``queries.jsonl`` with answer texts), the page and the question go through the gateway as
an OpenAI chat completion (``gpt-5.2``) and as an Anthropic message (``claude-opus-4-7``); the pictures the upstream
received are read as the model sees them -- each resized to what the model's rule makes of it, a composite cut into
its parts, each view placed back at its source box by its introducing line, finest first -- and the answer is looked
for near its box (``foveate eval``'s check: exact and fuzzy).  The reference is the whole page as the provider takes
it, read the same way.  Tokens: the gateway's ``x-foveate-sent-tokens`` / ``x-foveate-image-tokens``.

    python scripts/eval_gateway.py ../shared/data/funsd_forms -n 30 --seed 0 --out out/eval-gateway.json
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import tempfile
import threading
import time
from pathlib import Path

import cv2
import httpx
import numpy as np
from PIL import Image

from foveate.core.io import load_image
from foveate.eval.answers import load_ocr, query_answer_found
from foveate.eval.data import read_queries
from foveate.eval.runner import sample_queries
from foveate.eval.vlm import Line, _grown, _overlaps
from foveate.service.process import ServerProcess, free_port
from foveate.vlm import model_rule

MODELS = {"gpt-5.2": "openai", "claude-opus-4-7": "anthropic"}
PART = re.compile(r"at x (\d+)-(\d+), y (\d+)-(\d+) of this picture: the region x (\d+)-(\d+), y (\d+)-(\d+)")
REGION = re.compile(r"the region x (\d+)-(\d+), y (\d+)-(\d+) of the page")


def recording_upstream(received: dict[str, dict]):
    """The stand-in provider: keeps each body by the request's ``x-eval-id`` header, answers a fixed reply."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def answer(request):
        received[request.headers["x-eval-id"]] = json.loads(await request.body())
        if request.url.path == "/v1/messages":
            return JSONResponse({"id": "m", "type": "message", "role": "assistant", "content": []})
        return JSONResponse({"id": "c", "object": "chat.completion", "choices": []})

    routes = [Route(p, answer, methods=["POST"]) for p in ("/v1/chat/completions", "/v1/messages")]
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def request(kind: str, model: str, b64: str, question: str) -> tuple[str, dict]:
    if kind == "anthropic":
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}
        content = [image, {"type": "text", "text": question}]
        return "/v1/messages", {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": content}]}
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64}}
    content = [image, {"type": "text", "text": question}]
    return "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": content}]}


def received_pictures(body: dict, kind: str) -> list[tuple[str, np.ndarray, str | None]]:
    """(introducing line, RGB picture as sent, option) for each picture of the forwarded user turn."""
    content = body["messages"][-1]["content"]
    out = []
    for line_part, pic_part in zip(content, content[1:]):
        if line_part.get("type") != "text":
            continue
        if kind == "anthropic" and pic_part.get("type") == "image":
            data, option = pic_part["source"]["data"], None
        elif kind == "openai" and pic_part.get("type") == "image_url":
            data, option = pic_part["image_url"]["url"].split(",", 1)[1], pic_part["image_url"].get("detail")
        else:
            continue
        rgb = np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))
        out.append((line_part["text"], rgb, option))
    return out


def _resize(img: np.ndarray, w: int, h: int) -> np.ndarray:
    if (img.shape[1], img.shape[0]) == (w, h):
        return img
    shrink = w * h < img.shape[0] * img.shape[1]
    return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def views(line: str, sent: np.ndarray, option: str | None, rule, page_size: tuple[int, int]):
    """(source box, view back at the source box's size) of one received picture, as the model sees it."""
    h, w = sent.shape[:2]
    _, sw, sh = rule.price(np.array([w]), np.array([h]), option if option is not None else rule.options[0])
    seen = _resize(sent, int(sw[0]), int(sh[0]))
    fx, fy = seen.shape[1] / w, seen.shape[0] / h
    parts = [tuple(map(int, m)) for m in PART.findall(line)]
    if parts:
        boxes = [((a, c, b, d), (x0, y0, x1, y1)) for a, b, c, d, x0, x1, y0, y1 in parts]
    else:
        m = REGION.search(line)
        src = (int(m[1]), int(m[3]), int(m[2]), int(m[4])) if m else (0, 0, *page_size)
        boxes = [((0, 0, w, h), src)]
    for (a, b, c, d), (x0, y0, x1, y1) in boxes:
        crop = seen[round(b * fy) : round(d * fy), round(a * fx) : round(c * fx)]
        yield (x0, y0, x1, y1), _resize(crop, x1 - x0, y1 - y0), (x1 - x0) / max(crop.shape[1], 1)


def read_views(items, q, read) -> list[Line]:
    """OCR lines near ``q``'s answers, finest view first; a line inside a finer view already read is dropped."""
    grown = _grown(q)
    placed, out = [], []
    for box, view, _ in sorted(items, key=lambda v: v[2]):
        if _overlaps(box, grown):
            for ln in read(view):
                b = (ln.box[0] + box[0], ln.box[1] + box[1], ln.box[2] + box[0], ln.box[3] + box[1])
                cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
                if not any(x0 <= cx < x1 and y0 <= cy < y1 for x0, y0, x1, y1 in placed):
                    out.append(Line(ln.text, b))
        placed.append(box)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("out/eval-gateway.json"))
    args = ap.parse_args()
    read, why = load_ocr()
    if read is None:
        raise SystemExit(why)
    queries, _, _ = read_queries(args.data)
    queries = sample_queries([q for q in queries if q.answers], args.n, args.seed)
    received: dict[str, dict] = {}
    server, upstream = recording_upstream(received)
    rows = {m: {"queries": 0, "through": [0, 0], "whole": [0, 0], "sent": 0, "image": 0} for m in MODELS}
    t0 = time.time()
    with (
        ServerProcess(tempfile.mkdtemp(), "default", ("--upstream", upstream), command="gateway") as gw,
        httpx.Client(timeout=600) as client,
    ):
        for k, q in enumerate(queries):
            path = args.data / q.image
            rgb = load_image(path)
            b64 = base64.b64encode(path.read_bytes()).decode()
            for model, kind in MODELS.items():
                rule, rid = model_rule(model), f"{k}-{model}"
                route, body = request(kind, model, b64, q.text)
                r = client.post(gw.url + route, json=body, headers={"x-eval-id": rid, "authorization": "Bearer x"})
                r.raise_for_status()
                items = [
                    v
                    for line, sent, option in received_pictures(received[rid], kind)
                    for v in views(line, sent, option, rule, (rgb.shape[1], rgb.shape[0]))
                ]
                whole_sent, whole = rule.whole(rgb.shape[1], rgb.shape[0])
                direct = _resize(_resize(_resize(rgb, *whole_sent), *whole.seen), rgb.shape[1], rgb.shape[0])
                got = query_answer_found(q, read_views(items, q, read))
                ref = query_answer_found(q, read_views([((0, 0, rgb.shape[1], rgb.shape[0]), direct, 1.0)], q, read))
                if got is None or ref is None:
                    continue
                row = rows[model]
                row["queries"] += 1
                row["through"] = [row["through"][0] + got["exact"], row["through"][1] + got["fuzzy"]]
                row["whole"] = [row["whole"][0] + ref["exact"], row["whole"][1] + ref["fuzzy"]]
                row["sent"] += int(r.headers.get("x-foveate-sent-tokens", whole.tokens))
                row["image"] += int(r.headers.get("x-foveate-image-tokens", whole.tokens))
            print(f"{k + 1}/{len(queries)}", flush=True)
    server.should_exit = True
    minutes = round((time.time() - t0) / 60, 1)
    result = {"data": args.data.name, "n": len(queries), "seed": args.seed, "minutes": minutes}
    for model, row in rows.items():
        n = max(row["queries"], 1)
        row["through_pct"] = [round(100 * x / n, 1) for x in row["through"]]
        row["whole_pct"] = [round(100 * x / n, 1) for x in row["whole"]]
        row["sent_share_pct"] = round(100 * row["sent"] / max(row["image"], 1), 1)
        result[model] = row
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
