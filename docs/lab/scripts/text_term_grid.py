"""Is the text term's grid search (``foveate train``, :func:`foveate.train.run.calibrate_text_term`) choosing an
optimum or its grid's edge?  Scores other (text weight, sharpness) pairs of a weights file by the same criterion on
the same training pages (EVAL.md, "Later this round: refits on the new OCR").

    python scripts/text_term_grid.py --cache out/train-cache --weights default 40,10 80,10 40,20 80,20 160,20

Prints, per pair, best first, the criterion (the mean over sets of the mean hit over 64 / 144 / 273 / 576 tokens,
each question the better of the foveated selection and the uniform layout).  Reads the textures from
``--cache`` (a ``foveate train`` cache of the shipped recipe's sets; missing ones are encoded, which takes a while).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ranker_seeds import _pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="text weight,sharpness")
    ap.add_argument("--cache", type=Path, default=Path("out/train-cache"))
    ap.add_argument("--weights", default="default")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()

    from foveate.core.device import train_workers
    from foveate.train.data import by_split
    from foveate.train.run import text_term_hit, text_term_sample, text_term_variant
    from foveate.weights import load_weights

    w = load_weights(args.weights)
    named = dict(text_term_variant(w, *(float(x) for x in pair.split(","))) for pair in args.pairs)
    sample = text_term_sample(by_split(_pages(args.cache), "train"), seed=0)
    tried = text_term_hit(sample, named, (64, 144, 273, 576), args.workers or train_workers())
    for name, hit in sorted(tried.items(), key=lambda kv: -kv[1]):
        print(f"{name}: {hit:.2f} %")


if __name__ == "__main__":
    main()
