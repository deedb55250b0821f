"""Multi-page documents built from single annotated pages: does one budget across the pages land on the asked page?

    python scripts/eval_documents.py FUNSD_DIR WILDRECEIPT_DIR [--docs 40] [--pages 2 20] [--split test]
        [--generated 20] [--stress 40] [--budgets 273 576] [--cache out/doc-pages] [--json out.json] [--fit]

Pages (all of ``--split``, :func:`foveate.eval.data.split_of`, so none was trained on; ``--pool`` caps each real set):
the FUNSD-style forms (scans, OCR'd), the receipts (photos, OCR'd), and pages of the synthetic generator
(:mod:`foveate.synth`: forms, letters, invoices, receipts) written as born-digital PDFs with a text layer
(:func:`foveate.synth.pdf.pdf_document`) and read through the document reader's text-layer path (no OCR); generated
pages of the test split are seeds ``test:0``, ``test:1``, ... (``--generated`` forms and letters, a quarter as many
invoices and receipts).  Each page is encoded once (``--cache`` keeps them between runs).

Documents (:mod:`foveate.eval.docset`): ``--docs`` of each composition, ``forms`` (forms only, scanned and generated)
and ``expense`` (one bill -- a receipt or an invoice -- among forms and letters), each of ``--pages`` pages (drawn
uniformly between the two numbers); the question is one that is about one page
(:func:`foveate.eval.docset.about_one_page`) of a page drawn among those that have one (in an expense report, the
bill's half the time, when it has one).  ``--stress``: documents of
2-8 receipts of the receipt set asked any question of one receipt (most of which fit every receipt of the document:
no system can tell the page), reported apart as ``receipts (stress)``.  Per budget:

* **ours**: :func:`foveate.select_document` with the default weights; **hit** (the answer boxes legible,
  :func:`foveate.eval.metrics.query_metrics` on the target page's tokens; no token there: a miss) and **page
  accuracy** (the share of level-0 tokens on the target page; none at level 0: 0).
* **oracle**: ``select_document(page=target)``, the budget spent on the page the question is about (the same tokens
  as :func:`foveate.select` on that page alone: the single-page figure for the same questions).
* **uniform**: the whole document uniformly downsampled to the budget: each page resized to ``budget / pages``
  tokens (``mode="uniform"``); its page accuracy is the target's share of the tokens.

``--fit`` (with ``--split train``) chooses the page score's weights and share instead.  Backs EVAL.md ("Documents").
"""

from __future__ import annotations

import argparse
import itertools
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


def _cached(f: Path, make):
    from foveate.core.texture import Texture

    if f.is_file():
        return Texture.load(f)
    tex = make()
    f.parent.mkdir(parents=True, exist_ok=True)
    tex.save(f)
    return tex


def real_pages(data_dir: str, split: str, pool: int, seed: int, cache: Path):
    """The set's pages of ``split`` (at most ``pool``, drawn at random): [(SetPage, texture, [EvalQuery])]."""
    import foveate
    from foveate.eval.data import read_queries, split_of
    from foveate.eval.docset import SetPage, norm

    name = Path(data_dir).name
    queries, _, _ = read_queries(data_dir)
    by_image: dict[str, list] = {}
    for q in queries:
        if split_of(name, q.image) == split:
            by_image.setdefault(q.image, []).append(q)
    images = sorted(by_image)
    random.Random(f"{seed}:{name}:{split}").shuffle(images)
    out = []
    for img in images[:pool]:
        path = Path(data_dir) / img
        tex = _cached(cache / f"{name}_{path.stem}.fvt", lambda p=path: foveate.encode(p, device="cpu"))
        ann = Path(data_dir) / "annotations" / (path.stem + ".json")
        if ann.is_file():  # FUNSD: every entity's text
            texts = {norm(e["text"]) for e in json.loads(ann.read_text())["form"]}
        else:  # the receipts annotate only their answers
            texts = {norm(a) for q in by_image[img] for a, _ in q.answers}
        kind = "form" if ann.is_file() else "receipt"
        qs = by_image[img]
        page = SetPage(f"{name}/{img}", kind, frozenset(texts - {""}), tuple((q.text, q.meta) for q in qs))
        out.append((page, tex, qs))
    return out


