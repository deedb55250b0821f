"""What completing and weighing the extent's hulls costs ``select`` (docs/lab/journal.md, "The extent's hulls
completed by top-k and weighed by auto"): the bundled page, the 16 questions of ``foveate bench`` asked before (their
embeddings, probabilities, extents and maps cached), ``auto`` at 273 tokens with the cut, in one process, alternating
rounds with :attr:`LikelyLines.regions` as it is (lines and hulls) and returning the lines alone (the code before).
One process and alternating rounds, so that a busy machine slows both arms alike.

    python docs/lab/scripts/hull_cost.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()

    import foveate
    from foveate.bench.encode import TEXT_QUERIES
    from foveate.query.base import LikelyLines
    from foveate.query.query import Query
    from foveate.query.terms import query_maps
    from foveate.synth.page import invoice_page
    from foveate.weights import load_weights

    tex = foveate.encode(invoice_page().image, device="cpu")
    weights = load_weights("default")
    with_hulls = LikelyLines.__dict__["regions"]
    lines_alone = property(lambda self: (self.boxes, self.heights, self.probs))

    for q in TEXT_QUERIES:  # warm: every cache filled
        foveate.select(tex, q, 273, weights=weights)
    times: dict[str, list[float]] = {"lines and hulls": [], "lines alone": []}
    try:
        for rnd in range(args.rounds):
            for arm in list(times) if rnd % 2 == 0 else list(times)[::-1]:
                setattr(LikelyLines, "regions", with_hulls if arm == "lines and hulls" else lines_alone)
                for q in TEXT_QUERIES:
                    t0 = time.perf_counter()
                    foveate.select(tex, q, 273, weights=weights)
                    times[arm].append((time.perf_counter() - t0) * 1000.0)
    finally:
        setattr(LikelyLines, "regions", with_hulls)
    for arm, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        print(f"{arm}: median {statistics.median(ts):.3f} ms [p25 {q[0]:.3f} - p75 {q[2]:.3f}], {len(ts)} selects")
    probs = [query_maps(tex, Query.coerce(q), weights).lines.hull_probs for q in TEXT_QUERIES]
    n, likely = [len(p) for p in probs], [int((p >= 0.01).sum()) for p in probs]
    print(f"hulls per question: {min(n)}-{max(n)}; at probability >= 0.01 (completed): {min(likely)}-{max(likely)}")


if __name__ == "__main__":
    main()
