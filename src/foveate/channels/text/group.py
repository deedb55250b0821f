"""The ``text`` channel group: OCR lines painted on the level-0 tile grid (``text``: the line mask,
``text_density``: characters per tile), with the lines, words and their MiniLM embeddings stored with the texture.
In the ``default`` preset (and ``full``, by the layout order).

The OCR reads where the gate finds text (``EncodeConfig`` option ``ocr="auto"``, the default; :mod:`.gate`) or the
whole image (``ocr="always"``); lines the source carries itself (a PDF page's text layer, handed in as
``EncodeContext.frame["text_layer"]``) replace the OCR.  The group is a *background* group: an encode starts it on
a worker thread before the other groups (onnxruntime and torch release the GIL), so its OCR runs beside them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.device import ENCODE_TORCH_THREADS, request_threads
from ...core.ops import axis_overlap
from ..base import ChannelGroup, EncodeContext
from .embed import TEXT_EMBEDDER, embed_texts
from .ocr import DEFAULT_OCR_MODE, DEFAULT_RECOGNISER, OCR_ENGINE, OcrLine, ocr_result

if TYPE_CHECKING:
    from ...core.texture import Texture


# ----------------------------------------------------------------------------------------------------------
# Tile-grid painting (pure)


def box_tile_overlap(box: Sequence[float], grid: tuple[int, int], patch: int) -> tuple[slice, slice, np.ndarray]:
    """Fraction of each level-0 tile covered by a pixel box, restricted to the tiles it touches.

    Args:
        box: ``(x0, y0, x1, y1)`` pixels.  grid: (gh, gw).  patch: P.
    Returns:
        ``(rows, cols, frac)``: slices into the grid and the (len(rows), len(cols)) float32 fractions of each
        tile's P x P area inside the box (empty slices for a box outside the grid).
    """
    b = np.asarray(box, np.float64).reshape(1, 4)
    fy, r0, r1 = _axis_fractions(b[:, 1], b[:, 3], grid[0], patch)
    fx, c0, c1 = _axis_fractions(b[:, 0], b[:, 2], grid[1], patch)
    if r1[0] <= r0[0] or c1[0] <= c0[0]:
        return slice(0, 0), slice(0, 0), np.zeros((0, 0), np.float32)
    rs, cs = slice(r0[0], r1[0]), slice(c0[0], c1[0])
    return rs, cs, np.outer(fy[0, rs], fx[0, cs]).astype(np.float32)


def paint_boxes(
    grid: tuple[int, int],
    patch: int,
    boxes: Sequence[Sequence[float]],
    values: Sequence[float],
    touch: bool = True,
    fill: float = 0.0,
) -> np.ndarray:
    """Paint boxes onto the level-0 tile grid, keeping the maximum where they overlap.

    Args:
        boxes: (N, 4) pixel boxes.  values: (N,) value per box.
        touch: every tile the box touches gets the full value (``True``: what must be sharp to read it), or
            the value times the covered fraction of the tile (``False``).
        fill: with ``touch``, a tile the box covers a fraction f of gets the value times ``1 - fill * (1 - f)``:
            still painted, but below the tiles that hold the box's core (a coarse tile takes its children's
            maximum, so the quadtree then refines first the parent that holds most of the box, not one its
            margin only reaches).
    Returns:
        (gh, gw) float32.
    """
    out = np.zeros(grid, np.float32)
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    if not len(b):
        return out
    v = np.asarray(values, np.float32).reshape(-1)
    if len(v) != len(b):
        raise ValueError(f"paint_boxes: {len(b)} boxes but {len(v)} values")
    gh, gw = grid
    fy, r0, r1 = _axis_fractions(b[:, 1], b[:, 3], gh, patch)
    fx, c0, c1 = _axis_fractions(b[:, 0], b[:, 2], gw, patch)
    # the per-axis fractions of every box at once; the loop only multiplies and takes the maximum
    for i in np.nonzero((r1 > r0) & (c1 > c0))[0]:
        rs, cs = slice(r0[i], r1[i]), slice(c0[i], c1[i])
        frac = np.outer(fy[i, rs], fx[i, cs]).astype(np.float32)
        val = np.where(frac > 0, v[i] * (1.0 - fill * (1.0 - frac)), 0.0) if touch else frac * v[i]
        np.maximum(out[rs, cs], val, out=out[rs, cs])
    return out


def _axis_fractions(lo: np.ndarray, hi: np.ndarray, n: int, patch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Along one axis, for N intervals [lo, hi) in pixels: the fraction of each of the ``n`` tiles inside each
    (N, n) float64 (:func:`foveate.core.ops.axis_overlap` / P), and the first and one-past-last tile each touches
    (clipped to the grid)."""
    first = np.maximum(np.floor_divide(lo, patch), 0).astype(np.int64)
    last = np.minimum(-np.floor_divide(-hi, patch), n).astype(np.int64)
    return axis_overlap(lo, hi, n, patch) / patch, first, last


