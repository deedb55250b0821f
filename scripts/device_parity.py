"""Selections on a GPU against the CPU of the same machine, and what each costs there (BENCHMARKS.md, "On a GPU").

    python scripts/device_parity.py prepare DIR --set ../shared/data/funsd_forms --set ../shared/data/wildreceipt -n 6
    python scripts/device_parity.py run DIR --device cuda --json parity.json      # on the GPU machine

``prepare`` (where the OCR and MiniLM are installed) encodes the bundled page and photo and the first ``-n`` images
of each set with the ``default`` preset, saves the textures and the questions asked of them, and each question's
MiniLM embedding.  ``run`` needs neither the OCR engine nor MiniLM (a GPU machine without those packages, or without
room for their weights, can run it): the questions' embeddings are read from ``DIR`` into ``embed_query``'s cache,
so both devices score the same vectors and only the selection differs.  For every texture, question (text, points or
none), budget and mode it selects once with the texture on the CPU and once on ``--device`` (the shipped weights)
and compares the tiles, exactly; it also times ``select`` per device (median of ``--repeats`` over every question,
after one warm-up pass).  The exit status is 1 when any selection differs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BUDGETS = (64, 144, 273, 576)
MODES = ("auto", "quadtree", "topk")


def prompts(size: tuple[int, int]) -> list[dict | None]:
    """Asked of every texture beside its questions: nothing, a point and a box (at fixed fractions of the image)."""
    h, w = size
    return [None, {"points": [[0.3 * w, 0.4 * h]]}, {"boxes": [[0.1 * w, 0.2 * h, 0.5 * w, 0.45 * h]]}]


def prepare(out: Path, sets: list[Path], n: int) -> None:
    import foveate
    from foveate.bench.common import EXAMPLES
    from foveate.bench.encode import TEXT_QUERIES
    from foveate.query.text.embed import embed_query

    out.mkdir(parents=True, exist_ok=True)
    items: list[tuple[str, str | Path, list[str]]] = [
        ("page", EXAMPLES / "page.png", TEXT_QUERIES),
        ("photo", EXAMPLES / "photo.jpg", ["the lamp", "What colour is the wall?"]),
    ]
    for root in sets:
        by_image: dict[str, list[str]] = {}
        for line in (root / "queries.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row["image"] in by_image or len(by_image) < n:
                by_image.setdefault(row["image"], []).append(row["query"])
        items += [(f"{root.name}-{i}", root / img, qs) for i, (img, qs) in enumerate(by_image.items())]
    manifest, vectors = [], {}
    for name, path, questions in items:
        tex = foveate.encode(path, preset="default", device="cpu")
        tex.save(out / f"{name}.fvt")
        manifest.append({"name": name, "questions": list(questions)})
        for q in questions:
            vectors[q] = embed_query(q)
        print(f"{name}: {tex.image_size[1]}x{tex.image_size[0]}, {len(questions)} questions", flush=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    np.savez(out / "questions.npz", texts=np.array(list(vectors)), vectors=np.stack(list(vectors.values())))


def _use_carried_embeddings(folder: Path) -> None:
    """Answer ``embed_query`` from the vectors ``prepare`` saved (the same module global it calls)."""
    from foveate.query.text import embed

    got = np.load(folder / "questions.npz")
    table = {str(t): v.astype(np.float32) for t, v in zip(got["texts"], got["vectors"])}
    for v in table.values():
        v.flags.writeable = False
    embed._embed_query_cached = table.__getitem__  # type: ignore[assignment]


def _tiles(sel) -> tuple:
    return sel.mode, sel.layout, tuple(zip(sel.levels.tolist(), sel.rows.tolist(), sel.cols.tolist()))


def run(folder: Path, device: str, repeats: int) -> dict:
    import torch

    import foveate
    from foveate.core.device import describe, resolve_device

    _use_carried_embeddings(folder)
    dev = resolve_device(device)
    manifest = json.loads((folder / "manifest.json").read_text())
    compared, differ = 0, []
    # "cpu" is the reference, "device" the one under test (both on the CPU with --device cpu: their timings apart)
    times: dict[str, dict[str, list[float]]] = {"cpu": {}, "device": {}}
    for item in manifest:
        path = folder / f"{item['name']}.fvt"
        texs = {"cpu": foveate.Texture.load(path, device="cpu"), "device": foveate.Texture.load(path, device=dev)}
        queries = [*item["questions"], *prompts(texs["cpu"].image_size)]
        for q in queries:
            for budget in BUDGETS:
                for mode in MODES:
                    got = {}
                    for where, tex in texs.items():
                        try:
                            got[where] = _tiles(foveate.select(tex, q, budget, mode=mode, cut=False))
                        except foveate.FoveateError as exc:  # a budget below the quadtree's cover: the same error
                            got[where] = ("error", type(exc).__name__)
                    compared += 1
                    if len(set(got.values())) > 1:
                        differ.append({"texture": item["name"], "query": q, "budget": budget, "mode": mode})
        kind = "text" if item["name"] != "photo" else "photo"
        for where, tex in texs.items():  # the cost: every question at the default budget and mode
            for q in queries:
                foveate.select(tex, q)
            for _ in range(repeats):
                for q in queries:
                    bucket = f"{kind}, {'prompt' if isinstance(q, dict) or q is None else 'question'}"
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    foveate.select(tex, q)
                    if dev.type == "cuda":
                        torch.cuda.synchronize()
                    times[where].setdefault(bucket, []).append((time.perf_counter() - t0) * 1000.0)
        print(f"{item['name']}: {len(queries) * len(BUDGETS) * len(MODES)} selections compared", flush=True)
    return {
        "device": describe(dev),
        "torch": torch.__version__,
        "compared": compared,
        "differ": differ,
        "select_ms_median": {w: {b: statistics.median(v) for b, v in t.items()} for w, t in times.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir", type=Path)
    p.add_argument("--set", dest="sets", type=Path, action="append", default=[])
    p.add_argument("-n", type=int, default=6, help="images per set (default 6)")
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--device", default="cuda")
    r.add_argument("--repeats", type=int, default=5)
    r.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare(args.dir, args.sets, args.n)
        return
    result = run(args.dir, args.device, args.repeats)
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    sys.exit(1 if result["differ"] else 0)


if __name__ == "__main__":
    main()
