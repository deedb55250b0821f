"""The page's layout and the per-texture index the ``text`` query term reads: where a field's value sits relative to
its label (:func:`layout_neighbours`), and the lines, tokens, embeddings and neighbours prepared once per texture
(:func:`text_index`, cached with the texture, never saved)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...channels.text.embed import EMBED_DIM, embed_texts
from ...channels.text.group import has_text_group, stored_lines
from ...channels.text.ocr import OcrLine
from .match import fold, tokenize

if TYPE_CHECKING:
    from ...core.texture import Texture


def layout_neighbours(boxes: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where a field's value sits relative to its label: for each line, the nearest line to its right on the
    same row, the nearest line below it, and whether that lower line continues the same block of text.

    Right: vertical overlap >= half the smaller height, starts after the line ends (0.3 heights of slack),
    gap <= half the page width.  Below: starts under the line (0.3 heights of slack), horizontally overlaps
    the line's span widened by one height left and three right, gap <= 3 heights.  Continuation: the line
    below, at most 0.8 heights under it, left edges within 2 heights, heights within a factor 1.6 (the next
    line of a multi-line value or paragraph).

    Args:
        boxes: (N, 4) line boxes.  width: page width in pixels.
    Returns:
        ``(right, below, cont)``: (N,) int arrays of line indices, -1 where there is none.
    """
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    n = len(b)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    x0, y0, x1, y1 = b.T
    h = np.maximum(y1 - y0, 1.0)
    hi = h[:, None]
    overlap_y = np.minimum(y1[:, None], y1[None, :]) - np.maximum(y0[:, None], y0[None, :])
    gap_x = x0[None, :] - x1[:, None]
    right_ok = (overlap_y >= 0.5 * np.minimum(hi, h[None, :])) & (gap_x >= -0.3 * hi) & (gap_x <= 0.5 * width)
    gap_y = y0[None, :] - y1[:, None]
    span = np.minimum(x1[None, :], x1[:, None] + 3 * hi) - np.maximum(x0[None, :], x0[:, None] - hi)
    below_ok = (gap_y >= -0.3 * hi) & (gap_y <= 3 * hi) & (span > 0) & (overlap_y < 0.5 * np.minimum(hi, h[None, :]))
    np.fill_diagonal(right_ok, False)
    np.fill_diagonal(below_ok, False)
    right = np.where(right_ok.any(1), np.where(right_ok, gap_x, np.inf).argmin(1), -1)
    below = np.where(below_ok.any(1), np.where(below_ok, gap_y, np.inf).argmin(1), -1)
    j = np.maximum(below, 0)
    ratio = h[j] / h
    cont = np.where(
        (below >= 0)
        & (gap_y[np.arange(n), j] <= 0.8 * h)
        & (np.abs(x0[j] - x0) <= 2 * h)
        & (ratio <= 1.6)
        & (ratio >= 1 / 1.6),
        below,
        -1,
    )
    return right.astype(np.int64), below.astype(np.int64), cont.astype(np.int64)


# ----------------------------------------------------------------------------------------------------------
# Per-texture index (built on first query, cached with the texture, never saved)


@dataclass
class TextIndex:
    """What the ``text`` query term reads, prepared once per texture."""

    lines: list[OcrLine]
    boxes: np.ndarray  # (N, 4) float64
    embeddings: np.ndarray  # (N, 384) float32, unit rows
    words: list[str]  # every line's tokens, line after line
    folded: list[str]  # the same, OCR confusions folded
    word_line: np.ndarray  # (M,) line of each token
    compact: list[str]  # per line: normalised text without spaces (phrase matching)
    right: np.ndarray  # (N,) layout neighbours (see layout_neighbours), -1 = none
    below: np.ndarray
    cont: np.ndarray
    grid: tuple[int, int]
    patch: int
    image_size: tuple[int, int]
    recent: OrderedDict = field(default_factory=OrderedDict)  # query text -> LineMatch (for explain)
    cache: dict = field(default_factory=dict)  # per-page features of the learned ranker, keyed by what they depend on


def text_index(texture: Texture) -> TextIndex | None:
    """The texture's :class:`TextIndex` (``None`` when it was encoded without the text group), built once per
    texture (:meth:`~foveate.core.texture.Texture.derived`)."""
    if not has_text_group(texture):
        return None
    return texture.derived(("text_index",), lambda: _build_index(texture), features=False)


def _build_index(texture: Texture) -> TextIndex:
    """The index of the stored OCR lines: tokens, embeddings (recomputed for a texture written without them) and
    layout neighbours."""
    lines = stored_lines(texture) or []
    stored = texture.tensors.get("text_embeddings")
    emb = stored.float().numpy() if stored is not None and len(lines) else np.zeros((len(lines), EMBED_DIM), np.float32)
    if emb.shape != (len(lines), EMBED_DIM):  # a texture written without embeddings: recompute them
        emb = embed_texts([ln.text for ln in lines])
    words: list[str] = []
    owner: list[int] = []
    for i, ln in enumerate(lines):
        toks = tokenize(ln.text)
        words += toks
        owner += [i] * len(toks)
    boxes = np.array([ln.box for ln in lines], np.float64).reshape(-1, 4)
    h, w = texture.image_size
    right, below, cont = layout_neighbours(boxes, w)
    return TextIndex(
        lines,
        boxes,
        emb,
        words,
        [fold(w) for w in words],
        np.array(owner, np.int64),
        ["".join(tokenize(ln.text)) for ln in lines],
        right,
        below,
        cont,
        texture.level_shapes[0],
        texture.patch_size,
        (h, w),
    )
