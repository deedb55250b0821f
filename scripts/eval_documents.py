"""Multi-page documents built from single annotated pages: does one budget across the pages land on the asked page?

    python scripts/eval_documents.py DATA_DIR [DATA_DIR ...] [--docs 40] [--pages 2 8] [--pool 24]
        [--budgets 273 576] [--json out.json]

Each document is ``--pages`` (drawn between the two numbers) test-split pages of one set (FUNSD-style forms,
receipts: :func:`foveate.eval.data.split_of`, so none was trained on), drawn from a pool of ``--pool`` pages per set
(each encoded once); its question is one of the queries of one of its pages, the target page.  Per budget:

* **ours**: :func:`foveate.select_document` with the default weights; **hit** (the answer boxes legible,
  :func:`foveate.eval.metrics.query_metrics` on the target page's tokens; no token there: a miss) and **page
  accuracy** (the share of level-0 tokens on the target page; none at level 0: 0).
* **single page**: :func:`foveate.select` on the target page alone with the same budget (what the question scores
  when the page is known: also the oracle that knows the page, ``select_document(page=...)``).
* **uniform**: the whole document uniformly downsampled to the budget: each page resized to ``budget / pages``
  tokens (``mode="uniform"``); its page accuracy is the target's share of the tokens.

Backs EVAL.md ("Documents").
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import numpy as np


def _hit(sel, q) -> bool:
    from foveate.eval.metrics import query_metrics

    if sel is None or not len(sel):
        return False
    m = query_metrics(sel.boxes, None, q.boxes, sel.image_size, text_heights=q.text_heights, token_scales=sel.scales)
    return bool(m.hit)


def build(data_dirs: list[str], docs: int, pages: tuple[int, int], pool: int, seed: int):
    """(documents, textures): each document a (set name, [image paths], target index, query)."""
    import foveate
    from foveate.eval.data import read_queries, split_of

    rng = random.Random(seed)
    textures, plan = {}, []
    per_set = max(1, docs // len(data_dirs))
    for d in data_dirs:
        name = Path(d).name
        queries, _, _ = read_queries(d)
        by_image: dict[str, list] = {}
        for q in queries:
            if split_of(name, q.image) == "test":
                by_image.setdefault(q.image, []).append(q)
        images = sorted(by_image)
        rng.shuffle(images)
        images = images[:pool]
        for img in images:
            textures[(name, img)] = foveate.encode(Path(d) / img, device="cpu")
        for _ in range(per_set):
            k = rng.randint(pages[0], min(pages[1], len(images)))
            chosen = rng.sample(images, k)
            target = rng.randrange(k)
            q = rng.choice(by_image[chosen[target]])
            plan.append((name, chosen, target, q))
    return plan, textures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="+")
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--pages", type=int, nargs=2, default=(2, 8))
    ap.add_argument("--pool", type=int, default=24)
    ap.add_argument("--budgets", type=int, nargs="+", default=[273, 576])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from foveate.document.select import select_document
    from foveate.document.texture import DocumentTexture
    from foveate.selection import select

    t0 = time.perf_counter()
    plan, textures = build(args.data, args.docs, tuple(args.pages), args.pool, args.seed)
    encode_s = time.perf_counter() - t0
    rows = []
    for name, chosen, target, q in plan:
        doc = DocumentTexture([textures[(name, img)] for img in chosen], "images")
        for b in args.budgets:
            sel = select_document(doc, q.text, b)
            one = select(doc.pages[target], q.text, b)
            k = len(chosen)
            uni = [select(p, q.text, max(1, b // k), mode="uniform") for p in doc.pages]
            rows.append(
                {
                    "set": name,
                    "pages": k,
                    "budget": b,
                    "hit": _hit(sel.selection(target), q),
                    "page_accuracy": sel.page_share(target, 0),
                    "best_page_right": int(np.argmax(sel.relevance)) == target,
                    "single_hit": _hit(one, q),
                    "uniform_hit": _hit(uni[target], q),
                    "uniform_page_share": len(uni[target]) / max(1, sum(len(u) for u in uni)),
                    "select_ms": sel.timings_ms["total"],
                }
            )
    summary = {}
    for b in args.budgets:
        for s in sorted({r["set"] for r in rows}) + ["all"]:
            rs = [r for r in rows if r["budget"] == b and (s == "all" or r["set"] == s)]
            if not rs:
                continue
            summary[f"{s}@{b}"] = {
                "documents": len(rs),
                "mean_pages": round(statistics.mean(r["pages"] for r in rs), 2),
                **{
                    k: round(100 * statistics.mean(float(r[k]) for r in rs), 1)
                    for k in (
                        "hit",
                        "single_hit",
                        "uniform_hit",
                        "page_accuracy",
                        "best_page_right",
                        "uniform_page_share",
                    )
                },
                "select_ms_median": round(statistics.median(r["select_ms"] for r in rs), 1),
            }
    out = {"args": vars(args), "encode_s": round(encode_s, 1), "summary": summary, "rows": rows}
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
