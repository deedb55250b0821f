"""Is a "kind not seen" proxy's figure the luck of its rankers' seeds?  Runs ``foveate train`` on SOURCES with every
answer ranker (the final ones and the cross-fitting ones) started from its usual seed plus ``--offset``, while the
split and everything else stay those of ``--seed`` (``foveate train --seed`` would move the split and draw other
generated pages too).  EVAL.md, "The text term's constants judged on maps of a ranker that never saw the page".

    python scripts/proxy_seeds.py --offset 100 -o nofunsd_s100.safetensors --cache out/train-cache \
        ../shared/data/wildreceipt ../shared/data/coco_panoptic_grounding synth:400:receipt,invoice,letter,form
    python scripts/compare_weights.py --cache out/train-cache --split all --sets funsd_forms \
        --row s100=nofunsd_s100.safetensors

Writes the weights file (validation only, no test) and prints the text-term constants the run chose.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="+")
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--offset", type=int, default=100, help="added to every ranker's seed")
    ap.add_argument("--cache", type=Path, default=Path("out/train-cache"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rankers", type=int, default=3)
    args = ap.parse_args()

    import foveate.train.run as run
    from foveate.train import TrainConfig

    fit = run.fit_rankers  # what foveate train calls for the final rankers and the cross-fitting ones
    run.fit_rankers = lambda pages, seed=0, **kw: fit(pages, seed=seed + args.offset, **kw)
    res = run.train(
        TrainConfig(
            tuple(args.sources),
            args.output,
            cache=args.cache,
            seed=args.seed,
            rankers=args.rankers,
            evaluate_test=False,
        )
    )
    print("text term:", res.report["scorer"]["text_term_search"]["chosen"])


if __name__ == "__main__":
    main()