# ----------------------------------------------------------------------------------------------------------
# The text channel group


def text_channels(lines: Sequence[OcrLine], grid: tuple[int, int], patch: int) -> np.ndarray:
    """Level-0 ``text`` and ``text_density`` channels from OCR lines.

    ``text``: fraction of each tile inside an OCR line box (boxes are summed, then clipped to 1).
    ``text_density``: how fine the print touching the tile is: the characters a full tile of that line would
    hold (its characters spread evenly over its box), the maximum over the lines touching the tile, mapped to
    [0, 1) by ``1 - exp(-chars / 2)``.  10 px print packs ~4.6 characters into a 16 px tile (0.90), 15 px
    print ~2 (0.63), 30 px print ~0.5 (0.22): small print needs full resolution to stay legible, so a tile
    that only grazes a line of it still needs detail.
    Returns (gh, gw, 2) float32.
    """
    mask = np.zeros(grid, np.float32)
    chars = np.zeros(grid, np.float32)
    area = float(patch * patch)
    for ln in lines:
        rs, cs, frac = box_tile_overlap(ln.box, grid, patch)
        if not frac.size:
            continue
        x0, y0, x1, y1 = ln.box
        n = len("".join(ln.text.split()))
        mask[rs, cs] += frac
        per_tile = n * area / max((x1 - x0) * (y1 - y0), 1)
        np.maximum(chars[rs, cs], np.where(frac > 0, per_tile, 0.0), out=chars[rs, cs])
    return np.dstack([np.minimum(mask, 1.0), 1.0 - np.exp(-chars / 2.0)]).astype(np.float32)


#: ``EncodeContext.frame`` key of lines read from the source itself (a born-digital PDF page's text layer,
#: :mod:`foveate.document.textlayer`): the group paints them instead of running OCR
TEXT_LAYER_KEY = "text_layer"
TEXT_LAYER_ENGINE = "pdf text layer (pdfium)"


def _text_group(ctx: EncodeContext) -> np.ndarray:
    t0 = time.perf_counter()
    layer: list[OcrLine] | None = ctx.frame.get(TEXT_LAYER_KEY)
    ocr: dict[str, Any]
    if layer is not None:
        lines, engine, ocr = list(layer), TEXT_LAYER_ENGINE, {"mode": "text-layer"}
    else:
        cfg = ctx.config
        result = ocr_result(
            ctx.image, cfg.option("ocr") or DEFAULT_OCR_MODE, recogniser=cfg.option("recogniser") or DEFAULT_RECOGNISER
        )
        lines, engine = result.lines, OCR_ENGINE
        ocr = {"mode": result.mode, "runtime": result.runtime, **({"gate": result.gate} if result.gate else {})}
    t1 = time.perf_counter()
    with request_threads(ENCODE_TORCH_THREADS):
        emb = embed_texts([ln.text for ln in lines])
    t2 = time.perf_counter()
    ctx.tensors["text_embeddings"] = emb.astype(np.float16)
    ctx.extras["text"] = {
        "engine": engine,
        "embedder": TEXT_EMBEDDER,
        "lines": [ln.to_dict() for ln in lines],
        "ocr": ocr,
        "timings_ms": {"ocr": (t1 - t0) * 1000.0, "embed": (t2 - t1) * 1000.0},
    }
    return text_channels(lines, ctx.grid, ctx.patch)


TEXT = ChannelGroup(
    "text",
    ("text", "text_density"),
    _text_group,
    "high",
    "OCR (rapidocr) where a detector pass on a small copy finds text (ocr=auto) or on the whole "
    "image (ocr=always): text-line mask and characters per tile; lines, words and MiniLM line "
    "embeddings are stored with the texture",
    background=True,
    fallible=True,
)


# ----------------------------------------------------------------------------------------------------------
# Reading the group back from a texture


def has_text_group(texture: Texture) -> bool:
    """The texture was encoded with the text group, and its OCR ran (the group is not absent)."""
    return "text" in texture.groups and "text" not in texture.absent and "text" in texture.extras


def stored_lines(texture: Texture) -> list[OcrLine] | None:
    """The OCR lines stored with the texture (``None`` without the text group)."""
    if not has_text_group(texture):
        return None
    return [OcrLine.from_dict(d) for d in texture.extras["text"].get("lines", [])]
