"""The text term's painting constants, chosen on maps of rankers that never saw the page: the training pages'
two halves, each painted by the ranker fitted on the other half (cross-fitting, :func:`cross_fit_records`), and the
grid search of the text weight, sharpness and fill on them (:func:`calibrate_text_term`).  Step 3 of :mod:`.run`."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import numpy as np

from ..weights.weights import Weights
from .data import Page
from .evaluate import hit_table, records
from .ranker import Ranker

if TYPE_CHECKING:
    from .run import TrainConfig


def _cross_fit_halves(n: int, seed: int) -> list[list[int]]:
    """The training pages' two halves (indices) for cross-fitting: each half's maps come from a ranker fitted on the
    other half."""
    rng = random.Random(seed + 1)
    idx = list(range(n))
    rng.shuffle(idx)
    return [sorted(idx[: n // 2]), sorted(idx[n // 2 :])]


def cross_fit_records(
    pages: list[Page],
    named: dict[str, Weights],
    budgets,
    train_pages: list[Page],
    cross: list[Ranker] | None,
    seed: int,
    **kw,
) -> list[dict]:
    """:func:`~.evaluate.records` of ``pages`` (training pages) for each of ``named``, every page's query maps
    painted by the ranker fitted on the *other* half of the training pages (``cross``, as for the scorer's fit): a
    ranker judging the questions it was fitted on is surer than it will be on any new page, and constants chosen on
    its sure answers paint too sharply for pages of a kind it never saw.  ``cross`` ``None`` (``--from``, whose
    file has no cross-fitted rankers): ``named`` as they are."""
    if cross is None:
        return records(pages, named, budgets, **kw)
    out: list[dict] = []
    for half, swapped in _cross_fitted(train_pages, cross, seed, named):
        in_half = {id(train_pages[i]) for i in half}
        part = [p for p in pages if id(p) in in_half]
        if part:
            out += records(part, swapped, budgets, **kw)
    return out


def _cross_fitted(
    train_pages: list[Page], cross: list[Ranker], seed: int, named: dict[str, Weights]
) -> list[tuple[list[int], dict[str, Weights]]]:
    """Each half of the training pages (indices), with ``named`` whose ranker is the one fitted on the other half."""
    return [
        (half, {n: w.replace(text_ranker=ranker) for n, w in named.items()})
        for half, ranker in zip(_cross_fit_halves(len(train_pages), seed), cross)
    ]


def _cross_fit_weights(train_pages: list[Page], final: Weights, cross: list[Ranker], seed: int) -> dict[int, Weights]:
    """For each training page, weights whose ranker was fitted on the other half of the training pages."""
    out: dict[int, Weights] = {}
    for half, swapped in _cross_fitted(train_pages, cross, seed, {"final": final}):
        for i in half:
            out[i] = swapped["final"]
    return out


#: text-term weights and sharpnesses tried by :func:`calibrate_text_term`, then its fills at the best of them
TEXT_WEIGHTS = (7.0, 14.0, 28.0, 40.0)


TEXT_SHARPNESS = (1.5, 2.5, 4.0, 10.0)


TEXT_FILLS = (0.1, 0.25, 0.5)

#: cells of the weight x sharpness grid within this many points of the best are a tie, broken towards the broadest
#: painting (:func:`broadest_within`)
TEXT_TIE = 0.25


def broadest_within(tried: dict[str, float], cells: dict[str, tuple[float, float]], tie: float = TEXT_TIE) -> str:
    """The cell of ``cells`` (name -> (text weight, sharpness)) with the largest sharpness, then text weight, among
    those whose ``tried`` hit is within ``tie`` points of the best.

    The criterion is measured on 60 pages; its best cells often differ by hundredths of a point (three draws of 30
    pages per set chose three cells), and a choice that close is a coin: seed 100 of the recipe without FUNSD took
    sharpness 4 for 0.05 points and read 82.2 % on FUNSD at 273 tokens, seeds 0 and 200 (sharpness 10) 90.3 and 90.9.
    So a near-tie goes to the painting that hedges most -- the one that still paints the lines an unsure ranker gives
    less (docs/lab/journal.md, "Top-k completes the likely lines")."""
    top = max(tried[n] for n in cells)
    close = [n for n in cells if tried[n] >= top - tie]
    return max(close, key=lambda n: (cells[n][1], cells[n][0], tried[n], n))


def calibrate_text_term(
    weights: Weights, pages: list[Page], cfg: TrainConfig, log, cross: list[Ranker] | None = None
) -> tuple[Weights, dict]:
    """The Poisson fit scores tiles by expected blurry answer area, which is not the hit it is judged by: its text
    weight (how far the ranker's best line outranks the rest of the page) comes out low, and the sharpness of the
    painted map (how improbable a line may be and still be painted above the background) and its fill (how far a
    tile that a line only grazes falls below one that holds it) are not fitted at all.
    Choose them by grid search on a sample of the training pages (the same number of pages from every set): first
    weight x sharpness at the weights' fill (a near-tie, within :data:`TEXT_TIE` points, broken towards the broadest
    painting: :func:`broadest_within`), then the other fills (0 and :data:`TEXT_FILLS`) at the chosen pair, the
    weights' own kept unless another gains (the fill orders tiles within a painted line, the pair weighs lines
    against each other and the background: they hardly interact, and 3 more cells cost less than a full grid's 48).
    The criterion is the mean over sets of the mean hit over the budgets, each question counted as the better of the
    foveated selection (floor off) and the uniform layout -- the gate fitted next takes the uniform layout where it
    wins, so the text term is judged on what it adds above it (judged alone, photos with stray text lines pick a
    sharpness that costs real forms 2-4 points at 273-576 tokens).  Generated pages teach the ranker but do not vote
    here when real sets are given: how sharply to paint is judged on real scans and photos.  With ``cross`` (the
    cross-fitting rankers), a page is painted by the ranker that did not train on it (:func:`cross_fit_records`):
    judged by the final ranker on its own training questions, a run without FUNSD (generator 3's forms) chose
    sharpness 4 and read 80.5 % on FUNSD (a kind it never saw) at 273 tokens; cross-fitted, it chose 10 and read 86.1
    (docs/lab/journal.md, "The text term's constants chosen on maps of a ranker that never saw the page")."""
    sample = text_term_sample(pages, cfg.seed)

    def search(named: dict[str, Weights]) -> tuple[str, dict[str, float]]:
        tried = text_term_hit(sample, named, cfg.budgets, cfg.workers or 1, pages, cross, cfg.seed)
        return max(named, key=lambda n: (tried[n], n)), tried

    fill = weights.text.fill
    named = dict(text_term_variant(weights, a, k) for a in TEXT_WEIGHTS for k in TEXT_SHARPNESS)
    _, tried = search(named)
    best = broadest_within(tried, {n: (w.query["text"], w.text.sharpness) for n, w in named.items()})
    pair = named[best]
    fills = dict(text_term_variant(pair, fill=f) for f in (0.0, *TEXT_FILLS) if f != fill)
    if fills:
        best_fill, tried_fill = search(fills)
        if tried_fill[best_fill] > tried[best]:  # a fill that does not gain keeps the weights' own
            best = best_fill
        tried.update(tried_fill)
    chosen = {**named, **fills}[best]
    log(
        f"text term by mean training hit (sets x budgets{', cross-fitted' if cross else ''}): best {best} "
        f"({tried[best]} %)"
    )
    return chosen, {"tried": tried, "chosen": best, "pages": len(sample), "cross_fitted": cross is not None}


def text_term_variant(
    weights: Weights, text: float | None = None, sharpness: float | None = None, fill: float | None = None
) -> tuple[str, Weights]:
    """``weights`` with other text-term constants (``None``: theirs), and its name in the search's report."""
    a = weights.query["text"] if text is None else text
    k = weights.text.sharpness if sharpness is None else sharpness
    f = weights.text.fill if fill is None else fill
    return f"text={a:g},sharpness={k:g},fill={f:g}", weights.replace(
        query={**weights.query, "text": a}, text_sharpness=k, text_fill=f
    )


def text_term_sample(pages: list[Page], seed: int, per_set: int = 30) -> list[Page]:
    """The pages :func:`calibrate_text_term` judges on: ``per_set`` of every real set (every set when only generated
    ones are given), drawn with the seed."""
    rng = random.Random(seed + 2)
    sets: dict[str, list[Page]] = {}
    for p in sorted(pages, key=lambda p: (p.set, p.image)):
        sets.setdefault(p.set, []).append(p)
    real = {k: v for k, v in sets.items() if not v[0].generated}
    sample = []
    for ps in (real or sets).values():
        rng.shuffle(ps)
        sample += ps[:per_set]
    return sample


def text_term_hit(
    sample: list[Page],
    named: dict[str, Weights],
    budgets,
    workers: int,
    train_pages: list[Page] | None = None,
    cross: list[Ranker] | None = None,
    seed: int = 0,
) -> dict[str, float]:
    """:func:`calibrate_text_term`'s criterion for each of ``named``: the mean over sets of the mean hit (%) over the
    budgets, each question counted as the better of the foveated selection (floor off) and the uniform layout; with
    ``cross``, each page of ``sample`` (drawn from ``train_pages``) painted by the ranker of the other half."""
    recs = cross_fit_records(
        sample, named, budgets, train_pages or sample, cross, seed, floor="off", prompts=False, workers=workers
    )
    for r in recs:  # judged above the floor: where the uniform layout wins, the gate (fitted next) takes it
        u = r["methods"]["uniform"]
        for n in named:
            r["methods"][n] = max(r["methods"][n], u, key=lambda m: m[0])
    table = hit_table(recs)
    sets = [k for k in table if k != "all"]
    return {n: round(float(np.mean([np.mean([row[n] for row in table[s].values()]) for s in sets])), 2) for n in named}
