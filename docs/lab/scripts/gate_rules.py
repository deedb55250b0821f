"""The floor gate's (tie, margin) chosen by three rules, on one weights file (docs/lab/journal.md, "The floor gate's
tie and margin chosen together"): the gate alone is fitted again on the file's training split (the same sources,
seed and split as its run; everything else of the file kept), then every image of FUNSD, WildReceipt and COCO is
judged with the file's own gate and the three refits.

* ``sequential``: the rule of 2026-11-28 -- the tie with the fewest held-out questions below the uniform layout at
  margin 0 (then the highest mean hit), then the margin for that tie;
* ``joint``: (tie, margin) chosen together (what ``foveate.train.floor.choose_gate`` does now);
* ``joint3``: ``joint`` with three fold assignments, their below-uniform counts and mean hits averaged.

Every refit scores the training records with the file's weights as saved (the prompt term's hand-set weight), as
``foveate train`` now does; a file trained before that fix was gated on its fitted prompt weight, so its own gate
can differ from ``sequential`` on the same records.

    python docs/lab/scripts/gate_rules.py nofunsd-s300.safetensors --seed 300 --cache out/train-cache \\
        ../shared/data/wildreceipt ../shared/data/coco_panoptic_grounding synth:400:receipt,invoice,letter,form
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

EVAL_SETS = ("../shared/data/funsd_forms", "../shared/data/wildreceipt", "../shared/data/coco_panoptic_grounding")
BUDGETS = (64, 144, 273, 576)


def cross_fitted(recs: list[dict], legible: float, tie: float, seed: int, assignment: int) -> list[float]:
    """Each record's margin under the gate fitted without its fold (4 folds by image; assignment 0 is the run's)."""
    from foveate.selection.floor import floor_margin
    from foveate.train import floor as tf

    def fold(r: dict) -> int:
        key = f"{seed}:{r['set']}:{r['image']}" if assignment == 0 else f"{seed}:{assignment}:{r['set']}:{r['image']}"
        return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 4

    which = [fold(r) for r in recs]
    margins = [0.0] * len(recs)
    for k in range(4):
        fitted = tf.fit_gate(*tf.gate_data([r for r, f in zip(recs, which) if f != k], "learned", legible, tie))
        for i, f in enumerate(which):
            if f == k:
                margins[i] = floor_margin(fitted, recs[i]["features"])
    return margins


def score(recs: list[dict], held: list[list[float]], offset: float) -> tuple[float, float]:
    """(below-uniform questions, mean hit), averaged over the fold assignments in ``held``."""
    from foveate.train import floor as tf

    cells = [tf._below_and_mean(tf.gated_hits({}, recs, "learned", m, offset)) for m in held]
    return float(np.mean([b for b, _ in cells])), float(np.mean([h for _, h in cells]))


def choose(recs: list[dict], seed: int, rule: str) -> tuple[dict[str, float], str]:
    from foveate.train import floor as tf

    assignments = 3 if rule == "joint3" else 1
    held = {g: [cross_fitted(recs, *g, seed, a) for a in range(assignments)] for g in tf.GATE_GRID}
    grid = [
        (*score(recs, held[g], m), g, m)
        for g in tf.GATE_GRID
        for m in (tf.MARGIN_GRID if rule != "sequential" else (0.0,))
    ]
    below, mean, gate, margin = min(grid, key=lambda s: (s[0], -s[1], s[3]))
    if rule == "sequential":  # the margin for the tie chosen at margin 0
        below, mean, gate, margin = min(
            ((*score(recs, held[gate], m), gate, m) for m in tf.MARGIN_GRID), key=lambda s: (s[0], -s[1], s[3])
        )
    weights = tf.fit_gate(*tf.gate_data(recs, "learned", *gate))
    weights["bias"] = round(weights["bias"] - margin, 6)
    return weights, f"tie {gate[1]}, margin {margin}: {below:g} held-out questions below uniform, mean hit {mean:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights")
    ap.add_argument("sources", nargs="+", help="the file's training sources, as given to foveate train")
    ap.add_argument("--seed", type=int, required=True, help="the file's training seed")
    ap.add_argument("--cache", type=Path, default=Path("out/train-cache"))
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    from foveate.core.config import EncodeConfig
    from foveate.train.data import by_split, load_pages, resolve_sources
    from foveate.train.evaluate import fallback_table, format_table, hit_table, records
    from foveate.weights import load_weights
    from foveate.weights.weights import FloorGate

    base = load_weights(args.weights)
    learned = base.replace(floor=None)
    folders = resolve_sources(list(args.sources), args.cache, args.seed)
    pages, _ = load_pages(folders, args.cache, EncodeConfig(), args.seed, None, 0.1)  # 0.1: train's prompt share
    recs = records(
        by_split(pages, "train"), {"learned": learned}, BUDGETS, floor="off", gate_features=True, workers=args.workers
    )
    del pages
    rows = {"file": base}
    for rule in ("sequential", "joint", "joint3"):
        gate, said = choose(recs, args.seed, rule)
        print(f"{rule}: {said}")
        rows[rule] = base.replace(floor=FloorGate(gate))
    pages, _ = load_pages([Path(s) for s in EVAL_SETS], args.cache, EncodeConfig(), 0)
    judged = records(pages, rows, BUDGETS, prompts=False, workers=args.workers)
    print(format_table(hit_table(judged), [*rows, "uniform"], "hit %, every image"))
    print(format_table(fallback_table(judged), list(rows), "fall-back %, every image"))


if __name__ == "__main__":
    main()
