"""The pictures of a selection: the relevance heat map with every token outlined by level (``overlay.png``) and
the image as the VLM sees it, each region at the resolution of the token covering it (``mosaic.png``).

The overlay is drawn at the size it is shown (``max_side``), so its outlines, labels and legend are sized to the
picture a person looks at, not to the source: outlines about 1/700 of the long side wide, with a dark edge on both
sides where the token is shown large enough to keep its inside visible; the heat map only where the relevance is
above its lowest fifth; the legend in a bar under the picture (never over a token), with an optional caption line
(question, budget, tokens, model)."""

from __future__ import annotations

import cv2
import numpy as np

from ..core.texture import Texture
from ..selection import Selection

#: outline colour per level (RGB): level 0 green, then cyan, yellow, orange, magenta, ...
LEVEL_COLORS = [
    (40, 220, 40),
    (0, 190, 255),
    (255, 220, 0),
    (255, 120, 0),
    (230, 0, 230),
    (255, 255, 255),
    (160, 160, 160),
    (90, 90, 90),
]

#: the legend bar's background and text colours (RGB)
BAR_COLOR = (24, 24, 24)
TEXT_COLOR = (245, 245, 245)
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def _level_color(level: int) -> tuple[int, int, int]:
    return LEVEL_COLORS[min(level, len(LEVEL_COLORS) - 1)]


def outline_width(size: tuple[int, int]) -> int:
    """The coloured outline's width in pixels for a picture of ``size`` = (H, W): 1 up to ~1,000 px, then about
    1/700 of the long side."""
    return max(1, round(max(size) / 700))


