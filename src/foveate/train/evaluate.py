"""Hit rates of weights on a split, next to the uniform layout, in one pass (the figures ``foveate train`` reports),
and the per-(question, budget) records the floor gate is fitted on."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..core.errors import BudgetError
from ..core.fork import fork_map
from ..eval.metrics import query_metrics
from ..query.query import Query
from ..query.terms import query_maps
from ..selection import select
from ..selection.floor import floor_features
from ..selection.uniform import uniform_grid
from .data import Page, Sample


def hit(boxes: np.ndarray, scales: np.ndarray, s: Sample, image_size: tuple[int, int]) -> tuple[bool, float]:
    """(hit, legible coverage) of tokens (boxes, scales) for one question (any box for a repeated answer)."""
    m = query_metrics(boxes, None, s.boxes, image_size, s.heights, token_scales=scales, any_box=s.any_box)
    return m.hit, m.legible_coverage


def records(
    pages: list[Page],
    weights: Mapping[str, object],
    budgets: tuple[int, ...],
    floor: str = "auto",
    gate_features: bool = False,
    prompts: bool = True,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    modes: dict[str, str] | None = None,
) -> list[dict]:
    """One record per (question, budget): the hit and legible coverage of each named weights' selection (in mode
    ``modes[name]``, by default ``select``'s; ``floor`` as given) and of the uniform layout; with ``gate_features``,
    the floor gate's inputs for the first weights.  A budget at which a row cannot select on a page (a quadtree below
    the texture's coarsest cover) is skipped there for every row, as ``foveate eval`` does; ``prompts=False`` leaves
    out the questions asked with a point prompt.

    ``workers`` > 1 splits the pages among that many forked processes (:func:`~foveate.core.fork.fork_map`): the
    records are the same, in the same order, as one process's."""
    job = (weights, budgets, floor, gate_features, prompts, modes or {})
    if workers > 1 and len(pages) > 1:
        ready_query_encoder(pages)
    chunks = [(pages[i : i + _CHUNK], *job) for i in range(0, len(pages), _CHUNK)]
    out: list[dict] = []
    done = 0
    for recs, n in fork_map(_chunk_records, chunks, workers):
        out += recs
        done += n
        if progress:
            progress(done, len(pages))
    return out


_CHUNK = 4  # pages a worker takes at a time: small enough to balance 2 workers, large enough to amortise the pickle


def _chunk_records(pages: list[Page], *job) -> tuple[list[dict], int]:
    return [r for page in pages for r in _page_records(page, *job)], len(pages)


def ready_query_encoder(pages: list[Page]) -> None:
    """Prepare the question encoder (``foveate prepare``: the onnxruntime export, once per machine; the figures of a
    run do not depend on whether ``foveate prepare`` ran before it) and set it up in this process before forking: the
    workers inherit the set-up session."""
    from ..query.text.embed import embed_query
    from ..query.text.query_onnx import prepare_query_encoder

    prepare_query_encoder()
    text = next((s.text for p in pages for s in p.samples if s.text), None)
    if text:
        embed_query(text)


def _page_records(
    page: Page,
    weights: Mapping[str, object],
    budgets: tuple[int, ...],
    floor: str,
    gate_features: bool,
    prompts: bool,
    modes: dict[str, str],
) -> list[dict]:
    out = []
    if gate_features:
        from ..weights import load_weights

        gated = load_weights(next(iter(weights.values())))
    tex = page.texture
    size = tex.image_size
    for budget in budgets:
        try:
            ub, us, _ = uniform_grid(size, tex.patch_size, budget)
        except BudgetError:
            continue
        uscales = np.full(len(ub), us)
        for s in page.samples:
            if s.points and not prompts:
                continue
            rec: dict[str, Any] = {
                "set": page.set,
                "image": page.image,
                "budget": budget,
                "text": s.text,
                "prompt": bool(s.points),
                "methods": {},
            }
            try:
                for name, w in weights.items():
                    sel = select(tex, s.query, budget, mode=modes.get(name), weights=w, cut=False, floor=floor)
                    rec["methods"][name] = hit(sel.boxes, sel.scales, s, size) + (sel.layout,)
            except BudgetError:
                break
            rec["methods"]["uniform"] = hit(ub, uscales, s, size) + ("uniform",)
            if gate_features:
                q = Query.coerce(s.query)
                rec["features"] = floor_features(tex, q, query_maps(tex, q, gated).lines, budget)
            out.append(rec)
    return out


