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
import itertools
import json
import random
import re
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


STOP = {"what", "the", "was", "this", "which", "value", "field", "how", "much", "from", "where", "when", "who", "for"}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]{3,}", text.lower()) if w not in STOP}


def identifies(q, chosen: list[str], target: int, page_words: dict[str, set[str]]) -> bool:
    """The question names a word the target page's text has and no other page of the document has: it is about
    one page (a receipt's "How much tax was charged?" is about every receipt)."""
    others = set().union(*(page_words[c] for i, c in enumerate(chosen) if i != target))
    return bool((_words(q.text) & page_words[chosen[target]]) - others)


def _encode(path: Path, cache: Path | None):
    import foveate
    from foveate.core.texture import Texture

    if cache is not None:
        f = cache / (path.parent.parent.name + "_" + path.stem + ".fvt")
        if f.is_file():
            return Texture.load(f)
    tex = foveate.encode(path, device="cpu")
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        tex.save(f)
    return tex


def build(data_dirs, docs, pages, pool, seed, split="test", cache=None, any_question=False):
    """(documents, textures): each document a (set name, [image paths], target index, query)."""
    from foveate.eval.data import read_queries, split_of

    rng = random.Random(seed)
    textures, plan = {}, []
    per_set = max(1, docs // len(data_dirs))
    for d in data_dirs:
        name = Path(d).name
        queries, _, _ = read_queries(d)
        by_image: dict[str, list] = {}
        for q in queries:
            if split_of(name, q.image) == split:
                by_image.setdefault(q.image, []).append(q)
        images = sorted(by_image)
        rng.shuffle(images)
        images = images[:pool]
        words = {}
        for img in images:
            textures[(name, img)] = tex = _encode(Path(d) / img, cache)
            words[img] = set().union(*(_words(ln["text"]) for ln in tex.extras["text"]["lines"]))
        made = 0
        for _ in range(per_set * 50):
            if made == per_set:
                break
            k = rng.randint(pages[0], min(pages[1], len(images)))
            chosen = rng.sample(images, k)
            target = rng.randrange(k)
            qs = [q for q in by_image[chosen[target]] if any_question or identifies(q, chosen, target, words)]
            if qs:
                plan.append((name, chosen, target, rng.choice(qs)))
                made += 1
    return plan, textures


def fit(plan, textures, budget: int) -> dict:
    """The page score's weights and share that put the most of the budget on the target page (its share of the
    allocation, :func:`foveate.document.select.allocate`), by grid search over the documents of ``plan``."""
    import foveate
    from foveate.document.select import DEFAULT_MAX_FOCUS, allocate, page_features, page_scores
    from foveate.document.texture import DocumentTexture

    ranker = foveate.load_weights(None).text.ranker
    items = []
    for name, chosen, target, q in plan:
        doc = DocumentTexture([textures[(name, img)] for img in chosen], "images")
        covers = [p.level_shapes[-1][0] * p.level_shapes[-1][1] for p in doc.pages]
        items.append((page_features(doc, q.text, ranker), target, covers))
    grid = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]
    results = []
    for lex, cos, share in itertools.product(grid, grid, [0.3, 0.5, 0.7, 0.9]):
        acc = right = 0.0
        for feats, target, covers in items:
            rel = page_scores(feats, lex, cos)
            focus, _ = allocate(rel, budget, covers, share, DEFAULT_MAX_FOCUS, 0)
            acc += focus.get(target, 0) / max(1, sum(focus.values()))
            right += int(np.argmax(rel)) == target
        results.append((acc / len(items), right / len(items), -lex - cos, lex, cos, share))
    best = max(results)
    return {
        "documents": len(items),
        "PAGE_LEXICAL": best[3],
        "PAGE_COSINE": best[4],
        "PAGE_SHARE": best[5],
        "target_share": round(best[0], 3),
        "best_page_right": round(best[1], 3),
        "unweighted": [
            {"target_share": round(r[0], 3), "best_page_right": round(r[1], 3), "share": r[5]}
            for r in results
            if r[3] == 0 and r[4] == 0
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="+")
    ap.add_argument("--docs", type=int, default=40)
    ap.add_argument("--pages", type=int, nargs=2, default=(2, 8))
    ap.add_argument("--pool", type=int, default=24)
    ap.add_argument("--budgets", type=int, nargs="+", default=[273, 576])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--split", default="test", help="pages of this split (train for --fit)")
    ap.add_argument("--cache", default=None, help="folder to keep the encoded pages in between runs")
    ap.add_argument("--any-question", action="store_true", help="also questions that do not name their page")
    ap.add_argument("--fit", action="store_true", help="choose PAGE_LEXICAL, PAGE_COSINE, PAGE_SHARE (train split)")
    args = ap.parse_args()

    from foveate.document.select import select_document
    from foveate.document.texture import DocumentTexture
    from foveate.selection import select

    t0 = time.perf_counter()
    cache = Path(args.cache) if args.cache else None
    plan, textures = build(
        args.data, args.docs, tuple(args.pages), args.pool, args.seed, args.split, cache, args.any_question
    )
    encode_s = time.perf_counter() - t0
    if args.fit:
        print(json.dumps(fit(plan, textures, args.budgets[0]), indent=1))
        return
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
