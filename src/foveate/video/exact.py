"""The exact incremental update: re-encode only the tiles that changed, from crops, so that the texture stays
exactly the encode of the session's reference:

1. **Change detection** on the level-0 grid: the mean absolute difference of each tile against the *reference* --
   the pixels the texture currently encodes -- in grey levels (0-255, averaged over the tile's pixels and RGB).
   Tiles above ``change_threshold`` are *changed* and their pixels are copied into the reference; with threshold
   0 a tile with any different pixel is changed, so the reference is the frame.
2. **Incremental update** (each channel group's rule: ``foveate.video.config``): local groups are recomputed on
   crops around the changed tiles plus the margin their filters read, global groups on the whole reference when any
   tile changed, the mean/max mips only along the changed paths.  Invariant (tested, for any threshold): the texture
   equals ``encode_array(state.reference, frame=state.encode_inputs())`` -- with threshold 0, the frame encoded from
   scratch.  A static clip re-encodes nothing after its first frame.
3. A **full refresh** (keyframe) every ``keyframe_interval`` frames: the update runs with threshold 0, so the
   texture becomes exactly the frame's from-scratch encode (tiles that never drifted cost nothing: a static clip
   re-encodes nothing, ever).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import cv2
import numpy as np

from ..channels.base import EncodeContext
from ..channels.registry import run_groups
from ..core import ops
from .state import _required, _torch_tensors
from .tiles import _indices, _split_channels, dilate_tiles, plan_crops, update_mips

if TYPE_CHECKING:
    from .state import VideoState


#: per local group bucket: its groups, their channel slices and the crops (``plan_crops``) that recompute them
Plans = list[tuple[tuple[str, ...], list[tuple[int, int]], list[tuple[tuple[int, int, int, int], np.ndarray | None]]]]


def plan_updates(state: VideoState, changed: np.ndarray) -> Plans | None:
    """Crops per local group bucket: ``[(groups, slices, plan_crops(...)), ...]``, or ``None`` when a bucket
    would recompute the whole frame (then encoding the frame from scratch costs no more)."""
    layout, cfg = state.layout, state.config
    plans: Plans = []
    for k, names, reads_prev in layout.local:
        todo = changed | state._changed if reads_prev else changed
        if not todo.any():
            continue
        plan = plan_crops(dilate_tiles(todo, k) if cfg.refresh_neighbours else todo, k, cfg.full_frame_share)
        if plan[0][1] is None:
            return None
        plans.append((names, [layout.groups[n] for n in names], plan))
    return plans


def encode_changed(
    state: VideoState,
    rgb: np.ndarray,
    changed: np.ndarray,
    plans: Plans,
    prev_gray: np.ndarray,
    temporal: np.ndarray,
    timings: dict[str, float],
) -> tuple[float, int]:
    """Re-encode the changed tiles along ``plans`` (see the module docstring and the groups' update rules)."""
    t = time.perf_counter()
    ecfg, layout = state.encode_config, state.layout
    p = ecfg.patch_size
    h, w = rgb.shape[:2]
    gh, gw = layout.grid
    ref = _required(state._ref)
    if changed.any():
        pix = cv2.resize(changed.astype(np.uint8), (gw * p, gh * p), interpolation=cv2.INTER_NEAREST)[:h, :w]
        cv2.copyTo(rgb, pix, ref)
        state._ref_gray = ops.to_gray(ref)
    means0, maxes0 = state._means[0], state._maxes[0]
    updates: list[tuple[np.ndarray, np.ndarray]] = []
    recomputed = np.zeros((gh, gw), bool)
    crops = 0
    for names, slices, plan in plans:
        done = np.zeros((gh, gw), bool)
        for (r0, c0, r1, c1), write in plan:
            assert write is not None  # plan_updates returns None for a whole-frame plan, the one without masks
            y0, x0, y1, x1 = r0 * p, c0 * p, min(r1 * p, h), min(c1 * p, w)
            ctx = EncodeContext(ref[y0:y1, x0:x1], ecfg, frame={"previous_gray": prev_gray[y0:y1, x0:x1]})
            out, _, _, _ = run_groups(ctx, names)
            for (a, b), src in _split_channels(out, slices):
                means0[r0:r1, c0:c1, a:b][write] = src[write]
                maxes0[r0:r1, c0:c1, a:b][write] = src[write]
            done[r0:r1, c0:c1] |= write
            crops += 1
        updates.append((_indices(slices), done))
        recomputed |= done
    timings["local"] = (time.perf_counter() - t) * 1000.0

    t = time.perf_counter()
    everywhere = [layout.temporal]  # channels that changed on the whole grid
    if changed.any() and layout.global_groups:
        ctx = EncodeContext(ref, ecfg, frame={"previous_gray": prev_gray})
        # made just above, from ``ref`` (a cached_property: the attribute is its cache)
        ctx.gray = _required(state._ref_gray)
        out, _, _, _ = run_groups(ctx, layout.global_groups)
        slices = [layout.groups[n] for n in layout.global_groups]
        for (a, b), src in _split_channels(out, slices):
            means0[..., a:b] = maxes0[..., a:b] = src
        everywhere.extend(slices)
        state._tensors.update(_torch_tensors(ctx))
    timings["global"] = (time.perf_counter() - t) * 1000.0

    t = time.perf_counter()
    a, b = layout.temporal
    means0[..., a:b] = maxes0[..., a:b] = temporal
    updates.append((_indices(everywhere), np.ones((gh, gw), bool)))
    update_mips(state._means, state._maxes, layout.coverage, updates)
    timings["mips"] = (time.perf_counter() - t) * 1000.0
    return float(recomputed.mean()), crops
