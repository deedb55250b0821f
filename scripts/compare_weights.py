"""Hit of several (weights, mode) rows on the same questions of one split (EVAL.md, "This round"): the previous file
in mode quadtree against the shipped one in mode auto, for example.

    python scripts/compare_weights.py --cache out/train-cache --split val \
        --row previous=previous.safetensors:quadtree --row shipped=default:auto
    python scripts/compare_weights.py --cache out/train-cache --split val --paired shipped \
        --row shipped=default --row new=weights.safetensors          # + questions gained / lost against shipped
    python scripts/compare_weights.py --cache out/train-cache --split all --sets wildreceipt \
        --row proxy=nowr.safetensors --row shipped=default    # a set a file was trained without: every image

Reads the textures of the shipped recipe's real sets from ``--cache`` (a ``foveate train`` cache; missing ones are
encoded, which takes a while), splits them as ``foveate train`` does (seed 0), and scores every row with
``foveate.train.evaluate.records`` (floor as ``select``'s default, no prompts), next to the uniform layout.  A
question a row cannot select for at a budget (a quadtree below its coarsest cover) is left out of every row at that
budget, so all rows stand on the same questions.  A second table gives, per row, set and budget, the share of the
questions the uniform floor answered instead of a foveated selection (the fall-back rate).  With ``--paired NAME``, a
third gives every other row's questions gained and lost against row NAME, with the exact sign test's p: how many
questions a difference stands on (a 0.5-point rule on 219 questions is one question).
"""

from __future__ import annotations

import argparse
from pathlib import Path

SETS = ["../shared/data/funsd_forms", "../shared/data/wildreceipt", "../shared/data/coco_panoptic_grounding"]
BUDGETS = (64, 144, 273, 576)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--split", default="val", choices=["train", "val", "test", "all"])
    ap.add_argument(
        "--sets",
        default=",".join(Path(s).name for s in SETS),
        help="comma-separated names of the shared sets to score (default: all three)",
    )
    ap.add_argument("--row", action="append", required=True, help="NAME=WEIGHTS[:MODE] (mode default auto)")
    ap.add_argument(
        "--paired",
        metavar="NAME",
        help="also print, for every other row, the questions it gains and loses against row NAME (sign test's p)",
    )
    args = ap.parse_args()

    from foveate.core.config import EncodeConfig
    from foveate.train.data import by_split, load_pages
    from foveate.train.evaluate import fallback_table, format_table, hit_table, paired_table, records
    from foveate.weights import load_weights

    rows, modes = {}, {}
    for spec in args.row:
        name, _, rest = spec.partition("=")
        weights, _, mode = (
            rest.rpartition(":") if rest.endswith((":auto", ":quadtree", ":topk")) else (rest, "", "auto")
        )
        rows[name], modes[name] = load_weights(weights), mode
    if args.paired is not None and args.paired not in rows:
        ap.error(f"--paired {args.paired!r} names no --row; rows: {list(rows)}")
    names = args.sets.split(",")
    unknown = sorted(set(names) - {Path(s).name for s in SETS})
    if unknown:
        ap.error(f"unknown set(s) {unknown}; choose among {[Path(s).name for s in SETS]}")
    pages, _ = load_pages([Path(s) for s in SETS if Path(s).name in names], args.cache, EncodeConfig(), 0)
    if args.split != "all":
        pages = by_split(pages, args.split)
    recs = records(pages, rows, BUDGETS, prompts=False, workers=2, modes=modes)
    where = "every image" if args.split == "all" else f"the {args.split} split"
    print(format_table(hit_table(recs), [*rows, "uniform"], f"Hit % on {where}, the same questions"))
    print()
    print(format_table(fallback_table(recs), [*rows], f"Fall-back % on {where}: questions the uniform floor answered"))
    if args.paired is not None:
        others = [n for n in rows if n != args.paired]
        print()
        print(format_table(paired_table(recs, args.paired), others, f"Questions gained / lost against {args.paired}"))


if __name__ == "__main__":
    main()
