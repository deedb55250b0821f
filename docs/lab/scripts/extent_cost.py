"""What the answer-extent model costs ``select``: the shipped weights with and without it, interleaved in one process.

    python scripts/extent_cost.py [-n 15]

Encodes the bundled page once (``default`` preset), then times ``select`` (default mode, 273 tokens, the token cut)
for ``foveate bench``'s 16 text questions: *warm* (the question asked before: its answer probabilities and painted
map cached with the texture) and *new* (the texture's recent answers cleared before each question; the question's
embedding cached, so MiniLM's pass is not timed).  The two weights alternate question by question, so the machine's
load hits both alike.  Also prints how often ``auto`` chose each layout (the extent changes the map, so it can change
which layout wins).  Backs BENCHMARKS.md ("What the extent costs").
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="warm rounds over the 16 questions")
    args = ap.parse_args()

    import foveate
    from foveate.bench.encode import TEXT_QUERIES
    from foveate.query.text.layout import text_index
    from foveate.selection import select
    from foveate.weights import load_weights

    page = Path(foveate.__file__).resolve().parent / "examples" / "page.png"
    tex = foveate.encode(str(page), device="cpu")
    shipped = load_weights("default")
    if shipped.text.extent is None:
        raise SystemExit("the shipped weights have no extent model")
    rows = {"with extent": shipped, "without": shipped.replace(text_extent=None)}
    layouts = {k: {} for k in rows}
    for name, w in rows.items():
        for q in TEXT_QUERIES:
            mode = select(tex, q, weights=w).mode
            layouts[name][mode] = layouts[name].get(mode, 0) + 1
    warm = {k: [] for k in rows}
    new = {k: [] for k in rows}
    order = list(rows.items())
    for r in range(args.n):
        for q in TEXT_QUERIES:
            for name, w in order if r % 2 else order[::-1]:
                t = time.perf_counter()
                select(tex, q, weights=w)
                warm[name].append((time.perf_counter() - t) * 1e3)
    for r in range(3):
        for q in TEXT_QUERIES:
            for name, w in order if r % 2 else order[::-1]:
                text_index(tex).recent.clear()
                t = time.perf_counter()
                select(tex, q, weights=w)
                new[name].append((time.perf_counter() - t) * 1e3)
    lines = len(text_index(tex).lines)
    print(f"bundled page, {lines} OCR lines, 273 tokens, {len(TEXT_QUERIES)} questions; median ms")
    for name in rows:
        print(
            f"  {name:12s} warm {statistics.median(warm[name]):6.2f}   new question "
            f"{statistics.median(new[name]):6.2f}   layouts {layouts[name]}"
        )


if __name__ == "__main__":
    main()
