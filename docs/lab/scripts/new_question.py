"""Where a new question's time goes once MiniLM's pass is paid: ``select`` and the learned text term's parts.

    python scripts/new_question.py [-n 5]

Encodes the bundled page once (``default`` preset) and takes the shipped weights.  For ``foveate bench``'s 16 text
questions (each question's embedding cached, so MiniLM's pass is not timed; ``foveate bench`` times it), ``-n``
rounds of: the texture's recent answers cleared, then ``select`` (default mode, 273 tokens, the token cut) -- a new
question -- and the same question again (its answer probabilities and painted map now cached); then, each on a
cleared cache, the text term's parts: the answer ranker's probabilities (features and logits), the extent model's
hulls, and the painting of lines and hulls on the tile grid (:func:`foveate.query.text.term.answer_map`).  Medians
in ms.  Backs BENCHMARKS.md ("The text term's painting"); run it from two checkouts (``PYTHONPATH=OTHER/src``) to
compare them.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="rounds over the 16 questions")
    args = ap.parse_args()

    import foveate
    from foveate.bench.common import EXAMPLES
    from foveate.bench.encode import TEXT_QUERIES
    from foveate.query.text.embed import embed_query
    from foveate.query.text.layout import text_index
    from foveate.query.text.term import answer_boxes, answer_extent, answer_map, answer_probabilities
    from foveate.selection import select
    from foveate.weights import load_weights

    tex = foveate.encode(str(EXAMPLES / "page.png"), device="cpu")
    w = load_weights("default")
    index = text_index(tex)
    paint = w.text.paint
    for q in TEXT_QUERIES:
        embed_query(q)
    select(tex, TEXT_QUERIES[0], weights=w)  # warm-up

    def timed(fn) -> float:
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) * 1e3

    ms: dict[str, list[float]] = {k: [] for k in ("new question", "asked before", "ranker", "extent", "paint")}
    for _ in range(args.n):
        for q in TEXT_QUERIES:
            index.recent.clear()
            ms["new question"].append(timed(lambda: select(tex, q, weights=w)))
            ms["asked before"].append(timed(lambda: select(tex, q, weights=w)))
            index.recent.clear()
            ms["ranker"].append(timed(lambda: answer_probabilities(index, q, w.text.ranker)))
            p = answer_probabilities(index, q, w.text.ranker)
            ms["extent"].append(timed(lambda: answer_extent(index, q, p, w.text.extent)))
            boxes, probs, heights = answer_boxes(index, q, w.text.ranker, w.text.extent)
            ms["paint"].append(timed(lambda: answer_map(index, probs, *paint, boxes, heights)))
    print(
        f"bundled page, {len(index.lines)} OCR lines, {len(TEXT_QUERIES)} questions x {args.n}, 273 tokens; "
        f"median ms (MiniLM's pass not included)"
    )
    for name, v in ms.items():
        print(f"  {name:13s} {statistics.median(v):6.3f}")


if __name__ == "__main__":
    main()
