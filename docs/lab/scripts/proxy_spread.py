"""Why the forms proxy's runs read apart, and three levers judged on FUNSD itself (docs/lab/journal.md, "Forms as a
kind not seen: where the seeds' spread comes from; nine rankers").  Every figure is hit % on all 1,378 FUNSD
questions, read as ``scripts/compare_weights.py --split all --sets funsd_forms`` reads them (mode ``auto``).

    python docs/lab/scripts/proxy_spread.py by-rank --cache out/train-cache 273 A.safetensors B.safetensors ...
    python docs/lab/scripts/proxy_spread.py pooled --cache out/train-cache A.safetensors B.safetensors ...
    python docs/lab/scripts/proxy_spread.py temperature --cache out/train-cache 1.5 A.safetensors B.safetensors ...
    python docs/lab/scripts/proxy_spread.py no-upright --cache out/train-cache A.safetensors B.safetensors ...

``by-rank``: per file, the rank of the answer line under its ranker and the hit at a budget for each rank group.
``pooled``: each file with its rankers replaced by every file's rankers averaged (its text term, extent and gate
kept).  ``temperature``: each file with its ranker's line probabilities raised to ``1/T`` (renormalised to the same
sum) before selection; ``no-upright``: lines printed upright get probability 0 -- all three read on FUNSD, so a
lever's size, not an admissible choice.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, "scripts")

BUDGETS = (64, 144, 273, 576)
ORDER = ("1st", "2nd-3rd", "4th-6th", "7th-10th", "11th+", "none")
EDGES = (1, 3, 6, 10)  # the first rank (0-based) past each group of ORDER


def _group(rank: int) -> str:
    """The group of ORDER an answer line's rank falls in (-1: no line holds the answer)."""
    return "none" if rank < 0 else ORDER[bisect.bisect_right(EDGES, rank)]


def _funsd(cache: Path) -> list:
    from compare_weights import SETS  # scripts/, as the script that reads the same pages
    from foveate.core.config import EncodeConfig
    from foveate.train.data import load_pages

    return load_pages([Path(s) for s in SETS if Path(s).name == "funsd_forms"], cache, EncodeConfig(), 0)[0]


def _hits(pages: list, rows: dict, budgets: tuple[int, ...]) -> list[dict]:
    from foveate.train.evaluate import records

    return records(pages, rows, budgets, prompts=False, workers=2, modes={k: "auto" for k in rows})


def _print_table(recs: list[dict], names: list[str]) -> None:
    from foveate.train.evaluate import hit_table

    table = hit_table(recs)["funsd_forms"]
    print("| budget | " + " | ".join(names) + " |")
    for b, row in table.items():
        print(f"| {b} | " + " | ".join(f"{row[n]:.1f}" for n in names) + " |")


def by_rank(cache: Path, budget: int, files: list[str]) -> None:
    from foveate.query.text.layout import text_index
    from foveate.query.text.ranker import softmax
    from foveate.train.ranker import answer_lines
    from foveate.weights import load_weights

    pages = _funsd(cache)
    rows = {f: load_weights(f) for f in files}
    recs = _hits(pages, rows, (budget,))
    for f, w in rows.items():
        groups: dict[str, list[int]] = defaultdict(list)
        i = 0
        for page in pages:
            index = text_index(page.texture)
            for s in page.samples:
                if s.text is None or s.points:
                    continue
                pos = answer_lines(index.boxes, s.boxes) if index is not None and index.lines else np.zeros(0, bool)
                rank = -1
                if pos.any():
                    x, eq = w.text.ranker.features(index, s.text)
                    p = softmax(w.text.ranker.logits(x, eq).astype(np.float64))[:-1]
                    rank = int(np.flatnonzero(pos[np.argsort(-p, kind="stable")])[0])
                groups[_group(rank)].append(int(recs[i]["methods"][f][0]))
                i += 1
        cells = ", ".join(
            f"{g}: {len(v)} q, {100 * np.mean(v):.1f} %"
            for g, v in sorted(groups.items(), key=lambda kv: ORDER.index(kv[0]))
        )
        hit = 100 * np.mean([r["methods"][f][0] for r in recs])
        print(f"{Path(f).name}: hit {hit:.1f} % at {budget}; answer line {cells}")


def pooled(cache: Path, files: list[str]) -> None:
    from foveate.query.text.ranker import RankerEnsemble
    from foveate.weights import load_weights

    loaded = [load_weights(f) for f in files]
    pool = RankerEnsemble([m for w in loaded for m in w.text.ranker.rankers]).eval()
    rows = {}
    for f, w in zip(files, loaded):
        rows[Path(f).stem] = w
        rows[Path(f).stem + "+pooled"] = dataclasses.replace(w, text=dataclasses.replace(w.text, ranker=pool))
    _print_table(_hits(_funsd(cache), rows, BUDGETS), list(rows))


def reweighted(cache: Path, change, files: list[str]) -> None:
    """Each file with ``change(probabilities, index)`` applied to its ranker's line probabilities before selection."""
    from foveate.query.text import ranker as R
    from foveate.weights import load_weights

    plain = R.AnswerRanker.probabilities

    def changed(self, index, text):
        p = plain(self, index, text).astype(np.float64)
        return (change(p, index) if len(p) and p.sum() > 0 else p).astype(np.float32)

    R.AnswerRanker.probabilities = changed  # the forked workers inherit it
    R.RankerEnsemble.probabilities = changed
    rows = {Path(f).stem: load_weights(f) for f in files}
    _print_table(_hits(_funsd(cache), rows, BUDGETS), list(rows))


def tempered(t: float):
    def change(p: np.ndarray, index) -> np.ndarray:
        q = p ** (1.0 / t)
        return q / q.sum() * p.sum()

    return change


def no_upright(p: np.ndarray, index) -> np.ndarray:
    """Lines printed upright (boxes 1.5 times taller than wide: a number stamped along the margin) get nothing."""
    b = index.boxes
    return np.where(b[:, 3] - b[:, 1] > 1.5 * (b[:, 2] - b[:, 0]), 0.0, p)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["by-rank", "pooled", "temperature", "no-upright"])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("args", nargs="+")
    a = ap.parse_args()
    if a.what == "by-rank":
        by_rank(a.cache, int(a.args[0]), a.args[1:])
    elif a.what == "pooled":
        pooled(a.cache, a.args)
    elif a.what == "temperature":
        reweighted(a.cache, tempered(float(a.args[0])), a.args[1:])
    else:
        reweighted(a.cache, no_upright, a.args)


if __name__ == "__main__":
    sys.exit(main())