def _tabled(recs: list[dict], value: Callable[[dict, str], Any], reduce: Callable[[list], Any], skip=()) -> dict:
    """``{set: {budget: {method: reduce([value(record, method), ...])}}}`` plus ``"all"`` (every set together) and
    ``n`` (questions) per (set, budget), over every method of the records but those in ``skip``: the shape of the
    tables below."""
    acc: dict = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in recs:
        for key in (r["set"], "all"):
            for m in r["methods"]:
                if m not in skip:
                    acc[key][r["budget"]][m].append(value(r, m))
    return {
        k: {
            b: {m: reduce(v) for m, v in ms.items()} | {"n": len(next(iter(ms.values())))}
            for b, ms in sorted(bs.items())
        }
        for k, bs in acc.items()
    }


def _percent(v: list) -> float:
    return round(100.0 * float(np.mean(v)), 1)


def hit_table(recs: list[dict]) -> dict:
    """``{set: {budget: {method: hit %}}}`` plus ``"all"`` (every set together) and ``n`` per (set, budget)."""
    return _tabled(recs, lambda r, m: r["methods"][m][0], _percent)


def fallback_table(recs: list[dict]) -> dict:
    """``{set: {budget: {method: % of the questions the uniform floor answered}}}`` plus ``"all"`` and ``n``, for
    every row but the uniform layout itself (the layout each record keeps beside its hit)."""
    return _tabled(recs, lambda r, m: r["methods"][m][2] == "uniform", _percent, skip=("uniform",))


def paired_table(recs: list[dict], base: str) -> dict:
    """``{set: {budget: {method: "+gained / -lost (p P)"}}}`` plus ``"all"`` and ``n``: for every row but ``base``,
    the questions it hits that ``base`` misses and the reverse, with the two-sided sign test's p (:func:`sign_test`)
    -- how many questions a difference of hit % stands on, and whether a coin would give it as often."""

    def pair(r: dict, m: str) -> tuple[bool, bool]:
        return bool(r["methods"][m][0]), bool(r["methods"][base][0])

    def counted(pairs: list[tuple[bool, bool]]) -> str:
        gained = sum(hit and not ref for hit, ref in pairs)
        lost = sum(ref and not hit for hit, ref in pairs)
        return f"+{gained} / -{lost} (p {sign_test(gained, lost):.2f})"

    return _tabled(recs, pair, counted, skip=(base,))


def sign_test(gained: int, lost: int) -> float:
    """Two-sided exact sign test (McNemar's, exact) of ``gained`` against ``lost`` discordant questions: the chance
    that a fair coin splits ``gained + lost`` at least this unevenly (1.0 when they are equal or both 0)."""
    n, k = gained + lost, min(gained, lost)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0  # exact integers: no overflow


def format_table(table: dict, methods: list[str], title: str) -> str:
    """A markdown table: set, budget, n, then one column per method (numbers to one decimal, text as it is)."""
    lines = [
        f"**{title}**",
        "",
        "| set | budget | n | " + " | ".join(methods) + " |",
        "|---|---:|---:|" + "---:|" * len(methods),
    ]
    for key in sorted(table, key=lambda k: (k == "all", k)):
        for b, row in table[key].items():
            lines.append(
                f"| {key} | {b} | {row['n']} | " + " | ".join(_cell(row.get(m, float("nan"))) for m in methods) + " |"
            )
    return "\n".join(lines)


def _cell(v) -> str:
    return v if isinstance(v, str) else f"{v:.1f}"
