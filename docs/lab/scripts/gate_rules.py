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


def held_out_grid(recs: list[dict], seed: int, assignments: int) -> list[dict]:
    """Every (tie, margin) of the grid, each record judged by the gate fitted without its fold (4 folds by image;
    assignment 0 is the run's), its held-out questions below uniform and mean hit averaged over ``assignments``."""
    from foveate.train import floor as tf

    def fold(r: dict, a: int) -> int:
        key = f"{seed}:{r['set']}:{r['image']}" if a == 0 else f"{seed}:{a}:{r['set']}:{r['image']}"
        return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 4

    grid = []
    for legible, tie in tf.GATE_GRID:
        runs = [
            tf.margin_scores(
                recs, tf.held_out_margins(recs, "learned", legible, tie, [fold(r, a) for r in recs]), "learned"
            )
            for a in range(assignments)
        ]
        for cells in zip(*runs):
            grid.append(
                {
                    "legible": legible,
                    "tie": tie,
                    "margin": cells[0]["margin"],
                    "below_uniform": float(np.mean([c["below_uniform"] for c in cells])),
                    "mean_hit": float(np.mean([c["mean_hit"] for c in cells])),
                }
            )
    return grid


def choose(recs: list[dict], seed: int, rule: str) -> tuple[dict[str, float], str]:
    from foveate.train import floor as tf

    grid = held_out_grid(recs, seed, 3 if rule == "joint3" else 1)
    if rule == "sequential":  # the tie chosen at margin 0, then the margin for that tie
        at0 = tf.safest_setting([g for g in grid if g["margin"] == 0.0])
        grid = [g for g in grid if g["tie"] == at0["tie"]]
    best = tf.safest_setting(grid)
    weights = tf.fit_gate(*tf.gate_data(recs, "learned", best["legible"], best["tie"]))
    weights["bias"] = round(weights["bias"] - best["margin"], 6)
    said = f"{best['below_uniform']:g} held-out questions below uniform, mean hit {best['mean_hit']:.2f}"
    return weights, f"tie {best['tie']}, margin {best['margin']}: {said}"


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