def generated_pages(kind: str, n: int, split: str, cache: Path):
    """``n`` generated born-digital PDF pages of ``kind`` (seeds ``split:i``): [(SetPage, texture, [EvalQuery])]."""
    import foveate
    from foveate.eval.data import parse_query_line
    from foveate.eval.docset import SetPage, norm
    from foveate.synth.documents import GENERATOR_VERSION
    from foveate.synth.pdf import pdf_document

    out = []
    for i in range(n):
        data, doc, qs = pdf_document(kind, f"{split}:{i}")
        stem = f"gen{GENERATOR_VERSION}_{kind}_{split}_{i}"
        pdf = cache / (stem + ".pdf")
        if not pdf.is_file():
            cache.mkdir(parents=True, exist_ok=True)
            pdf.write_bytes(data)
        tex = _cached(cache / (stem + ".fvt"), lambda p=pdf: foveate.encode(p, device="cpu").pages[0])
        src = tex.extras["text"]["ocr"].get("mode")
        assert src == "text-layer", f"{pdf} was not read from its text layer ({src})"  # the born-digital path
        eqs = [parse_query_line(json.dumps({"image": pdf.name, **q}), j) for j, q in enumerate(qs, 1)]
        texts = frozenset({norm(it.text) for it in doc.items} - {""})
        out.append((SetPage(f"generated/{stem}", kind, texts, tuple((q.text, q.meta) for q in eqs)), tex, eqs))
    return out


