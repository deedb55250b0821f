"""The crop planner: which pictures to send a VLM for a selection, under that VLM's own token rule.

Every selected token asks for its region at its selected scale (a level-``l`` token: ``2**l`` source pixels per
pixel or finer).  A plan is a set of pictures -- optionally the page at a coarse scale for context, plus crops sent
at the scale their tokens were selected at -- such that every token's region lies inside a picture the model sees
(after the provider's own resize, :meth:`VlmRule.price`) at that scale or finer, for the fewest tokens the search
finds.  Two promises, checked by a property test for every rule: a plan never costs more than the whole image as
the provider takes it (when nothing cheaper keeps every token's resolution, the plan *is* the whole image and says
so), and a plan that is not that fallback keeps every token's resolution.

The search, per candidate context picture (the page sent at each selected scale, with each of the rule's options,
or none): the tokens finer than the context are grouped per level into 4-connected components; a component is
split in two at the median of its tokens along its longer side, recursively, where the halves cost less (tokens
plus a per-picture text overhead) or where the provider would shrink the whole below its scale; then the pair of
groups whose merge saves the most is merged, again and again, while a merge saves anything (tile rules reward
merging, area rules rarely do); finally groups are merged at the least cost until the rule's picture limit holds.
The cheapest candidate wins.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..selection import Selection
from .crops import EPS, Context, Region, _cover, price_regions
from .rules.base import VlmRule
from .rules.registry import get_rule

#: text tokens charged per picture while planning: the short line that introduces it (an estimate; a picture
#: must save more than this to be worth sending on its own)
PICTURE_TEXT_TOKENS = 24


@dataclass
class Picture:
    """One picture of a plan: ``box`` (x0, y0, x1, y1) of the source image, sent at ``sent`` (w, h) pixels; the
    model sees ``seen`` (w, h) after the provider's own resize, i.e. ``scale`` source pixels per pixel, and the
    provider bills ``tokens`` (sent with ``option``: OpenAI's ``detail``)."""

    kind: str  # "context" (the page, coarse), "crop", "image" (the whole image, as the provider takes it)
    box: tuple[int, int, int, int]
    sent: tuple[int, int]
    seen: tuple[int, int]
    tokens: int
    option: str | None
    keeps: int = 0  # selected tokens this picture shows at their selected scale or finer

    @property
    def scale(self) -> float:
        x0, y0, x1, y1 = self.box
        return max((x1 - x0) / self.seen[0], (y1 - y0) / self.seen[1])

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "box": list(self.box),
            "sent": list(self.sent),
            "seen": list(self.seen),
            "scale": round(self.scale, 4),
            "option": self.option,
            "tokens": self.tokens,
            "keeps": self.keeps,
        }


@dataclass
class Plan:
    """The pictures to send for one selection under one rule, and the ledger to judge them by.

    ``pictures`` are what is sent (context first, then crops in reading order); ``image`` is the whole image as the
    provider takes it (the reference a plan never exceeds); ``uniform`` is the whole image resized uniformly to the
    finest size whose tokens do not exceed the plan's.  ``fallback``: nothing cheaper than ``image`` keeps every
    token's resolution, so ``pictures == [image]``."""

    rule: str
    model: str
    image_size: tuple[int, int]  # (width, height)
    pictures: list[Picture]
    image: Picture
    uniform: Picture
    fallback: bool
    kept: int  # selected tokens shown at their selected scale or finer
    total: int  # selected tokens
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.pictures)

    def to_dict(self) -> dict[str, Any]:
        """The ledger (JSON-able): rule, image size, tokens of the plan / the whole image / a uniform resize, and
        every picture."""
        return {
            "rule": self.rule,
            "model": self.model,
            "image_size": list(self.image_size),
            "image_tokens": self.image.tokens,
            "plan_tokens": self.tokens,
            "uniform_tokens": self.uniform.tokens,
            "saving": round(1.0 - self.tokens / max(self.image.tokens, 1), 4),
            "fallback": self.fallback,
            "kept_tokens": self.kept,
            "selected_tokens": self.total,
            "image": self.image.to_dict(),
            "uniform": self.uniform.to_dict(),
            "pictures": [p.to_dict() for p in self.pictures],
            "notes": list(self.notes),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }


