"""Pure helpers on the tile grid (no state: arrays in, arrays out) that both incremental updates use: change
detection, crop plans, mips along changed paths, optical flow on tiles, affine moves of tile maps, cells (quarter
tiles) and their covers, splatting remembered maps forward, and what a selection leaves on the grid."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import cv2
import numpy as np

from ..core import ops
from ..core.types import Bools

if TYPE_CHECKING:
    from ..selection import Selection

#: mean absolute difference per level-0 tile of two frames, grey levels over pixels and RGB (:func:`ops.tile_abs_diff`)
tile_change = ops.tile_abs_diff


def dilate_tiles(mask: np.ndarray, k: int) -> np.ndarray:
    """Tiles within k tiles (Chebyshev distance) of a ``True`` tile.  (gh, gw) bool -> (gh, gw) bool."""
    if k <= 0 or not mask.any():
        return mask.copy()
    return cv2.dilate(mask.astype(np.uint8), np.ones((2 * k + 1, 2 * k + 1), np.uint8)) > 0


def plan_crops(
    update: np.ndarray, k: int, full_share: float = 1.0
) -> list[tuple[tuple[int, int, int, int], np.ndarray | None]]:
    """Crops that recompute the tiles of ``update`` exactly for a group with a margin of k tiles.

    Tiles within k of each other share a crop (connected components of ``update`` dilated by k); a crop is the
    component's bounding box, so it extends at least k tiles beyond every tile it writes (or reaches the border).

    Args:
        update: (gh, gw) bool, the tiles to recompute.
    Returns:
        ``[((r0, c0, r1, c1), write), ...]``: tile rectangles (r1, c1 exclusive) and, per rectangle, the (r1-r0,
        c1-c0) bool mask of tiles to write from it; ``[((0, 0, gh, gw), None)]`` (write all) when the crops would
        cover more than ``full_share`` of the grid.
    """
    gh, gw = update.shape
    if not update.any():
        return []
    grown = dilate_tiles(update, k).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(grown, connectivity=8)
    area = int(stats[1:, cv2.CC_STAT_WIDTH].astype(np.int64) @ stats[1:, cv2.CC_STAT_HEIGHT])
    if area > full_share * gh * gw:
        return [((0, 0, gh, gw), None)]
    out = []
    for i in range(1, n):
        c0, r0, w, h = (int(v) for v in stats[i, :4])
        rect = (r0, c0, r0 + h, c0 + w)
        write = update[r0 : r0 + h, c0 : c0 + w] & (labels[r0 : r0 + h, c0 : c0 + w] == i)
        out.append((rect, write))
    return out


def _bands(mask: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Rectangles covering a bool mask: runs of rows with a True, each spanning those rows' column extent."""
    rows = np.flatnonzero(mask.any(axis=1))
    if len(rows) == 0:
        return []
    breaks = np.flatnonzero(np.diff(rows) > 1)
    starts = np.concatenate([[rows[0]], rows[breaks + 1]])
    ends = np.concatenate([rows[breaks], [rows[-1]]]) + 1
    out = []
    for r0, r1 in zip(starts, ends):
        cols = np.flatnonzero(mask[r0:r1].any(axis=0))
        out.append((int(r0), int(cols[0]), int(r1), int(cols[-1]) + 1))
    return out


#: Cost of one ``ops.mip_down`` call beyond its arithmetic, in child elements (measured on a 2-core x86 CPU: ~5,000
#: elements' worth of time).  ``update_mips`` rebuilds whole levels when many small bands would cost more.
MIP_CALL_COST = 5000