def build(args, cache: Path):
    """The documents: [(composition, [(SetPage, texture, [EvalQuery])], target index, EvalQuery)]."""
    from foveate.eval.docset import BILLS, about_one_page, draw_document

    rng = random.Random(args.seed)
    funsd = real_pages(args.data[0], args.split, args.pool, args.seed, cache)
    receipts = real_pages(args.data[1], args.split, args.pool, args.seed, cache)
    g = args.generated
    gen = {k: generated_pages(k, n, args.split, cache) for k, n in (("form", g), ("letter", g))}
    gen.update({k: generated_pages(k, max(1, g // 4), args.split, cache) for k in ("invoice", "receipt")})
    items = {id(p[0]): p for p in funsd + receipts + [x for v in gen.values() for x in v]}
    pools = {
        "form": [p[0] for p in funsd + gen["form"]],
        "letter": [p[0] for p in gen["letter"]],
        "bill": [p[0] for p in receipts + gen["invoice"] + gen["receipt"]],
    }
    plan = []
    for comp in ("forms", "expense"):
        made = 0
        while made < args.docs:
            pages = draw_document(rng, pools, rng.randint(*args.pages), comp)
            keep = {t: about_one_page(pages, t) for t in range(len(pages))}
            targets = [t for t, ks in keep.items() if ks]
            if not targets:
                continue
            bill = [t for t in targets if pages[t].kind in BILLS]
            t = bill[0] if bill and rng.random() < 0.5 else rng.choice(targets)  # half the time the bill's question
            plan.append((comp, [items[id(p)] for p in pages], t, items[id(pages[t])][2][rng.choice(keep[t])]))
            made += 1
    for _ in range(args.stress):  # several receipts, any question: the stress row
        pages = rng.sample(receipts, min(rng.randint(2, 8), len(receipts)))
        t = rng.randrange(len(pages))
        plan.append(("receipts (stress)", pages, t, rng.choice(pages[t][2])))
    return plan


def fit(plan, budget: int) -> dict:
    """The page score's weights (``PAGE_LEXICAL``, ``PAGE_COSINE``, ``PAGE_THEME``) and share that put the most of
    the budget on the target page (its share of the allocation, :func:`foveate.document.select.allocate`), by grid
    search over the documents of ``plan``; ties go to the smaller weights.  Without the question-by-profile term,
    which ``scripts/fit_page_profile.py`` fits afterwards on top of these."""
    import foveate
    from foveate.document.select import DEFAULT_MAX_FOCUS, allocate, page_features, page_scores
    from foveate.document.texture import DocumentTexture

    ranker = foveate.load_weights(None).text.ranker
    items = []
    for comp, pages, target, q in plan:
        if "stress" in comp:
            continue
        doc = DocumentTexture([tex for _, tex, _ in pages], "images")
        covers = [p.level_shapes[-1][0] * p.level_shapes[-1][1] for p in doc.pages]
        items.append((page_features(doc, q.text, ranker)[:, :4], target, covers))  # the profile term comes after
    grid = [0.0, 1.0, 2.0, 4.0, 8.0]
    results = []
    for lex, cos, theme in itertools.product(grid, grid, [0.0, 2.0, 4.0, 8.0, 16.0, 32.0]):
        rels = [(page_scores(f, lex, cos, theme), t, c) for f, t, c in items]
        right = sum(int(np.argmax(r)) == t for r, t, _ in rels) / len(items)
        for share in (0.3, 0.5, 0.7, 0.9):
            acc = 0.0
            for rel, target, covers in rels:
                focus, _ = allocate(rel, budget, covers, share, DEFAULT_MAX_FOCUS, 0)
                acc += focus.get(target, 0) / max(1, sum(focus.values()))
            results.append((round(acc / len(items), 4), right, -lex - cos - theme, lex, cos, theme, share))
    best = max(results)
    now = next(r for r in results if r[3:] == (4.0, 4.0, 0.0, 0.9))
    return {
        "documents": len(items),
        "PAGE_LEXICAL": best[3],
        "PAGE_COSINE": best[4],
        "PAGE_THEME": best[5],
        "PAGE_SHARE": best[6],
        "target_share": best[0],
        "best_page_right": round(best[1], 3),
        "without the theme (4, 4, 0, 0.9)": {"target_share": now[0], "best_page_right": round(now[1], 3)},
        "top": [r[3:] + (r[0],) for r in sorted(results, reverse=True)[:8]],
    }


KEYS = ("hit", "oracle_hit", "uniform_hit", "page_accuracy", "best_page_right", "uniform_page_share")


def summarise(rows, budgets) -> dict:
    """Means (in %) per budget over groups of rows: each composition, page count 2-8 and 9-20, and all documents
    whose questions are about one page."""
    groups = {c: (lambda r, c=c: r["set"] == c) for c in dict.fromkeys(r["set"] for r in rows)}
    groups["2-8 pages"] = lambda r: "stress" not in r["set"] and r["pages"] <= 8
    groups["9-20 pages"] = lambda r: "stress" not in r["set"] and r["pages"] >= 9
    groups["about one page"] = lambda r: "stress" not in r["set"]
    out = {}
    for b in budgets:
        for name, keep in groups.items():
            rs = [r for r in rows if r["budget"] == b and keep(r)]
            if rs:
                out[f"{name}@{b}"] = {
                    "documents": len(rs),
                    "mean_pages": round(statistics.mean(r["pages"] for r in rs), 2),
                    **{k: round(100 * statistics.mean(float(r[k]) for r in rs), 1) for k in KEYS},
                    "select_ms_median": round(statistics.median(r["select_ms"] for r in rs), 1),
                    "one_page_ms_median": round(statistics.median(r["oracle_ms"] for r in rs), 1),
                }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs=2, help="the forms' and the receipts' data folders")
    ap.add_argument("--docs", type=int, default=40, help="documents of each composition")
    ap.add_argument("--pages", type=int, nargs=2, default=(2, 20))
    ap.add_argument("--pool", type=int, default=24, help="pages of each real set at most")
    ap.add_argument("--generated", type=int, default=20, help="generated forms and letters (a quarter: bills)")
    ap.add_argument("--stress", type=int, default=40, help="documents of receipts asked any question")
    ap.add_argument("--budgets", type=int, nargs="+", default=[273, 576])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--split", default="test", help="pages of this split (train for --fit, val to choose)")
    ap.add_argument("--cache", default="out/doc-pages", help="folder to keep the encoded pages in between runs")
    ap.add_argument("--fit", action="store_true", help="choose PAGE_LEXICAL, PAGE_COSINE, PAGE_SHARE (train split)")
    ap.add_argument(
        "--profile", default=None, help="a candidate page-profile matrix (.npy) instead of the packaged one"
    )
    args = ap.parse_args()

    from foveate.document.pagescore import use_profile_file
    from foveate.document.select import select_document
    from foveate.document.texture import DocumentTexture
    from foveate.selection import select

    if args.profile:
        use_profile_file(args.profile)
    t0 = time.perf_counter()
    plan = build(args, Path(args.cache))
    encode_s = time.perf_counter() - t0
    if args.fit:
        print(json.dumps(fit(plan, args.budgets[0]), indent=1))
        return
    rows = []
    for comp, pages, target, q in plan:
        doc = DocumentTexture([tex for _, tex, _ in pages], "images")
        k = len(pages)
        for b in args.budgets:
            sel = select_document(doc, q.text, b)
            oracle = select_document(doc, q.text, b, page=target)
            uni = [select(p, q.text, max(1, b // k), mode="uniform") for p in doc.pages]
            rows.append(
                {
                    "set": comp,
                    "pages": k,
                    "budget": b,
                    "target": pages[target][0].name,
                    "query": q.text,
                    "hit": _hit(sel.selection(target), q),
                    "page_accuracy": sel.page_share(target, 0),
                    "best_page_right": int(np.argmax(sel.relevance)) == target,
                    "oracle_hit": _hit(oracle.selection(target), q),
                    "uniform_hit": _hit(uni[target], q),
                    "uniform_page_share": len(uni[target]) / max(1, sum(len(u) for u in uni)),
                    "select_ms": sel.timings_ms["total"],
                    "oracle_ms": oracle.timings_ms["total"],
                }
            )
    summary = summarise(rows, args.budgets)
    out = {"args": vars(args), "encode_s": round(encode_s, 1), "summary": summary, "rows": rows}
    print(json.dumps(summary, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
