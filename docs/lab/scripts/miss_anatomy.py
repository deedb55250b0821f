"""What a weights file's misses look like on FUNSD: for each question the selection misses at ``--budget``, how many
answer boxes it has, how much of each is legible, and the rank of the answer line under the file's ranker
(docs/lab/journal.md, "Forms as a kind not seen on encoder version 7").

    python docs/lab/scripts/miss_anatomy.py WEIGHTS --cache out/train-cache [--budget 576] [--rows]

A miss is "in several boxes" when its answer has more than one box (a value in pieces, a column), "partly legible"
when its one box is partly sharp, "blurred" when none of it is; the rank groups are ``scripts/where_misses.py``'s.
``--rows`` also prints each miss: image, question, mode, rank, the answer line's and the top line's probability,
each box's legible share and coverage, the levels of the tokens over each box, the boxes' text heights.  Reads the
textures as ``scripts/compare_weights.py`` does (the cache's store; images not in it are encoded).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, "scripts")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--budget", type=int, default=576)
    ap.add_argument("--rows", action="store_true", help="print every miss")
    args = ap.parse_args()

    from compare_weights import SETS
    from foveate import select
    from foveate.core.config import EncodeConfig
    from foveate.eval.metrics import query_metrics
    from foveate.query.text.layout import text_index
    from foveate.query.text.ranker import softmax
    from foveate.train.data import load_pages
    from foveate.train.ranker import answer_lines
    from foveate.weights import load_weights

    pages, _ = load_pages([Path(s) for s in SETS if Path(s).name == "funsd_forms"], args.cache, EncodeConfig(), 0)
    weights = load_weights(args.weights)
    ranker = weights.text.ranker
    groups: Counter = Counter()
    asked = 0
    for page in pages:
        index, tex = text_index(page.texture), page.texture
        for s in page.samples:
            if s.text is None or s.points:
                continue
            asked += 1
            sel = select(tex, s.query, args.budget, weights=weights, cut=False)
            m = query_metrics(
                sel.boxes, None, s.boxes, tex.image_size, s.heights, token_scales=sel.scales, any_box=s.any_box
            )
            if m.hit:
                continue
            pos = answer_lines(index.boxes, s.boxes) if index is not None and index.lines else np.zeros(0, bool)
            p = np.zeros(0)
            rank = -1
            if pos.any():
                rows, eq = ranker.features(index, s.text)
                p = softmax(ranker.logits(rows, eq).astype(np.float64))[:-1]
                rank = int(np.flatnonzero(pos[np.argsort(-p, kind="stable")])[0])
            legible = [b["legible_coverage"] for b in m.per_box]
            shape = "several boxes" if len(legible) > 1 else "partly legible" if legible[0] > 0 else "blurred"
            where = "no answer line" if rank < 0 else "first" if rank == 0 else "2nd-3rd" if rank < 3 else "4th+"
            groups[(shape, where)] += 1
            if args.rows:
                levels = []
                for g in np.asarray(s.boxes, np.float64).reshape(-1, 4):
                    b = sel.boxes
                    over = (b[:, 0] < g[2]) & (b[:, 2] > g[0]) & (b[:, 1] < g[3]) & (b[:, 3] > g[1])
                    levels.append(sorted({round(float(x), 1) for x in np.log2(sel.scales[over])}))
                print(
                    Path(page.image).name,
                    repr(s.text[:40]),
                    sel.mode,
                    rank,
                    round(float(p[pos].max()), 3) if pos.any() else None,
                    round(float(p.max()), 3) if len(p) else None,
                    [round(x, 2) for x in legible],
                    [round(b["coverage"], 2) for b in m.per_box],
                    levels,
                    None if s.heights is None else np.round(np.asarray(s.heights, float), 1).tolist(),
                    sep=" | ",
                )
    missed = sum(groups.values())
    print(f"{args.weights}, FUNSD (every page), {args.budget} tokens: {asked} questions, {missed} missed")
    for (shape, where), n in sorted(groups.items()):
        print(f"  {shape:15s} answer line {where:15s} {n:4d}")


if __name__ == "__main__":
    main()
