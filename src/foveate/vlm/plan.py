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

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..selection import Selection
from .compose import composite, sharpen
from .crops import EPS, Context, Region, _cover, price_regions
from .models import resolve
from .picture import Picture
from .rules.base import VlmRule
from .rules.registry import get_rule

#: text tokens charged per picture while planning: the short line that introduces it (an estimate; a picture
#: must save more than this to be worth sending on its own)
PICTURE_TEXT_TOKENS = 24


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
    source: str = ""  # the document the rule follows, and the date it was read

    @property
    def tokens(self) -> int:
        return sum(p.tokens for p in self.pictures)

    def to_dict(self) -> dict[str, Any]:
        """The ledger (JSON-able): rule, image size, tokens of the plan / the whole image / a uniform resize, and
        every picture."""
        return {
            "rule": self.rule,
            "model": self.model,
            "source": self.source,
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
    refine: bool = True,
) -> Plan:
    """Plan pictures for tokens given by their level-0 tile spans ``grid`` (K, 4: r0, c0, r1, c1, exclusive ends)
    and required scales (K,: ``2**level``) on an image of ``image_size`` (h, w) cut in ``patch`` px tiles.
    ``refine=False``: the search's pictures as they are (no composite, no sharpening)."""
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
        if refine:
            packed = composite(rule, pictures, rule.max_side)
            pictures = [packed] if packed is not None else [sharpen(rule, p) for p in pictures]
    if refine and len(scales) and (limit is None or limit >= 1):
        now = _objective(pictures, overhead)
        tight = _tight_composite(rule, grid, scales, (h, w), patch, overhead, now)
        if tight is not None:  # the tokens' own regions packed in one picture: cheaper where a picture costs the same
            pictures, fallback = [tight], False
    if fallback and len(scales):
        notes.append(
            f"nothing cheaper than the whole image ({image.tokens} tokens under {rule.name}) shows every "
            "selected token at its selected scale: sending the image"
        )
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
        rule.source,
    )


def _tight_composite(
    rule: VlmRule,
    grid: np.ndarray,
    scales: np.ndarray,
    image_size: tuple[int, int],
    patch: int,
    overhead: float,
    below: float,
) -> Picture | None:
    """One composite picture of the regions that show the selected tokens at their scales in the fewest pixels (the
    plan under a rule that bills area: ``patch:P``), costing less than ``below`` under ``rule`` -- where a
    provider bills per picture (Gemini 3) or per tile, the tight regions packed together can fit one cheap picture
    that the planner's own pictures do not."""
    tight = plan_tokens(grid, scales, image_size, patch, get_rule(f"patch:{patch}"), overhead=overhead, refine=False)
    if tight.fallback or len(tight.pictures) < 2:
        return None
    parts = []
    for p in tight.pictures:
        x0, y0, x1, y1 = p.box
        fw, fh = rule.fit(np.array([x1 - x0]), np.array([y1 - y0]), np.array([p.scale]))
        size = (int(fw[0]), int(fh[0]))
        parts.append(Picture(p.kind, p.box, size, size, 0, None))
    # each region is introduced in the picture's line: it costs text tokens as a picture of its own does
    packed = composite(rule, parts, rule.max_side, math.ceil(below - overhead * len(parts)))
    return packed if packed is not None and _objective([packed], overhead) < below - EPS else None


def _objective(pictures: list[Picture], overhead: float) -> float:
    """What the search minimises: the pictures' tokens plus ``overhead`` text tokens for each region introduced."""
    return sum(p.tokens for p in pictures) + overhead * sum(len(p.parts) or 1 for p in pictures)


def _keeps(pictures: list[Picture], boxes: np.ndarray, scales: np.ndarray) -> int:
    """Tokens shown at their scale by some picture (a composite: by one of its parts); sets each picture's ``keeps``
    (tokens it is the first to keep, finest view first)."""
    done = np.zeros(len(scales), bool)
    views = [(v, p) for p in pictures for v in p.views()]
    for p in pictures:
        p.keeps = 0
    for v, p in sorted(views, key=lambda vp: vp[0].scale):
        x0, y0, x1, y1 = v.box
        inside = (boxes[:, 0] >= x0) & (boxes[:, 1] >= y0) & (boxes[:, 2] <= x1) & (boxes[:, 3] <= y1)
        ok = inside & (v.scale <= scales * (1 + EPS)) & ~done
        p.keeps += int(ok.sum())
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
    rule: VlmRule | str | None = None,
    *,
    model: str | None = None,
    max_pictures: int | None = None,
    overhead: float = PICTURE_TEXT_TOKENS,
) -> Plan:
    """The pictures to send for ``selection`` under ``rule`` (a spec such as ``"openai"`` or a :class:`VlmRule`;
    ``None``: the rule of ``model`` in the model table, else ``openai``).
    Pure: reads the selection's tile spans, scales, image size and patch size only.  A token's required scale is its
    own: ``2 ** level`` for a pyramid token, the resize factor for a token of the uniform layout (which a whole-page
    picture at that factor or finer keeps, however it is billed)."""
    rule, _ = resolve(rule, model)
    return plan_tokens(
        selection.grid,
        np.asarray(selection.scales, np.float64),
        selection.image_size,
        selection.patch_size,
        rule,
        max_pictures=max_pictures,
        overhead=overhead,
    )