def update_mips(
    means: list[np.ndarray],
    maxes: list[np.ndarray],
    covs: list[np.ndarray],
    updates: list[tuple[np.ndarray, np.ndarray]],
) -> None:
    """Recompute mean/max mips in place along the paths of changed level-0 tiles.

    Args:
        means, maxes, covs: per level (gh_l, gw_l, C) / (gh_l, gw_l, C) / (gh_l, gw_l), as ``ops.build_mips``.
        updates: ``[(channel indices (n,), changed (gh, gw) bool at level 0), ...]``.
    Per level, the parents of the changed tiles are recomputed with ``ops.mip_down`` (the arithmetic of a full
    build) on the bands of rows that hold them, and become the changed tiles of the next level -- unless that
    would cost more than recomputing every level whole (small grids, many bands; see ``MIP_CALL_COST``).
    """
    plans, work, calls = [], 0, 0
    for chans, mask in updates:
        chans = np.asarray(chans, np.int64)
        if len(chans) == 0:
            continue
        contiguous = bool(np.all(np.diff(chans) == 1))
        sel = slice(int(chans[0]), int(chans[-1]) + 1) if contiguous else chans
        per_level = []
        for _ in range(len(means) - 1):
            gh, gw = mask.shape
            h2, w2 = -(-gh // 2), -(-gw // 2)
            padded = np.zeros((2 * h2, 2 * w2), bool)
            padded[:gh, :gw] = mask
            # any() over 2 of 4 axes is an array (NumPy's stubs: an array or a scalar)
            mask = cast(Bools, padded.reshape(h2, 2, w2, 2).any(axis=(1, 3)))
            bands = _bands(mask)
            per_level.append(bands)
            calls += len(bands)
            work += 4 * len(chans) * sum((r1 - r0) * (c1 - c0) for r0, c0, r1, c1 in bands)
        plans.append((sel, per_level))
    n_chan = means[0].shape[-1]
    whole = [[(0, 0, m.shape[0], m.shape[1])] for m in means[1:]]
    if (
        work + calls * MIP_CALL_COST
        > 4 * n_chan * sum(m.shape[0] * m.shape[1] for m in means[1:]) + len(whole) * MIP_CALL_COST
    ):
        plans = [(slice(None), whole)]
    for sel, per_level in plans:
        for lvl, bands in enumerate(per_level):
            gh, gw = means[lvl].shape[:2]
            for pr0, pc0, pr1, pc1 in bands:
                r0, c0, r1, c1 = 2 * pr0, 2 * pc0, min(2 * pr1, gh), min(2 * pc1, gw)
                m, x, _ = ops.mip_down(
                    means[lvl][r0:r1, c0:c1][..., sel], maxes[lvl][r0:r1, c0:c1][..., sel], covs[lvl][r0:r1, c0:c1]
                )
                means[lvl + 1][pr0:pr1, pc0:pc1, sel] = m
                maxes[lvl + 1][pr0:pr1, pc0:pc1, sel] = x


def tile_flow(
    prev_small: np.ndarray, cur_small: np.ndarray, dis: Any, grid: tuple[int, int], patch: int, scale: int
) -> tuple[np.ndarray, np.ndarray]:
    """Forward optical flow on the tile grid.

    Args:
        prev_small, cur_small: (h, w) uint8 grey copies of the previous and current frame, ``scale`` times smaller.
        dis: a ``cv2.DISOpticalFlow``.  grid: (gh, gw).
    Returns:
        ``(dest_x, dest_y)``, (gh, gw) float32 each: for every level-0 tile of the previous frame, the fractional
        tile coordinates its content moved to in the current frame (flow averaged over the tile).
    """
    flow = dis.calc(prev_small, cur_small, None)  # prev(p) ~ cur(p + flow(p)), in small pixels
    gh, gw = grid
    f = cv2.resize(flow, (gw, gh), interpolation=cv2.INTER_AREA) * np.float32(scale / patch)
    yy, xx = np.mgrid[0:gh, 0:gw].astype(np.float32)
    return xx + f[..., 0], yy + f[..., 1]


def flow_shift(dest_x: np.ndarray, dest_y: np.ndarray) -> np.ndarray:
    """The tiles' median motion as a translation (2, 3), in tile coordinates (tile (r, c) at ``(x, y) = (c, r)``):
    the camera's motion where most of the picture is background, a first guess for :func:`register`.

    Args:
        dest_x, dest_y: (gh, gw) float32 from :func:`tile_flow`.
    """
    gh, gw = dest_x.shape
    dx = float(np.median(dest_x - np.arange(gw, dtype=np.float32)[None, :]))
    dy = float(np.median(dest_y - np.arange(gh, dtype=np.float32)[:, None]))
    return np.array([[1.0, 0.0, dx], [0.0, 1.0, dy]])


def move_tiles(maps: np.ndarray, motion: np.ndarray, nearest: bool = False) -> np.ndarray:
    """Tile maps moved by an affine transform of tile coordinates: each tile samples the maps at its source position
    (bilinear, or nearest-neighbour for labels); a source outside the grid repeats the border.
    (gh, gw[, C]) -> the same shape and dtype (integer labels go through float32, exactly)."""
    gh, gw = maps.shape[:2]
    src = maps.astype(np.float32) if maps.dtype.kind != "f" else maps
    out = cv2.warpAffine(
        src, motion, (gw, gh), flags=cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    )
    return out.reshape(maps.shape).astype(maps.dtype, copy=False)


def then(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The 2x3 affine transform ``second`` applied after ``first``."""
    out: np.ndarray = second[:, :2] @ first + np.hstack([np.zeros((2, 2)), second[:, 2:]])
    return out


def regrid(motion: np.ndarray, size: float, new_size: float) -> np.ndarray:
    """A transform between grids of ``size``-px cells, expressed on grids of ``new_size``-px cells (cell c's centre,
    at (c + 1/2) size px, is cell (c + 1/2) size / new_size - 1/2 there)."""
    a = size / new_size
    b = 0.5 * a - 0.5
    m = motion[:, :2]
    return np.hstack([m, (a * motion[:, 2] + b - m.sum(axis=1) * b)[:, None]])


def cell_size(patch: int) -> int:
    """Side in px of the cells motion compensation keeps pixel statistics at: a quarter of a tile (a half, or the tile,
    when the patch size is not divisible by 4, 2).  Half-tile cells would halve the canvas's per-frame cost at the same
    tokens on ``sam2_bedroom_video``, but registering on them misses a sub-pixel pan by more than half a pixel (the
    bilinearly sampled cell means of the keyframe no longer match the frame's own)."""
    for q in (4, 2):
        if patch % q == 0:
            return patch // q
    return patch


def cells_to_tiles(cells: np.ndarray, coverage: np.ndarray, per_tile: int) -> np.ndarray:
    """Tile means from cell means: the coverage-weighted mean of each tile's ``per_tile`` x ``per_tile`` cells, exactly
    the tile mean of the pixel map whose cell means ``cells`` holds (a cell's mean times its coverage is its pixel sum
    over s²; cells beyond the frame weigh nothing).

    Args:
        cells: (ch, cw, k) float32.  coverage: (ch, cw) float32, :func:`ops.coverage0` at the cell size.
    Returns:
        (ceil(ch / per_tile), ceil(cw / per_tile), k) float32.
    """
    ch, cw, k = cells.shape
    q = per_tile
    gh, gw = -(-ch // q), -(-cw // q)
    if (
        coverage.min() == 1.0
    ):  # whole cells: block means, the whole blocks in one call, the leftover row and column apart
        h0, w0 = ch // q, cw // q
        out = np.empty((gh, gw, k), np.float32)
        if h0 and w0:
            out[:h0, :w0] = cv2.resize(cells[: h0 * q, : w0 * q], (w0, h0), interpolation=cv2.INTER_AREA).reshape(
                h0, w0, k
            )
        if h0 < gh and w0:
            out[h0, :w0] = cells[h0 * q :, : w0 * q].reshape(ch - h0 * q, w0, q, k).mean(axis=(0, 2))
        if w0 < gw and h0:
            out[:h0, w0] = cells[: h0 * q, w0 * q :].reshape(h0, q, cw - w0 * q, k).mean(axis=(1, 2))
        if h0 < gh and w0 < gw:
            out[h0, w0] = cells[h0 * q :, w0 * q :].mean(axis=(0, 1))
        return out
    x = cells * coverage[..., None]
    if (gh * q, gw * q) != (ch, cw):
        pad = (0, gh * q - ch, 0, gw * q - cw, cv2.BORDER_CONSTANT)
        x, coverage = cv2.copyMakeBorder(x, *pad, value=0), cv2.copyMakeBorder(coverage, *pad, value=0)
    means = cv2.resize(x, (gw, gh), interpolation=cv2.INTER_AREA).reshape(gh, gw, k)  # block means
    tiles: np.ndarray = means / cv2.resize(coverage, (gw, gh), interpolation=cv2.INTER_AREA)[..., None]
    return tiles


def grey_cells(gray: np.ndarray, cell: int) -> np.ndarray:
    """Mean grey level of every ``cell``-px cell (edge-padded to whole cells; :func:`ops.area_shrink`, rounded to
    integer levels).  (H, W) uint8 -> (ceil(H/s), ceil(W/s)) uint8."""
    h, w = gray.shape
    ch, cw = ops.grid_shape(h, w, cell)
    if (ch * cell, cw * cell) != (h, w):
        gray = cv2.copyMakeBorder(gray, 0, ch * cell - h, 0, cw * cell - w, cv2.BORDER_REPLICATE)
    return ops.area_shrink(gray, cell)


#: Fixed cost of one crop (a call of every generator), in level-0 tiles' worth of pixels (measured on a 2-core x86
#: CPU); :func:`cover_tiles` merges crops when that saves more than it adds.
CROP_CALL_TILES = 16


def cover_tiles(
    pick: np.ndarray, margin: float, block: int = 2, call_cost: float = CROP_CALL_TILES
) -> list[tuple[int, int, int, int]]:
    """Rectangles of tiles that cover every picked tile while keeping the pixels their crops read small.

    The grid is cut into blocks of ``block`` x ``block`` tiles; each 8-connected group of blocks holding a picked
    tile starts as its bounding rectangle, then the pair whose union saves most is merged while merging saves: a
    rectangle of h x w tiles costs (h + 2 margin) (w + 2 margin) + ``call_cost`` (margin in tiles, the pixels a
    crop reads beyond its tiles).

    Args:
        pick: (gh, gw) bool.
    Returns:
        ``[(r0, c0, r1, c1), ...]`` tile rectangles (r1, c1 exclusive), possibly overlapping.
    """
    gh, gw = pick.shape
    bh, bw = -(-gh // block), -(-gw // block)
    padded = np.zeros((bh * block, bw * block), bool)
    padded[:gh, :gw] = pick
    # any() over 2 of 4 axes is an array (NumPy's stubs: an array or a scalar)
    blocks = cast(Bools, padded.reshape(bh, block, bw, block).any(axis=(1, 3))).astype(np.uint8)
    n, _, stats, _ = cv2.connectedComponentsWithStats(blocks, connectivity=8)
    if n <= 1:
        return []
    top, left = stats[1:, cv2.CC_STAT_TOP], stats[1:, cv2.CC_STAT_LEFT]
    rects = np.stack(
        [
            top * block,
            left * block,
            np.minimum((top + stats[1:, cv2.CC_STAT_HEIGHT]) * block, gh),
            np.minimum((left + stats[1:, cv2.CC_STAT_WIDTH]) * block, gw),
        ],
        axis=1,
    ).astype(np.float64)

    def cost(r: np.ndarray) -> np.ndarray:
        out: np.ndarray = (r[..., 2] - r[..., 0] + 2 * margin) * (r[..., 3] - r[..., 1] + 2 * margin) + call_cost
        return out

    while len(rects) > 1:
        merged = np.concatenate(
            [np.minimum(rects[:, None, :2], rects[None, :, :2]), np.maximum(rects[:, None, 2:], rects[None, :, 2:])],
            axis=-1,
        )
        c = cost(rects)
        saving = c[:, None] + c[None, :] - cost(merged)
        np.fill_diagonal(saving, -np.inf)
        i, j = np.unravel_index(int(np.argmax(saving)), saving.shape)
        if saving[i, j] <= 0:
            break
        rects[i] = merged[i, j]
        rects = np.delete(rects, j, axis=0)
    return [(int(a), int(b), int(c), int(d)) for a, b, c, d in rects]


def crop_box(
    rect: tuple[int, int, int, int], margin: int, patch: int, shape: tuple[int, int]
) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """Pixels of a tile rectangle and of its crop: ``((y0, x0, y1, x1), (cy0, cx0, cy1, cx1))``, the crop reaching
    ``margin`` px further (its origin even, so half-resolution copies align with the frame's), clipped at the image
    border, where the filters' own border rule applies as in a full encode."""
    h, w = shape
    r0, c0, r1, c1 = rect
    y0, x0, y1, x1 = r0 * patch, c0 * patch, min(r1 * patch, h), min(c1 * patch, w)
    return (y0, x0, y1, x1), (
        max(y0 - margin, 0) & ~1,
        max(x0 - margin, 0) & ~1,
        min(y1 + margin, h),
        min(x1 + margin, w),
    )


def splat_matrix(dest_x: np.ndarray, dest_y: np.ndarray) -> Any:
    """The (N, N) sparse matrix, N = gh * gw, that moves tile values to their flow destinations.

    Each source tile's value is splatted bilinearly around ``(dest_x, dest_y)``; a destination that receives more
    than one unit of weight averages, one that receives less fades (content the motion uncovers has no past).  A
    zero flow is the identity.  (gh, gw) float32 each -> ``scipy.sparse.csc_matrix`` (a column per source tile, its
    up to four destinations in order: built without sorting); apply with :func:`warp_tile_maps`.
    """
    from scipy import sparse

    gh, gw = dest_x.shape
    n = gh * gw
    x, y = dest_x.ravel(), dest_y.ravel()
    x0, y0 = np.floor(x), np.floor(y)
    wx, wy = x - x0, y - y0
    ty = y0.astype(np.int64)[:, None] + np.array([0, 0, 1, 1])  # (N, 4): each source's four destinations
    tx = x0.astype(np.int64)[:, None] + np.array([0, 1, 0, 1])
    wgt = np.stack([(1 - wy) * (1 - wx), (1 - wy) * wx, wy * (1 - wx), wy * wx], axis=1)
    ok = (ty >= 0) & (ty < gh) & (tx >= 0) & (tx < gw) & (wgt > 0)
    rows, vals = (ty * gw + tx)[ok], wgt[ok]
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(ok.sum(axis=1), out=indptr[1:])
    received = np.bincount(rows, weights=vals, minlength=n)
    return sparse.csc_matrix((vals / np.maximum(received, 1.0)[rows], rows, indptr), shape=(n, n))


def warp_tile_maps(splat: Any, maps: list[np.ndarray]) -> list[np.ndarray]:
    """Apply a :func:`splat_matrix` to (gh, gw) tile maps, all at once."""
    if not maps:
        return []
    shape = maps[0].shape
    stacked = np.empty((maps[0].size, len(maps)), np.float32)
    for i, m in enumerate(maps):
        stacked[:, i] = m.ravel()
    moved = (splat @ stacked).astype(np.float32, copy=False)
    return [moved[:, i].reshape(shape) for i in range(len(maps))]


def _downscale(gray: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """A copy with at least ``size`` px on the long side, shrunk by an integer factor (OpenCV's fast area-averaging
    path; rows and columns that do not fill a whole block are left out).  Returns ``(copy, factor)``."""
    h, w = gray.shape
    f = max(1, max(h, w) // size)
    if f == 1:
        return gray, 1
    hh, ww = max(h // f, 1), max(w // f, 1)
    return ops.area_shrink(gray[: hh * f, : ww * f], f), f


def flow_copy(gray: np.ndarray, cells: np.ndarray | None, size: int, patch: int) -> tuple[np.ndarray, int]:
    """The grey copy optical flow runs on and its shrink factor: ``gray`` shrunk by an integer factor to at least
    ``size`` px (:func:`_downscale`) -- from the grey cells of a motion-compensated session when the factor is a
    multiple of the cell size (the same copy, up to the cells' rounding, at a fraction of the cost)."""
    h, w = gray.shape
    factor, cell = max(1, max(h, w) // size), cell_size(patch)
    if cells is None or factor % cell:
        return _downscale(gray, size)
    k, hh, ww = factor // cell, max(h // factor, 1), max(w // factor, 1)
    if k == 1:
        return np.ascontiguousarray(cells[:hh, :ww]), factor
    return cv2.resize(cells[: hh * k, : ww * k], (ww, hh), interpolation=cv2.INTER_AREA), factor


def fixation_map(sel: Selection) -> np.ndarray:
    """(gh, gw) float32: per level-0 tile, 4**-l for the finest token level l covering it (0 where none does):
    how sharply the tile was seen: ``0.25 ** sel.level_map()`` where a token covers the tile."""
    lm = sel.level_map()
    out = np.zeros(lm.shape, np.float32)
    seen = lm >= 0
    out[seen] = np.ldexp(np.float32(1.0), -2 * lm[seen])  # 0.25 ** l, exactly
    return out


def token_overlap(a: Selection, b: Selection) -> float:
    """Share of ``b``'s tokens (gist excluded) that ``a`` also chose (same level, row and column)."""
    keys_a = {(int(l), int(r), int(c)) for l, r, c, g in zip(a.levels, a.rows, a.cols, a.gist) if not g}
    keys_b = [(int(l), int(r), int(c)) for l, r, c, g in zip(b.levels, b.rows, b.cols, b.gist) if not g]
    return sum(k in keys_a for k in keys_b) / max(len(keys_b), 1)


def _indices(slices: list[tuple[int, int]]) -> np.ndarray:
    """Channel slices [(a, b), ...] -> sorted channel indices."""
    return np.unique(np.concatenate([np.arange(a, b) for a, b in slices])) if slices else np.zeros(0, np.int64)


def _split_channels(out: np.ndarray, slices: list[tuple[int, int]]) -> Iterator[tuple[tuple[int, int], np.ndarray]]:
    """``run_groups`` output (..., C) of groups laid out at texture channel ``slices`` [(a, b), ...] in order ->
    ``((a, b), out[..., block])`` per group (views)."""
    o = 0
    for a, b in slices:
        yield (a, b), out[..., o : o + b - a]
        o += b - a