def plan_tokens(
    grid: np.ndarray,
    scales: np.ndarray,
    image_size: tuple[int, int],
    patch: int,
    rule: VlmRule | str,
    *,
    max_pictures: int | None = None,
    overhead: float = PICTURE_TEXT_TOKENS,
) -> Plan:
    """Plan pictures for tokens given by their level-0 tile spans ``grid`` (K, 4: r0, c0, r1, c1, exclusive ends)
    and required scales (K,: ``2**level``) on an image of ``image_size`` (h, w) cut in ``patch`` px tiles."""
    t0 = time.perf_counter()
    rule = get_rule(rule)
    h, w = int(image_size[0]), int(image_size[1])
    grid = np.asarray(grid, np.int64).reshape(-1, 4)
    scales = np.asarray(scales, np.float64).reshape(-1)
    boxes = np.stack(
        [grid[:, 1] * patch, grid[:, 0] * patch, np.minimum(grid[:, 3] * patch, w), np.minimum(grid[:, 2] * patch, h)],
        -1,
    ).astype(np.float64)
    sent, whole = rule.whole(w, h)
    image = Picture("image", (0, 0, w, h), sent, whole.seen, whole.tokens, whole.option)
    limit = (
        rule.max_pictures
        if max_pictures is None
        else (max_pictures if rule.max_pictures is None else min(max_pictures, rule.max_pictures))
    )
    page = np.array([[0, 0, w, h]], np.float64)

    # context candidates: the page sent at each selected scale, with each option; (tokens, scale, sent, seen, option)
    contexts: dict[tuple[int, float], Context] = {}
    for c in np.unique(scales):
        fw, fh = rule.fit(page[:, 2], page[:, 3], np.array([c]))
        for name in rule.options:
            t, sw, sh = rule.price(fw, fh, name)
            e = max(w / sw[0], h / sh[0])
            shrink = sw[0] * sh[0] < fw[0] * fh[0]
            snt = (int(sw[0]), int(sh[0])) if shrink else (int(fw[0]), int(fh[0]))
            key = (int(t[0]), round(e, 9))
            if key not in contexts and (scales >= e * (1 - EPS)).any():
                contexts[key] = (int(t[0]), e, snt, (int(sw[0]), int(sh[0])), name)
    best: tuple[float, Context | None, list[Region]] | None = None  # (objective, context or None, groups)
    covers: dict[bytes, tuple[list[Region], float] | None] = {}  # crops for each set of tokens left to them
    for ctx in [None] + sorted(contexts.values(), key=lambda c: c[:2]):
        rest = np.ones(len(scales), bool) if ctx is None else scales < ctx[1] * (1 - EPS)
        cap = None if limit is None else limit - (ctx is not None)
        rest_key = rest.tobytes() + str(cap).encode()
        if rest_key not in covers:
            covers[rest_key] = _cover(rule, grid, boxes, scales, rest, overhead, cap)
        covered = covers[rest_key]
        if covered is None:
            continue
        merged, cost = covered
        objective = cost + (ctx[0] + overhead if ctx is not None else 0)
        if best is None or objective < best[0] - EPS:
            best = (objective, ctx, merged)
    t1 = time.perf_counter()

    notes: list[str] = []
    if not len(scales):
        best = None
        notes.append("the selection has no tokens: sending the image")
    if best is None or best[0] >= image.tokens + overhead - EPS:
        pictures, fallback = [image], True
        if len(scales):
            notes.append(
                f"nothing cheaper than the whole image ({image.tokens} tokens under {rule.name}) shows every "
                "selected token at its selected scale: sending the image"
            )
    else:
        _, ctx, merged = best
        pictures = []
        if ctx is not None:
            pictures.append(Picture("context", (0, 0, w, h), ctx[2], ctx[3], ctx[0], ctx[4]))
        if merged:
            gb = np.array([g[0] for g in merged])
            tok, opt, sw, sh, vw, vh = price_regions(rule, gb, np.array([g[1] for g in merged]))
            order = np.lexsort((gb[:, 0], gb[:, 1]))
            for i in order:
                x0, y0, x1, y1 = (int(round(v)) for v in gb[i])
                box = (x0, y0, x1, y1)
                kind = "context" if box == (0, 0, w, h) else "crop"  # a crop of the whole page is the context
                pictures.append(
                    Picture(
                        kind,
                        box,
                        (int(sw[i]), int(sh[i])),
                        (int(vw[i]), int(vh[i])),
                        int(tok[i]),
                        rule.options[int(opt[i])],
                    )
                )
        fallback = False
    kept = _keeps(pictures, boxes, scales)
    if fallback and kept < len(scales):
        notes.append(
            f"the provider shows the whole image at 1/{image.scale:.3g} scale: {len(scales) - kept} of "
            f"{len(scales)} selected tokens fall below their selected scale"
        )
    uniform = uniform_picture(rule, w, h, sum(p.tokens for p in pictures))
    t2 = time.perf_counter()
    return Plan(
        rule.name,
        rule.default_model,
        (w, h),
        pictures,
        image,
        uniform,
        fallback,
        kept,
        len(scales),
        notes,
        {"search": (t1 - t0) * 1e3, "plan": (t2 - t0) * 1e3},
    )