def halo_min(width: int) -> int:
    """The shown side, in pixels, from which a token's outline ``width`` px wide gets its dark edges: outline and
    edges take at most a quarter of it."""
    return 4 * (width + 2 * max(1, width // 2))


def heatmap(sel: Selection, size: tuple[int, int]) -> np.ndarray:
    """The level-0 relevance map, min-max normalised, upsampled to ``size`` = (H, W), TURBO colours.  RGB uint8."""
    bgr = cv2.applyColorMap(np.clip(_relevance(sel, size) * 255, 0, 255).astype(np.uint8), cv2.COLORMAP_TURBO)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def _relevance(sel: Selection, size: tuple[int, int]) -> np.ndarray:
    """The min-max normalised relevance, (H, W) float32 in [0, 1], stretched over ``size`` as the tiles cover the
    image (a last partial tile keeps its share)."""
    rel = sel.relevance.astype(np.float32)
    lo, hi = float(rel.min()), float(rel.max())
    norm = (rel - lo) / (hi - lo) if hi > lo else np.zeros_like(rel)
    gh, gw = rel.shape
    p = sel.patch_size
    h, w = sel.image_size
    big = cv2.resize(norm, (round(gw * p * size[1] / w), round(gh * p * size[0] / h)), interpolation=cv2.INTER_LINEAR)
    return big[: size[0], : size[1]]


def shown_size(size: tuple[int, int], max_side: int | None) -> tuple[int, int]:
    """(H, W) of a picture of ``size`` shown with its long side at most ``max_side`` (None: as it is)."""
    h, w = size
    if max_side is None or max(h, w) <= max_side:
        return h, w
    f = max_side / max(h, w)
    return max(1, round(h * f)), max(1, round(w * f))


def resize_to(rgb: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``rgb`` resized to ``size`` = (H, W) (area averaging when shrinking); the same array when it has that size."""
    if rgb.shape[:2] == tuple(size):
        return rgb
    return cv2.resize(rgb, (size[1], size[0]), interpolation=cv2.INTER_AREA)


def render_overlay(
    image: np.ndarray,
    sel: Selection,
    alpha: float = 0.45,
    legend: bool = True,
    *,
    heat: bool = True,
    caption: str | None = None,
    max_side: int | None = None,
) -> np.ndarray:
    """``image`` (H, W, 3) uint8 with the selected tokens outlined, coloured by level.  RGB uint8.

    ``heat``: blend the relevance heat map in where the relevance is above its lowest fifth, up to ``alpha`` where
    it is highest (False: the plain picture with outlines only).  ``max_side``: draw at that long side (the picture
    shrunk first, so outlines and text keep their width).  ``legend``: add a bar under the picture with a swatch
    and token count per level (and ``caption``, wrapped to the width, above it); the result is then taller than the
    picture, which keeps the top (h, w) rows.  Areas no token covers (top-k without gist) are dimmed and the legend
    says so."""
    h, w = shown_size(image.shape[:2], max_side)
    f = w / image.shape[1]
    out = resize_to(image, (h, w)).copy()
    lm = sel.level_map()
    uncovered = bool((lm < 0).any())
    if uncovered:  # not sent at all: dimmed, so the gaps read as "nothing here" rather than as dark content
        p = sel.patch_size
        cover = np.repeat(np.repeat((lm >= 0).astype(np.uint8), p, axis=0), p, axis=1)
        cover = cv2.resize(cover[: image.shape[0], : image.shape[1]], (w, h), interpolation=cv2.INTER_NEAREST)
        out[cover == 0] = (out[cover == 0] * 0.45 + 0.55 * 96).astype(np.uint8)
    if heat:
        rel = _relevance(sel, (h, w))
        weight = (np.clip((rel - 0.2) / 0.8, 0.0, 1.0) * alpha)[..., None]
        colours = cv2.cvtColor(cv2.applyColorMap((rel * 255).astype(np.uint8), cv2.COLORMAP_TURBO), cv2.COLOR_BGR2RGB)
        out = (out * (1.0 - weight) + colours * weight).astype(np.uint8)
    t = outline_width((h, w))
    edge = max(1, t // 2)
    boxes = [
        (
            round(x0 * f),
            round(y0 * f),
            max(round(x0 * f) + 1, round(x1 * f)) - 1,
            max(round(y0 * f) + 1, round(y1 * f)) - 1,
        )
        for (x0, y0, x1, y1), g in zip(sel.boxes.tolist(), sel.gist.tolist())
        if not g  # the gist covers everything; outlining it would hide the rest
    ]
    levels = [int(lvl) for lvl, g in zip(sel.levels.tolist(), sel.gist.tolist()) if not g]
    for x0, y0, x1, y1 in boxes:  # a dark edge on both sides of an outline: visible on any background ...
        if min(x1 - x0, y1 - y0) + 1 >= halo_min(t):  # ... where the token is large enough to keep its inside visible
            _rect(out, (x0, y0, x1, y1), (0, 0, 0), t + 2 * edge)
    for (x0, y0, x1, y1), lvl in zip(boxes, levels):
        _rect(out, (x0, y0, x1, y1), _level_color(lvl), t)
    if not legend:
        return out
    bar = legend_bar(sel, w, caption=caption, uncovered=uncovered)
    return np.concatenate([out, bar], axis=0)


def _rect(img: np.ndarray, box: tuple[int, int, int, int], colour: tuple[int, int, int], width: int) -> None:
    """An outline ``width`` px wide centred on the box's border pixels (cv2 grows thick lines both ways)."""
    x0, y0, x1, y1 = box
    cv2.rectangle(img, (x0, y0), (x1, y1), colour, width if width > 1 else 1)


def text_height(width: int) -> int:
    """The legend's line height in pixels for a picture ``width`` px wide: about 1/45 of it, 14 to 64 px."""
    return int(np.clip(round(width / 45), 14, 64))


def legend_bar(sel: Selection, width: int, caption: str | None = None, uncovered: bool = False) -> np.ndarray:
    """The bar under an overlay: ``caption`` (wrapped) then one swatch and count per level of the selection's
    pyramid, every level shown (also those with no token, so a video's frames keep one size).  (h, width, 3)
    uint8."""
    lh = text_height(width)
    scale = 0.55 * lh / cv2.getTextSize("L", _FONT, 1.0, 1)[0][1]
    thick = max(1, round(lh / 16))
    pad = max(3, lh // 4)
    counts = sel.level_counts()
    digits = len(str(max(sel.budget, len(sel), 1)))
    items = [
        (f"L{lvl} {sel.patch_size << lvl}px: {counts.get(lvl, 0)}", _level_color(lvl)) for lvl in range(sel.num_levels)
    ]
    slot = (
        max(
            cv2.getTextSize(f"L{lvl} {sel.patch_size << lvl}px: {'0' * digits}", _FONT, scale, thick)[0][0]
            for lvl in range(sel.num_levels)
        )
        + lh
        + pad * 2
    )
    lines: list[list[tuple[str, tuple[int, int, int] | None]]] = []
    if caption:
        lines += [[(part, None)] for part in _wrap(caption, width - 2 * pad, scale, thick)]
    per_row = max(1, (width - 2 * pad) // slot)
    lines += [[(t, c) for t, c in items[i : i + per_row]] for i in range(0, len(items), per_row)]
    if uncovered:
        lines += [[(part, None)] for part in _wrap("dimmed: no token sent there", width - 2 * pad, scale, thick)]
    bar = np.empty((pad + len(lines) * (lh + pad), width, 3), np.uint8)
    bar[:] = BAR_COLOR
    y = pad
    for line in lines:
        x = pad
        for text, colour in line:
            base = y + round(lh * 0.78)
            if colour is not None:
                s = round(lh * 0.7)
                top = y + (lh - s) // 2
                cv2.rectangle(bar, (x, top), (x + s, top + s), colour, -1)
                cv2.putText(bar, text, (x + lh, base), _FONT, scale, TEXT_COLOR, thick, cv2.LINE_AA)
                x += slot
            else:
                cv2.putText(bar, text, (x, base), _FONT, scale, TEXT_COLOR, thick, cv2.LINE_AA)
        y += lh + pad
    return bar


def _wrap(text: str, width: int, scale: float, thick: int) -> list[str]:
    """``text`` in lines no wider than ``width`` px at this font size (a word longer than a line is cut)."""
    lines: list[str] = []
    cur = ""
    for word in text.split():
        cand = f"{cur} {word}" if cur else word
        if cv2.getTextSize(cand, _FONT, scale, thick)[0][0] <= width or not cur:
            cur = cand
        else:
            lines.append(cur)
            cur = word
        while cv2.getTextSize(cur, _FONT, scale, thick)[0][0] > width and len(cur) > 1:
            cut = len(cur) - 1
            while cut > 1 and cv2.getTextSize(cur[:cut], _FONT, scale, thick)[0][0] > width:
                cut -= 1
            lines.append(cur[:cut])
            cur = cur[cut:]
    return lines + ([cur] if cur else [])


def render_mosaic(texture: Texture, sel: Selection, fill: int = 128) -> np.ndarray:
    """The image rebuilt from the selected tokens only, each region at its token's level (bilinear upsampling
    of that pyramid level).  Regions no token covers (top-k without gist) are ``fill`` grey.  (H, W, 3) uint8."""
    p = texture.patch_size
    pyr = texture.pixel_levels()
    gh, gw = texture.level_shapes[0]
    lm = sel.level_map()
    canvas = np.full((gh * p, gw * p, 3), fill, np.uint8)
    for lvl in np.unique(lm):
        if lvl < 0:
            continue
        mask = np.repeat(np.repeat(lm == lvl, p, axis=0), p, axis=1)
        src = pyr[int(lvl)]
        up = (
            src
            if lvl == 0
            else cv2.resize(src, (src.shape[1] << int(lvl), src.shape[0] << int(lvl)), interpolation=cv2.INTER_LINEAR)
        )
        canvas[mask] = up[: gh * p, : gw * p][mask]
    h, w = texture.image_size
    return canvas[:h, :w].copy()
