"""How much one answer ranker depends on its seed, and what averaging several buys (EVAL.md, "A cold rerun, and one
seed or three").

    python scripts/ranker_seeds.py seeds --cache out/train-cache [-n 5] [--epochs 12] [--hidden 32]
    python scripts/ranker_seeds.py logit-mean WEIGHTS --cache out/train-cache
    python scripts/ranker_seeds.py answer-lines [WEIGHTS] --cache out/train-cache [--split train]
    python scripts/ranker_seeds.py cost WEIGHTS [WEIGHTS ...]

``seeds`` fits ``-n`` rankers (seeds 0..n-1; ``--epochs`` and ``--hidden`` as ``fit_ranker``'s) on the training split of
the shipped recipe's sets, as ``foveate train`` does, and prints each one's validation top-1 per set, then the mean of
the first three's and of all their probabilities. ``logit-mean`` scores a weights file whose ranker is an ensemble on
the validation split twice: as it is (mean of probabilities) and with the members' logits averaged instead, nothing
refitted. ``answer-lines`` shows how a ranker (the shipped one by default) shares its probability among a question's
answer lines. These three read the textures from ``--cache`` (a ``foveate train`` cache; missing ones are encoded, which
takes a while). ``cost`` times what a file's ranker adds to a new question on the bundled page (its logits over the
page's lines, the features computed once), median of 200.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

SOURCES = [
    "../shared/data/funsd_forms",
    "../shared/data/wildreceipt",
    "../shared/data/coco_panoptic_grounding",
    "synth:300",
]


def _pages(cache: Path):
    from foveate.core.config import EncodeConfig
    from foveate.train.data import load_pages, resolve_sources

    folders = resolve_sources(SOURCES, cache, 0)
    pages, _ = load_pages(folders, cache, EncodeConfig(preset="default"), 0, None, 0.1)
    return pages


def seeds(cache: Path, n: int, epochs: int = 12, hidden: int = 32) -> None:
    from foveate.query.text.ranker import softmax
    from foveate.train.data import by_split
    from foveate.train.ranker import build_groups, fit_ranker

    pages = _pages(cache)
    train, val = by_split(pages, "train"), by_split(pages, "val")
    rankers = []
    for seed in range(n):
        r, rep = fit_ranker(train, seed=seed, max_epochs=epochs, hidden=hidden, log=lambda *_: None)
        rankers.append(r)
        print(f"seed {seed}: best epoch {rep['epochs']}, held-out top-1 {100 * rep['held_out_top1']:.1f} %", flush=True)
    groups = [g for g in build_groups(val, rankers[0]) if g.positive[:-1].any()]

    def soft(r, g):
        return softmax(r.logits(g.rows, g.query_embedding).astype(np.float64))

    def top1(probs, sets):
        gs = [g for g in groups if sets is None or g.set in sets]
        return 100.0 * np.mean([bool(g.positive[:-1][int(np.argmax(probs(g)[:-1]))]) for g in gs]), len(gs)

    for name, sets in (("all", None), ("funsd_forms", {"funsd_forms"}), ("wildreceipt", {"wildreceipt"})):
        singles = [top1(lambda g, r=r: soft(r, g), sets)[0] for r in rankers]
        three, m = top1(lambda g: np.mean([soft(r, g) for r in rankers[:3]], 0), sets)
        every, _ = top1(lambda g: np.mean([soft(r, g) for r in rankers], 0), sets)
        print(
            f"{name} ({m} questions): one seed "
            + " / ".join(f"{v:.1f}" for v in singles)
            + f" %; mean of 3: {three:.1f} %"
            + (f"; mean of {n}: {every:.1f} %" if n != 3 else "")
        )


def logit_mean(weights: Path, cache: Path) -> None:
    from foveate.query.text.ranker import RankerEnsemble
    from foveate.train.data import by_split
    from foveate.train.evaluate import format_table, hit_table, records
    from foveate.weights import load_weights

    class LogitMean(RankerEnsemble):
        def logits(self, rows, query_embedding):
            return np.mean([m.logits(rows, query_embedding) for m in self.members], 0).astype(np.float32)

    w = load_weights(str(weights))
    if not isinstance(w.text.ranker, RankerEnsemble):
        raise SystemExit(f"{weights} holds one ranker, not an ensemble (foveate train --rankers N)")
    geo = w.replace(text_ranker=LogitMean(list(w.text.ranker.members)).eval())
    named = {"probability_mean": w, "logit_mean": geo}
    recs = records(by_split(_pages(cache), "val"), named, (64, 144, 273, 576), prompts=False)
    print(format_table(hit_table(recs), list(named) + ["uniform"], "Validation hit % (quadtree)"))


def answer_lines(weights: str, cache: Path, split: str) -> None:
    """How a weights file's ranker shares its probability among a question's answer lines, by set and by their
    number (3 or more counted together): how often they are its k most likely lines (k answer lines), and the median
    probability of the least likely of them."""
    from foveate.query.text.ranker import softmax
    from foveate.train.data import by_split
    from foveate.train.ranker import build_groups
    from foveate.weights import load_weights

    ranker = load_weights(weights).text.ranker
    stats: dict[tuple[str, int], list[tuple[bool, float]]] = {}
    for g in build_groups(by_split(_pages(cache), split), ranker):
        pos = g.positive[:-1]
        if pos.any():
            p = softmax(ranker.logits(g.rows, g.query_embedding).astype(np.float64))[:-1]
            k = int(pos.sum())
            stats.setdefault((g.set, min(k, 3)), []).append((bool(pos[np.argsort(-p)[:k]].all()), float(p[pos].min())))
    for (name, k), rows in sorted(stats.items()):
        first, low = np.mean([r[0] for r in rows]), np.median([r[1] for r in rows])
        print(
            f"{name}, {k}{'+' if k == 3 else ''} answer line(s), {len(rows)} questions: they are its most likely "
            f"lines {100 * first:.1f} %, the least likely one's probability (median) {low:.3f}"
        )


def cost(files: list[str]) -> None:
    import time

    from foveate.bench.common import EXAMPLES
    from foveate.core.config import EncodeConfig
    from foveate.core.io import load_image
    from foveate.core.texture import encode_array
    from foveate.query.text.layout import text_index
    from foveate.weights import load_weights

    index = text_index(encode_array(load_image(EXAMPLES / "page.png"), EncodeConfig()))
    for name in files:
        ranker = load_weights(name).text.ranker
        rows, eq = ranker.features(index, "What is the total?")
        times = []
        for _ in range(201):
            t0 = time.perf_counter()
            ranker.logits(rows, eq)
            times.append(time.perf_counter() - t0)
        members = len(getattr(ranker, "members", [ranker]))
        ms = 1e3 * np.median(times[1:])
        print(f"{name}: {members} ranker(s), {len(index.lines)} lines: logits {ms:.3f} ms (median)")


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("seeds")
    a.add_argument("--cache", type=Path, default=Path("out/train-cache"))
    a.add_argument("-n", type=int, default=5)
    a.add_argument("--epochs", type=int, default=12, help="epochs per ranker (foveate train --epochs)")
    a.add_argument("--hidden", type=int, default=32, help="the ranker's hidden units")
    b = sub.add_parser("logit-mean")
    b.add_argument("weights", type=Path)
    b.add_argument("--cache", type=Path, default=Path("out/train-cache"))
    c = sub.add_parser("answer-lines")
    c.add_argument("weights", nargs="?", default="default")
    c.add_argument("--cache", type=Path, default=Path("out/train-cache"))
    c.add_argument("--split", default="train")
    d = sub.add_parser("cost")
    d.add_argument("weights", nargs="+")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.cmd == "seeds":
        seeds(args.cache, args.n, args.epochs, args.hidden)
    elif args.cmd == "logit-mean":
        logit_mean(args.weights, args.cache)
    elif args.cmd == "cost":
        cost(args.weights)
    else:
        answer_lines(args.weights, args.cache, args.split)


if __name__ == "__main__":
    main()
