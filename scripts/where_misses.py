"""Where a weights file's misses come from: for each question, the rank of the first line holding its answer under
the file's answer ranker, and whether the selection at ``--budget`` hit (docs/lab/journal.md, "A label alone holds
no value").

    python scripts/where_misses.py WEIGHTS --cache out/train-cache [--sets funsd_forms] [--split all] [--budget 273]

Reads (or encodes) the textures as ``scripts/compare_weights.py`` does; a question is "first" when a line holding its
answer (``foveate.train.ranker.answer_lines``) is the ranker's most likely line, "no answer line" when OCR read no
line holding it.  Prints per group the questions and the misses at the budget.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from compare_weights import SETS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--sets", default="funsd_forms", help="comma-separated names of the shared sets")
    ap.add_argument("--split", default="all", choices=["train", "val", "test", "all"])
    ap.add_argument("--budget", type=int, default=273)
    args = ap.parse_args()

    import numpy as np

    from foveate.core.config import EncodeConfig
    from foveate.query.text.layout import text_index
    from foveate.query.text.ranker import softmax
    from foveate.train.data import by_split, load_pages
    from foveate.train.evaluate import records
    from foveate.train.ranker import answer_lines
    from foveate.weights import load_weights

    names = args.sets.split(",")
    pages, _ = load_pages([Path(s) for s in SETS if Path(s).name in names], args.cache, EncodeConfig(), 0)
    if args.split != "all":
        pages = by_split(pages, args.split)
    weights = load_weights(args.weights)
    ranker = weights.text.ranker
    hits = {
        (r["image"], r["text"]): r["methods"]["w"][0]
        for r in records(pages, {"w": weights}, (args.budget,), prompts=False, workers=2)
    }
    asked, missed = Counter(), Counter()
    for page in pages:
        index = text_index(page.texture)
        for s in page.samples:
            hit = hits.get((page.image, s.text))
            if hit is None or s.text is None or s.points:
                continue
            pos = answer_lines(index.boxes, s.boxes) if index is not None and index.lines else np.zeros(0, bool)
            if not pos.any():
                group = "no line holds the answer"
            else:
                rows, eq = ranker.features(index, s.text)
                p = softmax(ranker.logits(rows, eq).astype(np.float64))[:-1]
                rank = int(np.flatnonzero(pos[np.argsort(-p, kind="stable")])[0])
                group = "answer line first" if rank == 0 else "2nd-3rd" if rank < 3 else "4th or later"
            asked[group] += 1
            missed[group] += not hit
    n = sum(asked.values())
    print(
        f"{args.weights}, {args.sets} ({args.split}), {args.budget} tokens: {n} questions, hit "
        f"{100 * (1 - sum(missed.values()) / max(n, 1)):.1f} %"
    )
    for group in ("answer line first", "2nd-3rd", "4th or later", "no line holds the answer"):
        print(f"  {group:25s} {asked[group]:5d} questions, {missed[group]:4d} missed")


if __name__ == "__main__":
    main()