def _keeps(pictures: list[Picture], boxes: np.ndarray, scales: np.ndarray) -> int:
    """Tokens shown at their scale by some picture; sets each picture's ``keeps`` (tokens it is the first to keep,
    finest picture first)."""
    done = np.zeros(len(scales), bool)
    for p in sorted(pictures, key=lambda p: p.scale):
        x0, y0, x1, y1 = p.box
        inside = (boxes[:, 0] >= x0) & (boxes[:, 1] >= y0) & (boxes[:, 2] <= x1) & (boxes[:, 3] <= y1)
        ok = inside & (p.scale <= scales * (1 + EPS)) & ~done
        p.keeps = int(ok.sum())
        done |= ok
    return int(done.sum())


def uniform_picture(rule: VlmRule | str, w: int, h: int, tokens: int) -> Picture:
    """The whole image resized uniformly (aspect kept) to the finest size the model sees for at most ``tokens``
    (with any of the rule's options; the smallest size when nothing fits)."""
    rule = get_rule(rule)
    (sw0, sh0), _ = rule.whole(w, h)
    longest = max(sw0, sh0)
    sides = np.arange(1, longest + 1, dtype=np.int64)
    other = np.maximum(1, np.round(sides * (min(w, h) / max(w, h)))).astype(np.int64)
    ws, hs = (sides, other) if w >= h else (other, sides)
    best = None
    for name in rule.options:
        t, vw, vh = rule.price(ws, hs, name)
        e = np.maximum(w / vw, h / vh)
        ok = np.nonzero(t <= tokens)[0]
        if len(ok):
            i = ok[np.lexsort((t[ok], e[ok]))[0]]
            key = (e[i], t[i])
            if best is None or key < best[0]:
                best = (key, int(i), name)
    if best is None:  # nothing fits: the smallest picture, cheapest option
        i, name = 0, min(rule.options, key=lambda o: rule.tokens(int(ws[0]), int(hs[0]), o))
    else:
        _, i, name = best
    t, vw, vh = rule.price(ws[i : i + 1], hs[i : i + 1], name)
    return Picture("uniform", (0, 0, w, h), (int(ws[i]), int(hs[i])), (int(vw[0]), int(vh[0])), int(t[0]), name)


def plan_for(
    selection: Selection,
    rule: VlmRule | str = "openai",
    *,
    max_pictures: int | None = None,
    overhead: float = PICTURE_TEXT_TOKENS,
) -> Plan:
    """The pictures to send for ``selection`` under ``rule`` (a spec such as ``"openai"`` or a :class:`VlmRule`).
    Pure: reads the selection's tile spans, levels, image size and patch size only."""
    return plan_tokens(
        selection.grid,
        np.exp2(selection.levels.astype(np.float64)),
        selection.image_size,
        selection.patch_size,
        rule,
        max_pictures=max_pictures,
        overhead=overhead,
    )
