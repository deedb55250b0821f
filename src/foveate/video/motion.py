"""The motion-compensated update (the default) -- for a moving camera, where nearly every tile changes every
frame and change detection re-encodes everything.  Approximate: the texture approximates the frame's own encode
(``state.reference`` is the frame); ``foveate bench-video`` measures how closely.

1. **The canvas**: a keyframe keeps, on its own grid plus a margin of 1/8 of the frame, the cell means (cells of a
   quarter tile, P/4 px) of the pixel maps of the groups whose tiles are tile means of a pixel map
   (``ChannelGroup.pixels``: rgb, edges, frequency, distance) and of the grey level.  Cells, not tiles: moving a
   tile map by a fraction of a tile blurs it, and frame after frame the blur adds up; cells are resampled once, from
   the keyframe.
2. **The camera**: the optical flow the memory needs gives a guess (the tiles' median motion); one Gauss-Newton step
   of a similarity transform registers the frame's grey cells on the canvas's (every third cell, moving objects
   weighted out), so the estimate never drifts: it is anchored to the keyframe, not chained frame to frame.
3. **Prediction**: the canvas is sampled once where the camera now looks (bilinear); cells become tile means
   (exactly: a tile is 4 x 4 cells) and the groups' ``finish`` makes the channels.  Per tile, the **residual** is
   the mean |frame's grey cells - canvas's| over the part the canvas covers; a tile the canvas covers less than half
   of is new (the camera uncovered it).
4. **Re-encoding**: tiles over the threshold, largest residual first (new tiles first), as many as fit in
   ``reencode_budget`` (5 % of the frame's pixels, crop margins included, by default): rectangles of tiles
   (:func:`cover_tiles`) are encoded from crops of the frame with the groups' margins, their tiles replace the
   prediction and their cells are written back into the canvas.  Moving objects, parallax and what the camera
   uncovers are refreshed; what the budget leaves for later is refreshed on the next frames or the next keyframe.
5. Groups without a pixel map are recomputed on the whole frame every frame when cheap (motion, the frame
   difference; saliency, 64 px spectral residual), or moved with the camera from the keyframe's tile maps and
   refreshed on keyframes (clusters and boundaries, nearest-neighbour labels; text and semantic: model inference);
   see ``UpdateRule.motion``.  The mips are rebuilt (every level-0 tile moved).
6. Keyframes (every ``keyframe_interval`` frames), scene cuts and frames with more than ``full_frame_share`` of the
   tiles over the threshold are encoded from scratch and restart the canvas: drift is bounded by the interval.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import cv2
import numpy as np
import torch

from ..channels.base import ChannelGroup, EncodeContext
from ..channels.registry import get_group, run_groups
from ..core import ops
from ..core.types import F32
from .state import _required, _torch_tensors
from .tiles import _split_channels, cells_to_tiles, cover_tiles, crop_box, grey_cells, move_tiles, regrid, then

if TYPE_CHECKING:
    from .state import VideoState, _Layout


#: where :func:`register` samples the canvas around each cell: the cell, then one cell right, left, down and up
_REGISTER_OFFSETS = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], np.float32)


def register(
    head: np.ndarray, grey: np.ndarray, to_canvas: np.ndarray, iterations: int = 1, step: int = 3
) -> np.ndarray:
    """Refine where a frame lies on the canvas: Gauss-Newton steps of a similarity transform (rotation, scale and
    shift about the frame's centre) that bring the canvas's grey levels onto the frame's, on every ``step``-th cell
    each way; cells the camera does not explain (moving objects: |residual| beyond 4.685 robust standard deviations, at
    least 8 grey levels) are weighted out by Tukey's biweight.  The canvas is sampled (bilinear) only at those cells
    and one cell either side of them, for the gradient (central differences).

    Args:
        head: (Hc, Wc, 2) float32, the canvas's validity and grey level.  grey: (ch, cw) float32, the frame's cells.
        to_canvas: (2, 3) the frame's cell coordinates -> canvas coordinates, a first guess.
    Returns:
        the refined (2, 3) transform (the guess where fewer than 64 cells are valid).
    """
    ch, cw = grey.shape
    cx, cy = (cw - 1) / 2.0, (ch - 1) / 2.0
    xs, ys = np.meshgrid(np.arange(0, cw, step, dtype=np.float32), np.arange(0, ch, step, dtype=np.float32))
    ny, nx = xs.shape
    px = (xs[None] + _REGISTER_OFFSETS[:, 0, None, None]).reshape(-1, nx)  # (5 ny, nx): the cells, then the neighbours
    py = (ys[None] + _REGISTER_OFFSETS[:, 1, None, None]).reshape(-1, nx)
    x, y = xs - np.float32(cx), ys - np.float32(cy)
    g = grey[::step, ::step]
    for _ in range(iterations):
        a = to_canvas.astype(np.float32)
        s = cv2.remap(
            head,
            a[0, 0] * px + a[0, 1] * py + a[0, 2],
            a[1, 0] * px + a[1, 1] * py + a[1, 2],
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
        ).reshape(5, ny, nx, 2)
        ok = (s[..., 0] > 0.999).all(axis=0)  # the cell and its four neighbours on the valid canvas
        if ok.sum() < 64:
            break
        v = s[..., 1]
        r = (g - v[0])[ok]
        scale = max(4.685 * 1.4826 * float(np.median(np.abs(r))), 8.0)
        w = np.clip(1.0 - (r / scale) ** 2, 0.0, None) ** 2
        gx, gy = 0.5 * (v[1] - v[2])[ok], 0.5 * (v[3] - v[4])[ok]
        xs_, ys_ = x[ok], y[ok]
        jac = np.stack([gx, gy, gx * xs_ + gy * ys_, gy * xs_ - gx * ys_])
        jw = jac * w
        try:
            tx, ty, da, db = np.linalg.solve(jw @ jac.T + 1e-6 * np.eye(4), jw @ r)
        except np.linalg.LinAlgError:
            break
        to_canvas = then(
            np.array([[1 + da, -db, tx - da * cx + db * cy], [db, 1 + da, ty - db * cx - da * cy]]), to_canvas
        )
    return to_canvas


def rebase(state: VideoState, gray: np.ndarray, cells: dict[str, np.ndarray], x0: np.ndarray) -> None:
    """Motion compensation starts again from a keyframe: its cells fill the canvas (margin empty), the camera is
    the identity, its tile maps and label tensors become the anchor of the groups moved whole."""
    layout = state.layout
    m = layout.canvas_margin
    ch, cw = layout.cell_coverage.shape
    layout.raw, start = {}, 0
    for g in layout.moving_local:
        layout.raw[g] = (start, start + cells[g].shape[-1])
        start += cells[g].shape[-1]
    head = np.zeros((ch + 2 * m, cw + 2 * m, 2), np.float32)
    head[m : m + ch, m : m + cw, 0] = 1.0
    head[m : m + ch, m : m + cw, 1] = grey_cells(gray, layout.cell)
    raw = np.zeros((ch + 2 * m, cw + 2 * m, start), np.float32)
    for g, (a, b) in layout.raw.items():
        raw[m : m + ch, m : m + cw, a:b] = cells[g]
    state._canvas, state._camera = (head, raw), np.eye(2, 3)
    state._anchor = {
        "warp": x0[..., layout.moving_warp].copy(),
        "nearest": x0[..., layout.moving_nearest].copy(),
        "tensors": dict(state._tensors),
    }


def encode_moving(
    state: VideoState,
    rgb: np.ndarray,
    gray: np.ndarray,
    grey: np.ndarray,
    motion: np.ndarray,
    prev_gray: np.ndarray,
    temporal: np.ndarray,
    timings: dict[str, float],
) -> tuple[float, float, int] | None:
    """A motion-compensated update (see the module docstring): read the canvas where the camera now looks, re-encode
    the tiles whose grey residual exceeds the threshold (largest first, within ``reencode_budget``) from crops of
    the frame and write them back to the canvas, recompute the per-frame groups, rebuild the mips.  Returns
    ``(changed share, re-encoded share, crops)``, or ``None`` when more than ``full_frame_share`` of the tiles is
    over the threshold (the frame is then encoded from scratch, a keyframe)."""
    t = time.perf_counter()
    cfg, ecfg, layout = state.config, state.encode_config, state.layout
    p = ecfg.patch_size
    h, w = rgb.shape[:2]
    grid, cell, q, m = layout.grid, layout.cell, layout.per_tile, layout.canvas_margin
    ch, cw = layout.cell_coverage.shape
    # where the frame lies on the canvas: last frame's place moved by the flow, then registered
    shift = np.array([[1.0, 0, m], [0, 1.0, m]])  # keyframe cells -> canvas
    before = _required(state._camera)
    guess = then(cv2.invertAffineTransform(regrid(then(before, motion), p, cell)), shift)
    grey = grey.astype(np.float32)
    canvas = _required(state._canvas)
    head, raw = canvas
    to_canvas = register(head, grey, guess)
    camera = regrid(then(shift, cv2.invertAffineTransform(to_canvas)), cell, p)  # keyframe -> frame, tiles
    motion = then(cv2.invertAffineTransform(before), camera)  # last frame -> this one
    look: dict[str, Any] = dict(
        dsize=(cw, ch), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_CONSTANT
    )
    seen = cv2.warpAffine(head, to_canvas, **look)
    cells = cv2.warpAffine(raw, to_canvas, **look).reshape(ch, cw, -1)
    # the canvas is zero where it is not valid, so sampled values are premultiplied by their validity: tile means
    # over the valid part are ratios of tile means
    seen[..., 1] = np.abs(grey * seen[..., 0] - seen[..., 1])
    validity, residual = np.moveaxis(cells_to_tiles(seen, layout.cell_coverage, q), -1, 0)
    covered = np.maximum(validity, 1e-6)
    residual /= covered
    tiles = cells_to_tiles(cells, layout.cell_coverage, q) / covered[..., None]
    uncovered = validity < 0.5  # most of the tile is new to the picture (the camera uncovered it)
    residual[uncovered] = np.inf
    timings["warp"] = (time.perf_counter() - t) * 1000.0

    t = time.perf_counter()
    over = residual > cfg.threshold
    n, n_over = over.size, int(over.sum())
    if n_over > cfg.full_frame_share * n:
        return None
    rects, state._picked = _budget_rects(
        residual, n_over, layout.moving_margin, (h, w), p, cfg.reencode_budget, state._picked
    )
    timings["plan"] = (time.perf_counter() - t) * 1000.0

    t = time.perf_counter()
    done, blocks = np.zeros(grid, bool), []
    for rect in rects:  # every tile of a rectangle is re-encoded: its crop computes them all anyway
        (py0, px0, py1, px1), (cy0, cx0, cy1, cx1) = crop_box(rect, layout.moving_margin, p, (h, w))
        ctx = EncodeContext(rgb[cy0:cy1, cx0:cx1], ecfg)
        v0, u0, v1, u1 = py0 // cell, px0 // cell, -(-py1 // cell), -(-px1 // cell)
        for g in layout.moving_local:
            a, b = layout.raw[g]
            pixels = _pixels(get_group(g))(ctx)[py0 - cy0 : py1 - cy0, px0 - cx0 : px1 - cx0]
            cells[v0:v1, u0:u1, a:b] = ops.tile_mean(pixels, cell).reshape(v1 - v0, u1 - u0, b - a)
        r0, c0, r1, c1 = rect
        tiles[r0:r1, c0:c1] = cells_to_tiles(cells[v0:v1, u0:u1], layout.cell_coverage[v0:v1, u0:u1], q)
        done[r0:r1, c0:c1] = True
        blocks.append((v0, u0, v1, u1))
    for block in blocks:  # after every crop: rectangles may overlap
        _write_back(canvas, grey, cells, block, to_canvas)
    timings["local"] = (time.perf_counter() - t) * 1000.0

    t = time.perf_counter()
    x0 = state._means[0].copy()
    stale = uncovered & ~done  # mostly new to the picture and over the budget: last frame's values, moved
    last = move_tiles(x0, motion) if stale.any() else None
    np.nan_to_num(tiles, copy=False)
    for g in layout.moving_local:
        a, b = layout.raw[g]
        ga, gb = layout.groups[g]
        group = get_group(g)
        val = tiles[..., a:b]
        x0[..., ga:gb] = val if group.finish is None else group.finish(val, p)
        if last is not None:
            x0[..., ga:gb][stale] = last[..., ga:gb][stale]
    np.clip(x0, 0.0, 1.0, out=x0)  # the other channels are in [0, 1] already: one call clips the groups above
    if len(layout.moving_warp):
        x0[..., layout.moving_warp] = move_tiles(state._anchor["warp"], camera)
    if len(layout.moving_nearest):
        x0[..., layout.moving_nearest] = move_tiles(state._anchor["nearest"], camera, nearest=True)
        for k, v in state._anchor["tensors"].items():  # label maps on the tile grid (superpixel ids) move too
            if tuple(v.shape) == grid:
                state._tensors[k] = torch.from_numpy(move_tiles(v.numpy(), camera, nearest=True))
    if layout.moving_frame:
        ctx = EncodeContext(rgb, ecfg, frame={"previous_gray": prev_gray})
        ctx.gray = gray
        out, _, _, _ = run_groups(ctx, layout.moving_frame)
        for (a, b), src in _split_channels(out, [layout.groups[g] for g in layout.moving_frame]):
            x0[..., a:b] = src
        state._tensors.update(_torch_tensors(ctx))
    timings["global"] = (time.perf_counter() - t) * 1000.0

    t = time.perf_counter()
    a, b = layout.temporal
    x0[..., a:b] = temporal
    state._means, state._maxes, _ = ops.build_mips(x0, layout.coverage[0], len(layout.coverage))
    state._camera, state._ref, state._ref_gray = camera, rgb, gray
    timings["mips"] = (time.perf_counter() - t) * 1000.0
    return n_over / n, float(done.mean()), len(rects)


def _budget_rects(
    residual: np.ndarray, n_over: int, margin: int, shape: tuple[int, int], patch: int, budget: float, guess: int = 0
) -> tuple[list[tuple[int, int, int, int]], int]:
    """Crops for the tiles over the threshold, largest residual first, as many as fit in ``budget`` (a share of
    the frame's pixels, margins included).  The number of tiles is searched in at most three covers, starting from
    ``guess`` (the last frame's number: consecutive frames need about as many crops), each next guess scaled by
    budget / cost (a cover's cost grows about linearly with its tiles) within the bracket found so far; the
    largest cover that fits is kept.  Returns ``(rectangles, tiles picked)``."""
    if n_over == 0 or budget <= 0:
        return [], guess
    h, w = shape
    order = np.argsort(residual.ravel())[::-1][:n_over]
    limit = budget * h * w
    if guess <= 0:  # first guess: isolated 2x2 blocks
        guess = int(4 * limit / (2 * patch + 2 * margin) ** 2)
    k = int(np.clip(guess, 1, n_over))
    fits, rects_fit, too_many = 0, [], n_over + 1
    for _ in range(3):
        pick = np.zeros(residual.size, bool)
        pick[order[:k]] = True
        rects = cover_tiles(pick.reshape(residual.shape), margin / patch)
        cost = sum(
            (cy1 - cy0) * (cx1 - cx0) for _, (cy0, cx0, cy1, cx1) in (crop_box(r, margin, patch, shape) for r in rects)
        )
        if cost <= limit:
            fits, rects_fit = k, rects
        else:
            too_many = k
        k = int(np.clip(k * limit / max(cost, 1), fits + 1, too_many - 1))
        if k >= too_many or k <= fits:
            break
    return rects_fit, fits or max(too_many // 2, 1)


def canvas_generators(
    layout: _Layout, cells: dict[str, np.ndarray]
) -> dict[str, Callable[[EncodeContext], np.ndarray | None]]:
    """Generators for a keyframe's encode that also keep the cell means of the moving-local groups' pixel maps (in
    ``cells``), for :func:`rebase` to put on the canvas."""
    return {g: _cell_generator(get_group(g), layout, cells) for g in layout.moving_local}


def _pixels(group: ChannelGroup) -> Callable[[EncodeContext], np.ndarray]:
    """The pixel map of a moving-local group (``_Layout.build`` makes a group moving-local only if it has one)."""
    assert group.pixels is not None, group.name
    return group.pixels


def _cell_generator(
    group: ChannelGroup, layout: _Layout, store: dict[str, np.ndarray]
) -> Callable[[EncodeContext], np.ndarray]:
    """A generator for a group with a pixel map that also keeps the map's cell means (in ``store``); its tiles are the
    cells' means, the tile means of the map (see :func:`cells_to_tiles`)."""

    def generator(ctx: EncodeContext) -> np.ndarray:
        cells = ops.tile_mean(_pixels(group)(ctx), layout.cell)
        cells = store[group.name] = cells.reshape(cells.shape[:2] + (-1,))
        tiles = cells_to_tiles(cells, layout.cell_coverage, layout.per_tile)
        return tiles if group.finish is None else group.finish(tiles, ctx.patch)

    return generator


def _write_back(
    canvas: tuple[np.ndarray, np.ndarray],
    grey: np.ndarray,
    cells: np.ndarray,
    block: tuple[int, int, int, int],
    to_canvas: np.ndarray,
) -> None:
    """Write a block of re-encoded cells (v0, u0, v1, u1) and their grey levels into the canvas where the camera sees
    them: one bilinear resample over the canvas region they cover, in place; the region becomes valid."""
    head, raw = canvas
    v0, u0, v1, u1 = block
    corners = np.array([[u0, v0, 1], [u1, v0, 1], [u0, v1, 1], [u1, v1, 1]], np.float64) - [0.5, 0.5, 0]
    at = corners @ to_canvas.T
    hc, wc = head.shape[:2]
    x0, y0 = (max(int(np.floor(at[:, i].min())) - 1, 0) for i in (0, 1))
    x1, y1 = min(int(np.ceil(at[:, 0].max())) + 2, wc), min(int(np.ceil(at[:, 1].max())) + 2, hc)
    if x1 <= x0 or y1 <= y0:
        return
    # canvas region -> canvas -> frame cells -> the block
    to_block = then(
        then(np.array([[1.0, 0, x0], [0, 1.0, y0]]), cv2.invertAffineTransform(to_canvas)),
        np.array([[1.0, 0, -u0], [0, 1.0, -v0]]),
    )
    look: dict[str, Any] = dict(
        M=to_block,
        dsize=(x1 - x0, y1 - y0),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT,
    )
    fresh = np.dstack([np.ones((v1 - v0, u1 - u0), np.float32), grey[v0:v1, u0:u1], cells[v0:v1, u0:u1]])
    # float32 as ``fresh`` (OpenCV's stubs: any number); outside the block: 0, so samples near its edge are divided by
    # their weight
    back = cast(F32, cv2.warpAffine(fresh, **look))
    put = back[..., 0] > 0.5
    values = back[put]
    values[:, 1:] /= values[:, :1]
    values[:, 0] = 1.0
    head[y0:y1, x0:x1][put] = values[:, :2]
    raw[y0:y1, x0:x1][put] = values[:, 2:]


def _camera_stats(motion: np.ndarray, grid: tuple[int, int], patch: int) -> dict[str, float]:
    """A tile-grid similarity transform as ``dx``, ``dy`` (px, at the grid's centre), ``scale``, ``rotation``
    (degrees)."""
    gh, gw = grid
    c = np.array([(gw - 1) / 2.0, (gh - 1) / 2.0])
    dx, dy = (motion[:, :2] @ c + motion[:, 2] - c) * patch
    return {
        "dx": float(dx),
        "dy": float(dy),
        "scale": float(math.sqrt(abs(np.linalg.det(motion[:, :2])))),
        "rotation": float(math.degrees(math.atan2(motion[1, 0], motion[0, 0]))),
    }
