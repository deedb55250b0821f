"""The pictures of a selection: the relevance heat map with every token outlined by level (``overlay.png``) and
the image as the VLM sees it, each region at the resolution of the token covering it (``mosaic.png``)."""

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


def _level_color(level: int) -> tuple[int, int, int]:
    return LEVEL_COLORS[min(level, len(LEVEL_COLORS) - 1)]


def heatmap(sel: Selection, size: tuple[int, int]) -> np.ndarray:
    """The level-0 relevance map, min-max normalised, upsampled to ``size`` = (H, W), TURBO colours.  RGB uint8."""
    rel = sel.relevance.astype(np.float32)
    lo, hi = float(rel.min()), float(rel.max())
    norm = (rel - lo) / (hi - lo) if hi > lo else np.zeros_like(rel)
    gh, gw = rel.shape
    p = sel.patch_size
    big = cv2.resize(norm, (gw * p, gh * p), interpolation=cv2.INTER_LINEAR)[: size[0], : size[1]]
    bgr = cv2.applyColorMap(np.clip(big * 255, 0, 255).astype(np.uint8), cv2.COLORMAP_TURBO)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def render_overlay(image: np.ndarray, sel: Selection, alpha: float = 0.4, legend: bool = True) -> np.ndarray:
    """Heat map blended over ``image`` (H, W, 3) uint8, token outlines coloured by level.  RGB uint8."""
    h, w = image.shape[:2]
    out = cv2.addWeighted(image, 1.0 - alpha, heatmap(sel, (h, w)), alpha, 0.0)
    for (x0, y0, x1, y1), lvl, g in zip(sel.boxes, sel.levels, sel.gist):
        if g:
            continue  # the gist covers everything; outlining it would hide the rest
        cv2.rectangle(out, (int(x0), int(y0)), (int(x1) - 1, int(y1) - 1), _level_color(int(lvl)), 1)
    if legend and min(h, w) >= 64:
        y = 4
        for lvl, n in sorted(sel.level_counts().items()):
            text = f"L{lvl}: {n}"
            cv2.rectangle(out, (4, y), (84, y + 16), (0, 0, 0), -1)
            cv2.rectangle(out, (6, y + 3), (16, y + 13), _level_color(lvl), -1)
            cv2.putText(out, text, (20, y + 12), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
            y += 18
    return out


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
