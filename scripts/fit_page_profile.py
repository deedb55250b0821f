"""Fit the page score's question-by-profile matrix (``foveate/document/page_profile.npy``) on documents of
training-split pages.

    python scripts/fit_page_profile.py FUNSD_DIR WILDRECEIPT_DIR [--docs 300] [--pool 64] [--lam 0.001]
        [--steps 1000] [--out src/foveate/document/page_profile.npy]

The documents are those of ``scripts/eval_documents.py --split train`` (forms and expense reports, 2-20 pages, each
question about one page; ``--pool`` pages of each real set).  Each document's pages compete in a conditional logit: a
page's score is the shipped page score without the profile term (``log p + PAGE_LEXICAL * lex + PAGE_COSINE * cos +
PAGE_THEME * theme``) plus ``q . (A @ [profile | evidence])`` (:mod:`foveate.document.pagescore`: the page's profile
and those four terms); ``A`` (384 x 12) is fitted by ``--steps`` steps of gradient ascent on the log likelihood of the
target page, with an L2 penalty ``--lam``.  Pool, penalty and steps were chosen on documents of validation-split
pages (``scripts/eval_documents.py --split val --pool 40 --docs 60 --profile CANDIDATE.npy``; docs/documents.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs=2)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--pool", type=int, default=64)
    ap.add_argument("--generated", type=int, default=20)
    ap.add_argument("--lam", type=float, default=0.001)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default="out/doc-pages")
    ap.add_argument("--out", default="src/foveate/document/page_profile.npy")
    args = ap.parse_args()

    sys.path.insert(0, str(Path(__file__).parent))
    import eval_documents as E
    import foveate
    from foveate.document.pagescore import MATRIX_COLUMNS, PAGE_THEME
    from foveate.document.select import page_features, profile_row
    from foveate.document.texture import DocumentTexture
    from foveate.query.text.embed import embed_query
    from foveate.weights.defaults import PAGE_COSINE, PAGE_LEXICAL

    ns = argparse.Namespace(
        data=args.data, split="train", pool=args.pool, seed=args.seed, generated=args.generated, docs=args.docs,
        stress=0, pages=(2, 20),
    )  # fmt: skip
    ranker = foveate.load_weights(None).text.ranker
    w0 = np.array([1.0, PAGE_LEXICAL, PAGE_COSINE, PAGE_THEME])
    items = []
    for _, pages, target, q in E.build(ns, Path(args.cache)):
        doc = DocumentTexture([tex for _, tex, _ in pages], "images")
        evidence = page_features(doc, q.text, ranker)[:, :4]
        prof = np.array([profile_row(p, ev) for p, ev in zip(doc.pages, evidence)])
        items.append((evidence @ w0, prof, embed_query(q.text).astype(np.float64), target))
    a = np.zeros((384, len(MATRIX_COLUMNS)))
    for _ in range(args.steps):
        grad = np.zeros_like(a)
        for base, prof, qe, t in items:
            z = base + prof @ (a.T @ qe)
            p = np.exp(z - z.max())
            p /= p.sum()
            grad += np.outer(qe, prof[t] - p @ prof)
        a += grad / len(items) - args.lam * a
    right = np.mean([int(np.argmax(b + pr @ (a.T @ qe))) == t for b, pr, qe, t in items])
    before = np.mean([int(np.argmax(b)) == t for b, _, _, t in items])
    np.save(args.out, a.astype(np.float32))
    print(f"{len(items)} training documents: best page right {before:.3f} -> {right:.3f}; wrote {args.out}")


if __name__ == "__main__":
    main()
