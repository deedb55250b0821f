"""Video: stream frames through a bounded temporal memory, re-encode only what changed, carry relevance forward
with optical flow.  In the style of SAM 2's video predictor: one model, many sessions, a memory bound that is a
parameter, frames streamed one at a time::

    predictor = foveate.VideoPredictor(preset="fast")          # one model ...
    state = predictor.init_state()                               # ... many sessions (a typed VideoState)
    for frame in foveate.read_frames("clip.mp4"):                # decoded one at a time, never all in memory
        stats = predictor.add_frame(state, frame)                # heavy only where the picture changed
        sel = predictor.select(state, "the dog", budget=273)     # light, as for a still image

What ``add_frame`` does depends on the update (``VideoConfig.update``): **exact** change detection (threshold 0,
or ``update="exact"``) or **motion compensation** (the default: any other threshold, ``MOTION_THRESHOLD`` = 8 grey
levels unless set).  Both refresh fully on keyframes and scene cuts and write the temporal channels from the memory.

Exact update:

1. **Change detection** on the level-0 grid: the mean absolute difference of each tile against the *reference* --
   the pixels the texture currently encodes -- in grey levels (0-255, averaged over the tile's pixels and RGB).
   Tiles above ``change_threshold`` are *changed* and their pixels are copied into the reference; with threshold
   0 a tile with any different pixel is changed, so the reference is the frame.
2. **Incremental update** (the rule per channel group is below): local groups are recomputed on crops around the
   changed tiles plus the margin their filters read, global groups on the whole reference when any tile changed,
   the mean/max mips only along the changed paths.  Invariant (tested, for any threshold): the texture equals
   ``encode_array(state.reference, frame=state.encode_inputs())`` -- with threshold 0, the frame encoded from
   scratch.  A static clip re-encodes nothing after its first frame.
3. A **full refresh** (keyframe) every ``keyframe_interval`` frames: the update runs with threshold 0, so the
   texture becomes exactly the frame's from-scratch encode (tiles that never drifted cost nothing: a static clip
   re-encodes nothing, ever).

Motion-compensated update -- for a moving camera, where nearly every tile changes every frame and change detection
re-encodes everything.  Approximate: the texture approximates the frame's own encode (``state.reference`` is the
frame); ``foveate bench-video`` measures how closely.

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

Both: a scene cut (the 64 px grey thumbnail changes by more than ``scene_cut`` grey levels on average) or a frame of
another size (or a :class:`VideoError` with ``on_size_change="error"``) starts a new scene: encoded from scratch,
memory cleared.  **Temporal channels** (group ``temporal``, channels 15-17 of the full layout): the memory -- a FIFO
of the last ``memory`` frames plus the last ``keyframes`` keyframes -- is moved into the new frame by optical flow
(OpenCV DIS, ultrafast preset with finest scale 1, on a grey copy shrunk by an integer factor to at least
``flow_size`` px on the long side -- the maps live on the tile grid; tile maps are splatted forward, so uncovered
background gets no past), then
``prev_relevance`` = max over remembered frames of their relevance (normalised to [0, 1], times
``decay ** (age - 1)``), ``prev_saliency`` = the previous frame's saliency, ``fixations`` = the decayed sum of
the tiles chosen in remembered frames (a token at level l counts 4**-l), normalised to [0, 1].  That is
O(memory) work on tile maps per frame, so O(T) for a clip.  Relevance and fixations belong to a *stream*
(``select(..., stream="main")``): several questions about one video keep separate memories over one encode.

How each channel group is updated (``UPDATE_RULES``; a group not listed is global, recomputed on the whole frame):

============  ================================  ====================  ===========================================
group         exact rule                        with motion           why
============  ================================  ====================  ===========================================
rgb           local, margin 0                   canvas, crops         tile mean of its own pixels
motion        local, margin 0, plus the tiles   every frame           mean |ref_t - ref_(t-1)| per tile; 0 where
              that changed in the last frame                          neither frame changed
edges         local, margin 17 px               canvas, crops         Sobel (1 px), box std (7), centre +
                                                                      surround Gaussians sigma 1.5 and 2.6
                                                                      chained (6 + 11)
frequency     local, margin 20 px               canvas, crops         Gaussians sigma 1 and 3.9 chained (4 + 16)
saliency      global                            every frame           spectral residual of a 64 px thumbnail:
                                                                      every pixel moves every value (0.4 ms at
                                                                      960x540)
distance      global                            canvas, crops with a  Canny's hysteresis and the distance
                                                20 px margin (a cap)  transform reach across the image (~3 ms at
                                                                      960x540)
clusters,     global                            moved (nearest)       SLIC at 128 px: labels move when anything
boundaries                                                            moves (~8 ms at 960x540; not in the
                                                                      ``fast`` preset, the video default)
text,         global                            moved (bilinear)      OCR, an image-text model: a keyframe's work
semantic
position      image size only                   image size only       analytic
temporal      memory                            memory                written from the memory every frame
others        global                            every frame           attention: caller maps, zeros
============  ================================  ====================  ===========================================

A local group with a margin of m px reads pixels up to m px outside a tile, so a changed tile changes the values of
tiles up to k = ceil(m / P) tiles away: those are recomputed too (``refresh_neighbours=False`` skips them: cheaper,
and no longer exact), each from a crop that extends k tiles further (clipped at the image border, where the filters'
own border rule applies exactly as in a full encode).  The margins are OpenCV's kernel half-widths (``ksize =
round(8 sigma + 1) | 1`` for float images); ``tests/test_video.py`` checks that they are enough and that a smaller
one is caught.  With motion compensation only the tiles over the threshold are written, from crops reaching the
groups' margins in pixels: their neighbours keep the prediction.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
import uuid
import warnings
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import cv2
import numpy as np
import torch
from torch import nn

from .core import ops
from .core.channels import EncodeContext, get_group, resolve_groups, run_groups
from .core.config import EncodeConfig, SelectConfig
from .core.device import resolve_device, to_storage
from .core.errors import ConfigError, ImageError, NoImageSetError, VideoError
from .core.io import DEFAULT_MAX_PIXELS, ImageLike, load_image
from .core.texture import Texture
from .query.query import Query
from .query.scorer import Scorer, default_scorer
from .selection import Selection, resolve_select_config
from .selection import select as select_tokens

# ----------------------------------------------------------------------------------------------------------
# Per-group update rules


def gaussian_radius(sigma: float) -> int:
    """Half-width in pixels of the kernel ``cv2.GaussianBlur(x, (0, 0), sigma)`` uses on a float image."""
    return (int(round(sigma * 8 + 1)) | 1) // 2


#: ops.polarity_edges: Sobel 3x3, a 15 px box window, centre sigma 1.5 then surround sigma sqrt(3^2 - 1.5^2)
EDGES_MARGIN = max(1, 15 // 2, gaussian_radius(1.5) + gaussian_radius(math.sqrt(3.0**2 - 1.5**2)))
#: ops.band_energy: fine sigma 1, then coarse sigma sqrt(4^2 - 1^2) applied to the fine image
FREQUENCY_MARGIN = gaussian_radius(1.0) + gaussian_radius(math.sqrt(4.0**2 - 1.0**2))
#: the distance group with motion compensation: a crop sees edges up to this far (a cap, not an exact margin)
DISTANCE_MARGIN = 20

MOTION_KINDS = ("auto", "local", "frame", "warp", "nearest")


@dataclass(frozen=True)
class UpdateRule:
    """How a channel group's level-0 tiles depend on the frame, i.e. what an incremental update recomputes.

    Attributes:
        kind: ``"local"`` (a tile reads pixels within ``margin`` px of it), ``"global"`` (any pixel may move any
            tile: recomputed on the whole reference when a tile changed), ``"size"`` (depends on the image size
            only) or ``"memory"`` (written from the video memory every frame).
        margin: local groups: pixels read beyond the tile's own.
        reads_previous: local groups that also read the previous reference (``ctx.frame["previous_gray"]``).
        motion: how the group follows the picture with motion compensation (an approximate mode): ``"local"``
            (moved with the camera; re-encoded from crops, ``motion_margin`` px wide, where the residual is
            large), ``"frame"`` (recomputed on the whole frame every frame: cheap global groups, the frame
            difference), ``"warp"`` / ``"nearest"`` (moved with the camera, bilinear / nearest-neighbour for labels;
            recomputed on keyframes), or ``"auto"``: local groups ``"local"`` (``"frame"`` if they read the
            previous frame), global groups ``"frame"``.
        motion_margin: pixels a ``"local"`` group's crops reach beyond their tiles with motion compensation
            (``None``: ``margin``).
    """

    kind: str
    margin: int = 0
    reads_previous: bool = False
    motion: str = "auto"
    motion_margin: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("local", "global", "size", "memory"):
            raise ConfigError(f"unknown update rule kind {self.kind!r}; use local, global, size or memory")
        if self.margin < 0 or (self.motion_margin is not None and self.motion_margin < 0):
            raise ConfigError(f"an update rule's margins must be >= 0, got {self.margin}, {self.motion_margin}")
        if self.motion not in MOTION_KINDS:
            raise ConfigError(f"unknown motion rule {self.motion!r}; use {', '.join(MOTION_KINDS)}")

    @property
    def moves(self) -> str:
        """The motion-compensation rule, ``"auto"`` resolved (``"size"`` / ``"memory"`` for those kinds)."""
        if self.kind in ("size", "memory"):
            return self.kind
        if self.motion != "auto":
            return self.motion
        return "local" if self.kind == "local" and not self.reads_previous else "frame"


GLOBAL = UpdateRule("global")

UPDATE_RULES: dict[str, UpdateRule] = {
    "rgb": UpdateRule("local", 0),
    "motion": UpdateRule("local", 0, reads_previous=True),
    "edges": UpdateRule("local", EDGES_MARGIN),
    "frequency": UpdateRule("local", FREQUENCY_MARGIN),
    "saliency": GLOBAL,
    "distance": UpdateRule("global", motion="local", motion_margin=DISTANCE_MARGIN),
    "clusters": UpdateRule("global", motion="nearest"),
    "boundaries": UpdateRule("global", motion="nearest"),
    "text": UpdateRule("global", motion="warp"),
    "semantic": UpdateRule("global", motion="warp"),
    "position": UpdateRule("size"),
    "temporal": UpdateRule("memory"),
}


def register_update_rule(group: str, rule: UpdateRule) -> None:
    """Declare how a (new) channel group updates incrementally.  Groups without a rule are global (exact, and
    recomputed on the whole frame whenever a tile changed)."""
    UPDATE_RULES[group] = rule


def update_rule(group: str) -> UpdateRule:
    return UPDATE_RULES.get(group, GLOBAL)


# ----------------------------------------------------------------------------------------------------------
# Configuration, statistics, session


#: default change thresholds (grey levels): exact change detection against the reference's pixels, and the residual
#: against the motion-compensated canvas (cell means: JPEG noise, sub-pixel blur and parallax stay below it)
EXACT_THRESHOLD = 2.0
MOTION_THRESHOLD = 8.0


@dataclass(frozen=True)
class VideoConfig:
    """How a video session updates its texture and memory.

    Attributes:
        memory: recent frames kept in the FIFO memory (SAM 2's ``num_maskmem=7`` is the frame plus 6 previous).
        keyframes: keyframes kept in memory after they leave the FIFO.
        keyframe_interval: a full refresh every this many frames (1: every frame).
        change_threshold: a tile is re-encoded when its mean absolute difference to the reference exceeds this
            many grey levels; 0 = any change (the texture is then exactly the frame's from-scratch encode).  With
            motion compensation the difference is the residual against the motion-compensated canvas, on cells of a
            quarter tile.  ``None``: the update's default, ``EXACT_THRESHOLD`` or ``MOTION_THRESHOLD``.
        update: ``"exact"`` (change detection: the texture is exactly the encode of the reference), ``"motion"``
            (motion compensation: features move with the camera, only tiles the motion does not explain are
            re-encoded; approximate, for a moving camera) or ``"auto"``: ``"motion"`` unless ``change_threshold``
            is 0 or there is no optical flow (``flow_size=None``), then ``"exact"``.
        reencode_budget: with motion compensation, at most this share of the level-0 tiles is re-encoded per
            frame (largest residual first); the rest moves with the camera until a later frame or a keyframe
            refreshes it.
        refresh_neighbours: also recompute tiles within a changed tile's filter margin (exact); ``False`` is
            cheaper and approximate.
        incremental: ``False`` encodes every frame from scratch (the reference path for comparisons).
        scene_cut: mean grey-level difference of consecutive 64 px thumbnails that counts as a cut (``None``: off).
        on_size_change: ``"keyframe"`` (a frame of another size starts a new keyframe, memory cleared) or
            ``"error"`` (raise :class:`VideoError`).
        flow_size: optical flow runs on a grey copy shrunk by an integer factor to at least this many px on the
            long side (``None``: no flow, the memory stays put).
        decay: weight per frame of age of remembered relevance and fixations.
        stability: keep the previous frame's tiles unless a new tile beats one by this margin (in score units,
            log-relevance: 0.5 = 1.65x); 0 = off.
        max_streams: streams (independent query memories) kept; the least recently used is forgotten.
        full_frame_share: when a frame's crops would cover more than this share of the grid (with motion
            compensation: when more than this share of the tiles is over the threshold), the frame is encoded from
            scratch instead (no more expensive, and the whole reference becomes the frame).
    """

    memory: int = 6
    keyframes: int = 2
    keyframe_interval: int = 30
    change_threshold: float | None = None
    update: str = "auto"
    reencode_budget: float = 0.05
    refresh_neighbours: bool = True
    incremental: bool = True
    scene_cut: float | None = 30.0
    on_size_change: str = "keyframe"
    flow_size: int | None = 240
    decay: float = 0.8
    stability: float = 0.0
    max_streams: int = 8
    full_frame_share: float = 0.6

    def __post_init__(self) -> None:
        checks = [
            (isinstance(self.memory, int) and 1 <= self.memory <= 1000, "memory must be an integer in [1, 1000]"),
            (isinstance(self.keyframes, int) and 0 <= self.keyframes <= 1000,
             "keyframes must be an integer in [0, 1000]"),
            (isinstance(self.keyframe_interval, int) and self.keyframe_interval >= 1,
             "keyframe_interval must be a positive integer"),
            (self.change_threshold is None or self.change_threshold >= 0,
             "change_threshold must be >= 0 (grey levels), or None (the update's default)"),
            (self.scene_cut is None or self.scene_cut > 0, "scene_cut must be > 0 grey levels, or None (off)"),
            (self.on_size_change in ("keyframe", "error"), "on_size_change must be 'keyframe' or 'error'"),
            (self.flow_size is None or (isinstance(self.flow_size, int) and self.flow_size >= 16),
             "flow_size must be an integer >= 16, or None (no optical flow)"),
            (0.0 <= self.decay <= 1.0, "decay must be in [0, 1]"),
            (self.stability >= 0, "stability must be >= 0"),
            (isinstance(self.max_streams, int) and self.max_streams >= 1, "max_streams must be >= 1"),
            (0.0 < self.full_frame_share <= 1.0, "full_frame_share must be in (0, 1]"),
            (self.update in ("auto", "exact", "motion"), "update must be 'auto', 'exact' or 'motion'"),
            (self.update != "motion" or self.flow_size is not None,
             "update='motion' needs optical flow: set flow_size (or use update='exact')"),
            (0.0 <= self.reencode_budget <= 1.0, "reencode_budget must be in [0, 1]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @property
    def motion_compensated(self) -> bool:
        """Whether an incremental session updates with motion compensation (see ``update``)."""
        if not self.incremental or self.update == "exact":
            return False
        return self.update == "motion" or (self.change_threshold != 0 and self.flow_size is not None)

    @property
    def threshold(self) -> float:
        """``change_threshold``, or the default of the session's update."""
        if self.change_threshold is not None:
            return self.change_threshold
        return MOTION_THRESHOLD if self.motion_compensated else EXACT_THRESHOLD


#: keyframe reasons that start a new scene: the session forgets its memory (``FrameStats.new_scene``)
NEW_SCENE_REASONS = ("first", "size_change", "scene_cut")


@dataclass
class FrameStats:
    """What ``add_frame`` did for one frame.

    Attributes:
        index: frame number in the session (0-based, skipped frames not counted).
        keyframe: a refresh to the frame's own encode; ``reason`` says why: ``first``, ``interval``, ``scene_cut``,
            ``size_change`` (``full`` marks the frames of an ``incremental=False`` session).
        changed_share: share of level-0 tiles over the change threshold (any change, on an interval keyframe).
        reencoded_share: share of level-0 tiles whose pixel channels were recomputed (changed tiles, their filter
            neighbourhood and crop overhead; 1.0 when the frame was encoded from scratch).
        crops: crops the local groups ran on.
        timings_ms: ``change``, ``flow``, ``memory``, ``plan``, ``warp``, ``local``, ``global``, ``mips``,
            ``texture``, ``total`` (``local`` is the whole channel computation when the frame is encoded from
            scratch; ``warp`` moves the features with the camera).
        camera: with motion compensation, the camera motion since the previous frame as a similarity transform:
            ``dx``, ``dy`` (px, at the image centre), ``scale`` and ``rotation`` (degrees); ``None`` otherwise.
    """

    index: int
    keyframe: bool
    reason: str
    changed_share: float
    reencoded_share: float
    crops: int
    timings_ms: dict[str, float] = field(default_factory=dict)
    camera: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"frame": self.index, "keyframe": self.keyframe, "reason": self.reason,
               "changed_share": round(self.changed_share, 5), "reencoded_share": round(self.reencoded_share, 5),
               "crops": self.crops, "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()}}
        if self.camera is not None:
            out["camera"] = {k: round(v, 4) for k, v in self.camera.items()}
        return out

    @property
    def new_scene(self) -> bool:
        """The frame started a new scene (``reason`` in :data:`NEW_SCENE_REASONS`): nothing remembered carried over."""
        return self.reason in NEW_SCENE_REASONS


@dataclass
class _Record:
    """One remembered frame: tile maps (gh, gw) in the coordinates of the newest frame (moved on every frame)."""

    index: int
    saliency: np.ndarray | None  # only the newest record's is read (and kept up to date)
    relevance: dict[str, np.ndarray] = field(default_factory=dict)
    fixations: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class _StreamMemory:
    """The last selection of a stream, for selection stability."""

    frame: int
    mode: str
    levels: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    gist: np.ndarray


@dataclass
class _Layout:
    """Channel layout and update plan of a session (fixed per encode config and frame size)."""

    shape: tuple[int, int]
    grid: tuple[int, int]
    channels: tuple[str, ...]
    groups: dict[str, tuple[int, int]]
    absent: tuple[str, ...]  # known after the first encode
    coverage: list[np.ndarray]
    coverage_t: list[torch.Tensor]
    local: list[tuple[int, tuple[str, ...], bool]]  # (tile margin k, groups, reads previous), by k
    global_groups: tuple[str, ...]
    temporal: tuple[int, int]  # always present: VideoPredictor adds the group
    # motion compensation (UpdateRule.moves): groups kept as cell means of their pixel maps on the canvas and
    # re-encoded from crops (a "local" group needs ChannelGroup.pixels and must not read the previous frame, else it
    # is recomputed on the whole frame), the crops' margin (px, the largest of theirs); groups recomputed on the whole
    # frame; channels moved from the keyframe's tile maps, bilinear and nearest-neighbour
    moving_local: tuple[str, ...]
    moving_margin: int
    moving_frame: tuple[str, ...]
    moving_warp: np.ndarray
    moving_nearest: np.ndarray
    cell: int  # cell size in px, per_tile cells per tile side
    per_tile: int
    cell_coverage: np.ndarray  # (ch, cw)
    canvas_margin: int  # cells around the keyframe's on the canvas, for what the camera uncovers
    raw: dict[str, tuple[int, int]] = field(default_factory=dict)  # canvas channels per moving-local group

    @classmethod
    def build(cls, config: EncodeConfig, shape: tuple[int, int], device: torch.device) -> _Layout:
        groups, start = {}, 0
        buckets: dict[int, list[str]] = {}
        global_groups = []
        moving: dict[str, list[str]] = {"local": [], "frame": [], "warp": [], "nearest": []}
        for name in resolve_groups(config):
            group = get_group(name)
            groups[name] = (start, start + len(group.channels))
            start += len(group.channels)
            rule = update_rule(name)
            if rule.kind == "local":
                buckets.setdefault(-(-rule.margin // config.patch_size), []).append(name)
            elif rule.kind == "global":
                global_groups.append(name)
            moves = rule.moves
            if moves == "local" and (group.pixels is None or rule.reads_previous):
                moves = "frame"
            if moves in moving:
                moving[moves].append(name)
        local = [(k, tuple(names), any(update_rule(n).reads_previous for n in names))
                 for k, names in sorted(buckets.items())]
        h, w = shape
        p = config.patch_size
        gh, gw = ops.grid_shape(h, w, p)
        _, _, coverage = ops.build_mips(np.zeros((gh, gw, 0), np.float32), ops.coverage0(h, w, p),
                                        ops.num_levels(gh, gw, config.max_levels))
        cell = cell_size(p)
        margins = [update_rule(n).margin if update_rule(n).motion_margin is None else update_rule(n).motion_margin
                   for n in moving["local"]]
        return cls(shape=shape, grid=(gh, gw), channels=sum((get_group(n).channels for n in groups), ()),
                   groups=groups, absent=(), coverage=coverage,
                   coverage_t=[torch.from_numpy(c).to(device) for c in coverage], local=local,
                   global_groups=tuple(global_groups), temporal=groups["temporal"], moving_local=tuple(moving["local"]),
                   moving_margin=max(margins + [0]), moving_frame=tuple(moving["frame"]),
                   moving_warp=_indices([groups[n] for n in moving["warp"]]),
                   moving_nearest=_indices([groups[n] for n in moving["nearest"]]), cell=cell, per_tile=p // cell,
                   cell_coverage=ops.coverage0(h, w, cell), canvas_margin=-(-max(h, w) // (8 * cell)))


@dataclass
class VideoState:
    """One video session (SAM 2's ``inference_state``, typed).  Create with :meth:`VideoPredictor.init_state`;
    pass it back to ``add_frame`` and ``select``.  Everything it holds is bounded: the current frame, its reference
    and texture, ``memory + keyframes`` records of tile maps, ``max_streams`` streams."""

    config: VideoConfig
    encode_config: EncodeConfig
    device: torch.device
    session: str
    frames: int = 0
    texture: Texture | None = None
    last_stats: FrameStats | None = None
    _layout: _Layout | None = field(default=None, repr=False)
    _ref: np.ndarray | None = field(default=None, repr=False)
    _ref_gray: np.ndarray | None = field(default=None, repr=False)
    _prev_gray: np.ndarray | None = field(default=None, repr=False)
    _means: list[np.ndarray] = field(default_factory=list, repr=False)
    _maxes: list[np.ndarray] = field(default_factory=list, repr=False)
    _tensors: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)
    _changed: np.ndarray | None = field(default=None, repr=False)
    _small: tuple[np.ndarray, int] | None = field(default=None, repr=False)  # (grey copy for flow, factor)
    # motion compensation: the canvas, cells of the keyframe's grid plus a margin (head: validity, grey level; cells:
    # the cell means of the moving-local groups' pixel maps), the camera (keyframe -> current, tile coordinates), the
    # keyframe's tile maps of the groups moved whole ("warp", "nearest") and its label tensors
    _canvas: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _camera: np.ndarray | None = field(default=None, repr=False)
    _anchor: dict[str, Any] = field(default_factory=dict, repr=False)
    _thumb: np.ndarray | None = field(default=None, repr=False)
    _last_key: int = field(default=0, repr=False)
    _picked: int = field(default=0, repr=False)  # tiles the last motion-compensated frame re-encoded: the next guess
    _memory: deque = field(default_factory=deque, repr=False)
    _keyframes: deque = field(default_factory=deque, repr=False)
    _streams: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _installed: str = field(default="main", repr=False)
    _flow: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._memory = deque(maxlen=self.config.memory)
        self._keyframes = deque(maxlen=self.config.keyframes)

    @property
    def index(self) -> int:
        """Index of the current frame (-1 before the first)."""
        return self.frames - 1

    @property
    def reference(self) -> np.ndarray:
        """(H, W, 3) uint8: the pixels the texture encodes -- the current frame where a tile changed by more than
        the threshold, the last encoded pixels elsewhere (the frame itself with threshold 0).  With motion
        compensation, the frame: the texture approximates its encode."""
        self._require_frame()
        return self._ref

    def encode_inputs(self) -> dict[str, np.ndarray]:
        """The temporal inputs of the current texture, as ``encode_array(..., frame=...)`` takes them:
        ``encode_array(state.reference, state.encode_config, frame=state.encode_inputs())`` reproduces it (exact
        update) or encodes what it approximates (motion compensation)."""
        self._require_frame()
        return _frame_inputs(self.temporal, self._prev_gray)

    @property
    def temporal(self) -> np.ndarray:
        """(gh, gw, 3) float32: prev_relevance, prev_saliency, fixations of the stream last selected."""
        self._require_frame()
        a, b = self._layout.temporal
        return self._means[0][..., a:b].copy()

    @property
    def memory_frames(self) -> list[int]:
        """Frame indices held in memory (FIFO and keyframes), oldest first."""
        return sorted(r.index for r in self._records())

    @property
    def streams(self) -> list[str]:
        return list(self._streams)

    def _require_frame(self) -> None:
        if self.texture is None:
            raise NoImageSetError("no frame yet: call add_frame(state, frame) before select()")

    def _records(self) -> list[_Record]:
        """Remembered frames, FIFO and keyframes, each once."""
        seen, out = set(), []
        for r in list(self._memory) + list(self._keyframes):
            if id(r) not in seen:
                seen.add(id(r))
                out.append(r)
        return out

    def _forget(self) -> None:
        """A new scene: nothing remembered carries over."""
        self._memory.clear()
        self._keyframes.clear()
        self._streams.clear()
        self._installed = "main"


@dataclass
class VideoResult:
    """One frame of :meth:`VideoPredictor.propagate`: where it came from, what was re-encoded, what was chosen."""

    index: int
    source_index: int
    name: str
    stats: FrameStats
    selection: Selection
    kept_share: float | None  # share of this frame's tokens also chosen on the previous frame (None: first)


# ----------------------------------------------------------------------------------------------------------
# Pure helpers on the tile grid


#: mean absolute difference per level-0 tile of two frames, grey levels over pixels and RGB (:func:`ops.tile_abs_diff`)
tile_change = ops.tile_abs_diff


def dilate_tiles(mask: np.ndarray, k: int) -> np.ndarray:
    """Tiles within k tiles (Chebyshev distance) of a ``True`` tile.  (gh, gw) bool -> (gh, gw) bool."""
    if k <= 0 or not mask.any():
        return mask.copy()
    return cv2.dilate(mask.astype(np.uint8), np.ones((2 * k + 1, 2 * k + 1), np.uint8)) > 0


def plan_crops(update: np.ndarray, k: int, full_share: float = 1.0
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


def update_mips(means: list[np.ndarray], maxes: list[np.ndarray], covs: list[np.ndarray],
                updates: list[tuple[np.ndarray, np.ndarray]]) -> None:
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
        for lvl in range(len(means) - 1):
            gh, gw = mask.shape
            h2, w2 = -(-gh // 2), -(-gw // 2)
            padded = np.zeros((2 * h2, 2 * w2), bool)
            padded[:gh, :gw] = mask
            mask = padded.reshape(h2, 2, w2, 2).any(axis=(1, 3))
            bands = _bands(mask)
            per_level.append(bands)
            calls += len(bands)
            work += 4 * len(chans) * sum((r1 - r0) * (c1 - c0) for r0, c0, r1, c1 in bands)
        plans.append((sel, per_level))
    n_chan = means[0].shape[-1]
    whole = [[(0, 0, m.shape[0], m.shape[1])] for m in means[1:]]
    if work + calls * MIP_CALL_COST > 4 * n_chan * sum(m.shape[0] * m.shape[1] for m in means[1:]) + \
            len(whole) * MIP_CALL_COST:
        plans = [(slice(None), whole)]
    for sel, per_level in plans:
        for lvl, bands in enumerate(per_level):
            gh, gw = means[lvl].shape[:2]
            for pr0, pc0, pr1, pc1 in bands:
                r0, c0, r1, c1 = 2 * pr0, 2 * pc0, min(2 * pr1, gh), min(2 * pc1, gw)
                m, x, _ = ops.mip_down(means[lvl][r0:r1, c0:c1][..., sel], maxes[lvl][r0:r1, c0:c1][..., sel],
                                       covs[lvl][r0:r1, c0:c1])
                means[lvl + 1][pr0:pr1, pc0:pc1, sel] = m
                maxes[lvl + 1][pr0:pr1, pc0:pc1, sel] = x


def tile_flow(prev_small: np.ndarray, cur_small: np.ndarray, dis: Any, grid: tuple[int, int], patch: int,
              scale: int) -> tuple[np.ndarray, np.ndarray]:
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
    """Tile maps moved by an affine transform of tile coordinates: each tile samples the maps at its source position (bilinear,
    or nearest-neighbour for labels); a source outside the grid repeats the border.
    (gh, gw[, C]) -> the same shape and dtype (integer labels go through float32, exactly)."""
    gh, gw = maps.shape[:2]
    src = maps.astype(np.float32) if maps.dtype.kind != "f" else maps
    out = cv2.warpAffine(src, motion, (gw, gh), flags=cv2.INTER_NEAREST if nearest else cv2.INTER_LINEAR,
                         borderMode=cv2.BORDER_REPLICATE)
    return out.reshape(maps.shape).astype(maps.dtype, copy=False)


def then(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The 2x3 affine transform ``second`` applied after ``first``."""
    return second[:, :2] @ first + np.hstack([np.zeros((2, 2)), second[:, 2:]])


def regrid(motion: np.ndarray, size: float, new_size: float) -> np.ndarray:
    """A transform between grids of ``size``-px cells, expressed on grids of ``new_size``-px cells (cell c's centre,
    at (c + 1/2) size px, is cell (c + 1/2) size / new_size - 1/2 there)."""
    a = size / new_size
    b = 0.5 * a - 0.5
    m = motion[:, :2]
    return np.hstack([m, (a * motion[:, 2] + b - m.sum(axis=1) * b)[:, None]])


#: where :func:`register` samples the canvas around each cell: the cell, then one cell right, left, down and up
_REGISTER_OFFSETS = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]], np.float32)


def register(head: np.ndarray, grey: np.ndarray, to_canvas: np.ndarray, iterations: int = 1, step: int = 3
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
        s = cv2.remap(head, a[0, 0] * px + a[0, 1] * py + a[0, 2], a[1, 0] * px + a[1, 1] * py + a[1, 2],
                      cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT).reshape(5, ny, nx, 2)
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
        to_canvas = then(np.array([[1 + da, -db, tx - da * cx + db * cy], [db, 1 + da, ty - db * cx - da * cy]]),
                         to_canvas)
    return to_canvas


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
    if coverage.min() == 1.0:  # whole cells: block means, the whole blocks in one call, the leftover row and column apart
        h0, w0 = ch // q, cw // q
        out = np.empty((gh, gw, k), np.float32)
        if h0 and w0:
            out[:h0, :w0] = cv2.resize(cells[: h0 * q, : w0 * q], (w0, h0), interpolation=cv2.INTER_AREA
                                       ).reshape(h0, w0, k)
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
    return means / cv2.resize(coverage, (gw, gh), interpolation=cv2.INTER_AREA)[..., None]


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


def cover_tiles(pick: np.ndarray, margin: float, block: int = 2, call_cost: float = CROP_CALL_TILES
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
    blocks = padded.reshape(bh, block, bw, block).any(axis=(1, 3)).astype(np.uint8)
    n, _, stats, _ = cv2.connectedComponentsWithStats(blocks, connectivity=8)
    if n <= 1:
        return []
    top, left = stats[1:, cv2.CC_STAT_TOP], stats[1:, cv2.CC_STAT_LEFT]
    rects = np.stack([top * block, left * block, np.minimum((top + stats[1:, cv2.CC_STAT_HEIGHT]) * block, gh),
                      np.minimum((left + stats[1:, cv2.CC_STAT_WIDTH]) * block, gw)], axis=1).astype(np.float64)

    def cost(r: np.ndarray) -> np.ndarray:
        return (r[..., 2] - r[..., 0] + 2 * margin) * (r[..., 3] - r[..., 1] + 2 * margin) + call_cost

    while len(rects) > 1:
        merged = np.concatenate([np.minimum(rects[:, None, :2], rects[None, :, :2]),
                                 np.maximum(rects[:, None, 2:], rects[None, :, 2:])], axis=-1)
        c = cost(rects)
        saving = c[:, None] + c[None, :] - cost(merged)
        np.fill_diagonal(saving, -np.inf)
        i, j = np.unravel_index(int(np.argmax(saving)), saving.shape)
        if saving[i, j] <= 0:
            break
        rects[i] = merged[i, j]
        rects = np.delete(rects, j, axis=0)
    return [(int(a), int(b), int(c), int(d)) for a, b, c, d in rects]


def crop_box(rect: tuple[int, int, int, int], margin: int, patch: int, shape: tuple[int, int]
             ) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
    """Pixels of a tile rectangle and of its crop: ``((y0, x0, y1, x1), (cy0, cx0, cy1, cx1))``, the crop reaching
    ``margin`` px further (its origin even, so half-resolution copies align with the frame's), clipped at the image
    border, where the filters' own border rule applies as in a full encode."""
    h, w = shape
    r0, c0, r1, c1 = rect
    y0, x0, y1, x1 = r0 * patch, c0 * patch, min(r1 * patch, h), min(c1 * patch, w)
    return (y0, x0, y1, x1), (max(y0 - margin, 0) & ~1, max(x0 - margin, 0) & ~1, min(y1 + margin, h),
                              min(x1 + margin, w))


def splat_matrix(dest_x: np.ndarray, dest_y: np.ndarray):
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


def warp_tile_maps(splat, maps: list[np.ndarray]) -> list[np.ndarray]:
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


# ----------------------------------------------------------------------------------------------------------
# Selection stability: a scorer that favours last frame's tiles


class _StableScorer(nn.Module):
    """Wraps a scorer: adds ``bonus`` (N_total,) to every tile's score and ``bound_bonus`` to its top-k bound.
    Implements the scorer interface ``select`` uses (``evaluate``, and ``forward``/``bound``/``explain``)."""

    def __init__(self, base: nn.Module, bonus: np.ndarray, bound_bonus: np.ndarray) -> None:
        super().__init__()
        self.base, self.bonus, self.bound_bonus = base, bonus, bound_bonus

    def evaluate(self, feats, qmaps=None, qnames=()):
        score, need, bound = self.base.evaluate(feats, qmaps, qnames)
        return score + self.bonus, need, bound + self.bound_bonus

    def forward(self, feats, qmaps=None, qnames=()):
        score, need = self.base(feats, qmaps, qnames)
        return score + torch.from_numpy(self.bonus).to(score), need

    def bound(self, feats, qmaps=None, qnames=()):
        return self.base.bound(feats, qmaps, qnames) + torch.from_numpy(self.bound_bonus).to(feats)

    def explain(self, feats, qmaps, qnames, rows):
        return self.base.explain(feats, qmaps, qnames, rows)


def _kept_tiles(shapes: list[tuple[int, int]], last: _StreamMemory, mode: str) -> tuple[list, list]:
    """Per level bool maps: the tiles whose choice last frame earns the stability bonus, and those whose top-k
    bound must include it.  top-k keeps level-0 tiles; the quadtree keeps its splits (the leaves' ancestors)."""
    n = len(shapes)
    keep = [np.zeros(s, bool) for s in shapes]
    bound = [np.zeros(s, bool) for s in shapes]
    sel = ~last.gist
    lv, r, c = last.levels[sel], last.rows[sel], last.cols[sel]
    if mode == "topk":
        keep[0][r[lv == 0], c[lv == 0]] = True
        lv, r, c = lv[lv == 0], r[lv == 0], c[lv == 0]
        bound[0] = keep[0].copy()
    for up in range(1, n):
        above = lv < up
        d = (up - lv[above]).astype(np.int64)
        target = bound[up] if mode == "topk" else keep[up]
        target[r[above] >> d, c[above] >> d] = True
        if mode != "topk":
            bound[up] = keep[up]
    return keep, bound


# ----------------------------------------------------------------------------------------------------------
# The predictor


class VideoPredictor:
    """Encodes a video stream incrementally and answers queries per frame; holds no per-video state, so one
    predictor (its configuration and scorer) serves many sessions.

    Args:
        config: encode configuration; the ``temporal`` group is always added.  Default preset: ``fast``.
        video: :class:`VideoConfig` defaults for new sessions.
        select_config: default selection configuration.
        device: where the feature tensors and scoring live (``None``: CUDA if available, else CPU).
        scorer: a custom (e.g. trained) scorer.
        **overrides: fields of :class:`EncodeConfig` (``preset``, ``patch_size``, ...) or :class:`VideoConfig`
            (``memory``, ``change_threshold``, ...).
    """

    def __init__(self, config: EncodeConfig | None = None, video: VideoConfig | None = None,
                 select_config: SelectConfig | None = None, device: str | torch.device | None = None,
                 scorer: Scorer | None = None, **overrides: Any) -> None:
        enc_fields = {f.name for f in dataclasses.fields(EncodeConfig)}
        vid_fields = {f.name for f in dataclasses.fields(VideoConfig)}
        unknown = set(overrides) - enc_fields - vid_fields
        if unknown:
            raise ConfigError(f"unknown option(s) {sorted(unknown)} for VideoPredictor")
        config = config or EncodeConfig(preset="fast")
        config = dataclasses.replace(config, **{k: v for k, v in overrides.items() if k in enc_fields})
        names = resolve_groups(config)
        if "temporal" not in names:
            config = dataclasses.replace(config, groups=names + ("temporal",))
        self.config = config
        self.video = dataclasses.replace(video or VideoConfig(),
                                         **{k: v for k, v in overrides.items() if k in vid_fields})
        self.select_config = select_config or SelectConfig()
        self.device = resolve_device(device)
        self.scorer = scorer.to(self.device) if scorer is not None else None

    def init_state(self, **video_overrides: Any) -> VideoState:
        """A new, empty session; ``video_overrides`` replace fields of this predictor's :class:`VideoConfig`."""
        try:
            cfg = dataclasses.replace(self.video, **video_overrides)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc
        return VideoState(config=cfg, encode_config=self.config, device=self.device, session=uuid.uuid4().hex[:12])

    def reset_state(self, state: VideoState) -> None:
        """Forget every frame of a session (its configuration and id stay)."""
        VideoState.__init__(state, config=state.config, encode_config=state.encode_config, device=state.device,
                            session=state.session)

    # -- add_frame ---------------------------------------------------------------------------------------------
    def add_frame(self, state: VideoState, frame: ImageLike) -> FrameStats:
        """Update the session's texture to ``frame`` (a path, array, PIL image, tensor or :class:`Frame`)."""
        t_start = time.perf_counter()
        rgb = load_image(frame.image if isinstance(frame, Frame) else frame,
                         max_pixels=state.encode_config.max_pixels)
        cfg, ecfg = state.config, state.encode_config
        p = ecfg.patch_size
        idx = state.frames
        h, w = rgb.shape[:2]
        grid = ops.grid_shape(h, w, p)
        timings: dict[str, float] = {}

        t = time.perf_counter()
        moving = cfg.motion_compensated
        gray = ops.to_gray(rgb)
        # a motion-compensated session works on grey cells of a quarter tile: its thumbnail and flow copy come from them
        cells = grey_cells(gray, cell_size(p)) if moving else None
        thumb = _downscale(gray if cells is None else cells, 64)[0].astype(np.float32)
        reason = ""
        if state._ref is None:
            reason = "first"
        elif rgb.shape != state._ref.shape:
            if cfg.on_size_change == "error":
                ph, pw = state._ref.shape[:2]
                raise VideoError(f"frame {idx} is {w}x{h} but the session's frames are {pw}x{ph}; resize the frames, "
                                 "or use on_size_change='keyframe' to start a new keyframe at a size change")
            reason = "size_change"
        elif cfg.scene_cut is not None and float(np.abs(thumb - state._thumb).mean()) > cfg.scene_cut:
            reason = "scene_cut"
        elif idx - state._last_key >= cfg.keyframe_interval:
            reason = "interval"
        new_scene = reason in NEW_SCENE_REASONS
        # change detection against the reference: the exact update's input (moving updates and sessions that encode
        # every frame from scratch do without)
        diff = None if new_scene or moving or not cfg.incremental else tile_change(rgb, state._ref, p)
        changed = np.ones(grid, bool) if diff is None else diff > cfg.threshold
        timings["change"] = (time.perf_counter() - t) * 1000.0

        # the memory: forget it at a new scene, else move it with the picture (its maps stay in the coordinates of
        # the last frame that changed, whose small grey copy is kept for the next flow); the same flow gives the
        # camera motion of a moving update
        t = time.perf_counter()
        shift = None
        if new_scene:
            state._forget()
            state._small = self._flow_copy(gray, cells, cfg.flow_size, p) if cfg.flow_size else None
        elif cfg.flow_size and changed.any():
            small, scale = self._flow_copy(gray, cells, cfg.flow_size, p)
            records = state._records()
            if min(small.shape) >= 16 and (records or moving):
                if state._flow is None:
                    state._flow = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST)
                    state._flow.setFinestScale(1)  # the preset stops at 1/4 of the (already small) copy: too coarse
                dest = tile_flow(state._small[0], small, state._flow, grid, p, scale)
                if records:
                    _warp_memory(records, splat_matrix(*dest))
                if moving:
                    shift = flow_shift(*dest)
            state._small = (small, scale)
        timings["flow"] = (time.perf_counter() - t) * 1000.0
        t = time.perf_counter()
        temporal = self._compose(state, state._installed, idx, grid)
        timings["memory"] = (time.perf_counter() - t) * 1000.0

        prev_gray = None if new_scene else state._ref_gray
        done = None  # (changed share, re-encoded share, crops) of an update; None: encode the frame from scratch
        camera = None
        t = time.perf_counter()
        if new_scene or not cfg.incremental or (moving and reason == "interval"):
            pass
        elif moving:
            before = state._camera
            done = self._encode_moving(state, rgb, gray, cells, np.eye(2, 3) if shift is None else shift, prev_gray,
                                       temporal, timings)
            if done is not None:
                camera = _camera_stats(then(cv2.invertAffineTransform(before), state._camera), grid, p)
        else:
            if reason == "interval":  # a refresh is an update with threshold 0: the texture becomes the frame's own
                changed = diff > 0
            plans = self._plan(state, changed)  # None: the crops would cover the frame anyway
            timings["plan"] = (time.perf_counter() - t) * 1000.0
            if plans is not None:
                done = (float(changed.mean()), *self._encode_changed(state, rgb, changed, plans, prev_gray, temporal,
                                                                      timings))
        timings.setdefault("plan", (time.perf_counter() - t) * 1000.0)
        if done is None:  # from scratch; without a new scene this refreshes the whole reference for free
            done = (float(changed.mean()), *self._encode_full(state, rgb, gray, prev_gray, temporal, timings))
            moved = diff > 0 if diff is not None else np.zeros(grid, bool)
        else:
            moved = changed
        keyframe = bool(reason)
        if keyframe:
            state._last_key = idx
        state._prev_gray = prev_gray
        state._changed = moved  # where the reference moved: motion may be non-zero there until the next frame
        state._thumb = thumb

        t = time.perf_counter()
        layout = state._layout
        sal = _saliency_map(state, layout)
        record = _Record(index=idx, saliency=sal)
        state._memory.append(record)
        if keyframe and cfg.keyframes:
            state._keyframes.append(record)
        state.texture = self._texture(state, rgb, idx)
        state.frames = idx + 1
        timings["texture"] = (time.perf_counter() - t) * 1000.0
        timings["total"] = (time.perf_counter() - t_start) * 1000.0
        stats = FrameStats(index=idx, keyframe=keyframe, reason=reason or ("full" if not cfg.incremental else ""),
                           changed_share=done[0], reencoded_share=done[1], crops=done[2], timings_ms=timings,
                           camera=camera)
        state.texture.timings_ms = dict(timings)
        state.texture.extras["video"] = stats.to_dict()
        state.last_stats = stats
        return stats

    def _encode_full(self, state: VideoState, rgb: np.ndarray, gray: np.ndarray, prev_gray: np.ndarray | None,
                     temporal: np.ndarray, timings: dict[str, float]) -> tuple[float, int]:
        """Encode the frame from scratch: a new scene, ``incremental=False``, or an update whose crops would cover
        the frame anyway (then the whole reference is refreshed to the frame at no extra cost).  With motion
        compensation this is a keyframe: the canvas and the camera start again from this frame."""
        t = time.perf_counter()
        ecfg, moving = state.encode_config, state.config.motion_compensated
        h, w = rgb.shape[:2]
        if state._layout is None or state._layout.shape != (h, w):
            state._layout = _Layout.build(ecfg, (h, w), state.device)
        layout = state._layout
        state._ref = rgb.copy()
        state._ref_gray = gray
        ctx = EncodeContext(state._ref, ecfg, frame=_frame_inputs(temporal, prev_gray))
        ctx.gray = gray  # already made (a cached_property: the attribute is its cache)
        cells: dict[str, np.ndarray] = {}
        generators = {g: _cell_generator(get_group(g), layout, cells) for g in layout.moving_local} if moving else None
        x0, _, _, layout.absent = run_groups(ctx, resolve_groups(ecfg), generators)
        timings["local"] = (time.perf_counter() - t) * 1000.0
        t = time.perf_counter()
        state._means, state._maxes, _ = ops.build_mips(x0, layout.coverage[0], len(layout.coverage))
        state._tensors = _torch_tensors(ctx)
        if moving:
            self._rebase(state, gray, cells, x0)
        timings["mips"] = (time.perf_counter() - t) * 1000.0
        return 1.0, 1

    @staticmethod
    def _rebase(state: VideoState, gray: np.ndarray, cells: dict[str, np.ndarray], x0: np.ndarray) -> None:
        """Motion compensation starts again from a keyframe: its cells fill the canvas (margin empty), the camera is
        the identity, its tile maps and label tensors become the anchor of the groups moved whole."""
        layout = state._layout
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
        state._anchor = {"warp": x0[..., layout.moving_warp].copy(), "nearest": x0[..., layout.moving_nearest].copy(),
                         "tensors": dict(state._tensors)}

    def _plan(self, state: VideoState, changed: np.ndarray) -> list[tuple[tuple[str, ...], list, list]] | None:
        """Crops per local group bucket: ``[(groups, slices, plan_crops(...)), ...]``, or ``None`` when a bucket
        would recompute the whole frame (then encoding the frame from scratch costs no more)."""
        layout, cfg = state._layout, state.config
        plans = []
        for k, names, reads_prev in layout.local:
            todo = changed | state._changed if reads_prev else changed
            if not todo.any():
                continue
            plan = plan_crops(dilate_tiles(todo, k) if cfg.refresh_neighbours else todo, k, cfg.full_frame_share)
            if plan[0][1] is None:
                return None
            plans.append((names, [layout.groups[n] for n in names], plan))
        return plans

    def _encode_changed(self, state: VideoState, rgb: np.ndarray, changed: np.ndarray, plans: list,
                        prev_gray: np.ndarray, temporal: np.ndarray, timings: dict[str, float]) -> tuple[float, int]:
        """Re-encode the changed tiles along ``plans`` (see the module docstring for the rules)."""
        t = time.perf_counter()
        ecfg, layout = state.encode_config, state._layout
        p = ecfg.patch_size
        h, w = rgb.shape[:2]
        gh, gw = layout.grid
        ref = state._ref
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
            ctx.gray = state._ref_gray  # made just above, from ``ref`` (a cached_property: the attribute is its cache)
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

    @staticmethod
    def _flow_copy(gray: np.ndarray, cells: np.ndarray | None, size: int, patch: int) -> tuple[np.ndarray, int]:
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

    def _encode_moving(self, state: VideoState, rgb: np.ndarray, gray: np.ndarray, grey: np.ndarray,
                       motion: np.ndarray, prev_gray: np.ndarray, temporal: np.ndarray, timings: dict[str, float]
                       ) -> tuple[float, float, int] | None:
        """A motion-compensated update (see the module docstring): read the canvas where the camera now looks, re-encode
        the tiles whose grey residual exceeds the threshold (largest first, within ``reencode_budget``) from crops of
        the frame and write them back to the canvas, recompute the per-frame groups, rebuild the mips.  Returns
        ``(changed share, re-encoded share, crops)``, or ``None`` when more than ``full_frame_share`` of the tiles is
        over the threshold (the frame is then encoded from scratch, a keyframe)."""
        t = time.perf_counter()
        cfg, ecfg, layout = state.config, state.encode_config, state._layout
        p = ecfg.patch_size
        h, w = rgb.shape[:2]
        grid, cell, q, m = layout.grid, layout.cell, layout.per_tile, layout.canvas_margin
        ch, cw = layout.cell_coverage.shape
        # where the frame lies on the canvas: last frame's place moved by the flow, then registered
        shift = np.array([[1.0, 0, m], [0, 1.0, m]])  # keyframe cells -> canvas
        guess = then(cv2.invertAffineTransform(regrid(then(state._camera, motion), p, cell)), shift)
        grey = grey.astype(np.float32)
        head, raw = state._canvas
        to_canvas = register(head, grey, guess)
        camera = regrid(then(shift, cv2.invertAffineTransform(to_canvas)), cell, p)  # keyframe -> frame, tiles
        motion = then(cv2.invertAffineTransform(state._camera), camera)  # last frame -> this one
        look = dict(dsize=(cw, ch), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_CONSTANT)
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
        rects, state._picked = self._budget_rects(residual, n_over, layout.moving_margin, (h, w), p,
                                                  cfg.reencode_budget, state._picked)
        timings["plan"] = (time.perf_counter() - t) * 1000.0

        t = time.perf_counter()
        done, blocks = np.zeros(grid, bool), []
        for rect in rects:  # every tile of a rectangle is re-encoded: its crop computes them all anyway
            (y0, x0, y1, x1), (cy0, cx0, cy1, cx1) = crop_box(rect, layout.moving_margin, p, (h, w))
            ctx = EncodeContext(rgb[cy0:cy1, cx0:cx1], ecfg)
            v0, u0, v1, u1 = y0 // cell, x0 // cell, -(-y1 // cell), -(-x1 // cell)
            for g in layout.moving_local:
                a, b = layout.raw[g]
                pixels = get_group(g).pixels(ctx)[y0 - cy0 : y1 - cy0, x0 - cx0 : x1 - cx0]
                cells[v0:v1, u0:u1, a:b] = ops.tile_mean(pixels, cell).reshape(v1 - v0, u1 - u0, b - a)
            r0, c0, r1, c1 = rect
            tiles[r0:r1, c0:c1] = cells_to_tiles(cells[v0:v1, u0:u1], layout.cell_coverage[v0:v1, u0:u1], q)
            done[r0:r1, c0:c1] = True
            blocks.append((v0, u0, v1, u1))
        for block in blocks:  # after every crop: rectangles may overlap
            _write_back(state._canvas, grey, cells, block, to_canvas)
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

    @staticmethod
    def _budget_rects(residual: np.ndarray, n_over: int, margin: int, shape: tuple[int, int], patch: int,
                      budget: float, guess: int = 0) -> tuple[list[tuple[int, int, int, int]], int]:
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
            cost = sum((cy1 - cy0) * (cx1 - cx0) for _, (cy0, cx0, cy1, cx1) in
                       (crop_box(r, margin, patch, shape) for r in rects))
            if cost <= limit:
                fits, rects_fit = k, rects
            else:
                too_many = k
            k = int(np.clip(k * limit / max(cost, 1), fits + 1, too_many - 1))
            if k >= too_many or k <= fits:
                break
        return rects_fit, fits or max(too_many // 2, 1)

    def _texture(self, state: VideoState, rgb: np.ndarray, idx: int) -> Texture:
        """The session's texture for the current frame: features from the masters, tokens cut from the frame.

        Its ``content_hash`` is ``video-<session>-<frame>``: the features depend on the stream's history (temporal
        channels; with a threshold > 0, earlier frames' pixels), so it must never pass for the encode of a still
        image.  ``Texture.save`` works; load such a file with ``verify=False``."""
        layout, dev = state._layout, state.device
        return Texture(
            image=rgb, config=state.encode_config, channels=layout.channels, groups=dict(layout.groups),
            absent=layout.absent,
            mean=to_storage(state._means, dev), max=to_storage(state._maxes, dev),
            coverage=layout.coverage_t, content_hash=f"video-{state.session}-{idx:08d}",
            extras={"video_session": state.session, "frame": idx}, tensors=dict(state._tensors))

    # -- memory --------------------------------------------------------------------------------------------
    def _compose(self, state: VideoState, stream: str, idx: int, grid: tuple[int, int]) -> np.ndarray:
        """(gh, gw, 3) float32 temporal channels for ``stream`` at frame ``idx`` from the records before it."""
        cfg = state.config
        rel = np.zeros(grid, np.float32)
        fix = np.zeros(grid, np.float32)
        sal = np.zeros(grid, np.float32)
        records = [r for r in state._records() if r.index < idx]
        for r in records:
            wgt = np.float32(cfg.decay ** (idx - r.index - 1))
            if stream in r.relevance:
                np.maximum(rel, wgt * r.relevance[stream], out=rel)
            if stream in r.fixations:
                fix += wgt * r.fixations[stream]
        if records:  # the previous frame's saliency: the newest record's (the only one kept)
            newest = max(records, key=lambda r: r.index)
            sal = np.float32(cfg.decay ** (idx - newest.index - 1)) * newest.saliency
        norm = sum(cfg.decay**j for j in range(cfg.memory))
        out = np.dstack([rel, sal, fix / np.float32(norm)])
        return np.clip(np.nan_to_num(out), 0.0, 1.0).astype(np.float32)

    def _install(self, state: VideoState, stream: str) -> None:
        """Write ``stream``'s temporal channels into the current texture (in place) if another stream's are there."""
        if state._installed == stream:
            return
        layout = state._layout
        a, b = layout.temporal
        state._means[0][..., a:b] = state._maxes[0][..., a:b] = self._compose(state, stream, state.index, layout.grid)
        update_mips(state._means, state._maxes, layout.coverage, [(_indices([(a, b)]), np.ones(layout.grid, bool))])
        tex = state.texture
        for lvl in range(tex.num_levels):
            tex.mean[lvl][..., a:b] = torch.from_numpy(state._means[lvl][..., a:b]).to(tex.mean[lvl])
            tex.max[lvl][..., a:b] = torch.from_numpy(state._maxes[lvl][..., a:b]).to(tex.max[lvl])
        tex.invalidate()
        state._installed = stream

    # -- select --------------------------------------------------------------------------------------------
    def select(self, state: VideoState, query: Any = None, budget: int | None = None, *, stream: str = "main",
               **kwargs: Any) -> Selection:
        """Pick tokens for the current frame (see :func:`foveate.select`), and remember them in ``stream``.

        ``stream`` names an independent memory (prev_relevance, fixations, stability) -- SAM 2's object ids; use one
        per question you keep asking about the video.  Other keyword arguments are ``select``'s.
        """
        state._require_frame()
        cfg = resolve_select_config(kwargs.pop("config", None) or self.select_config, budget, kwargs.pop("mode", None),
                                    {k: kwargs.pop(k) for k in list(kwargs) if k in _SELECT_FIELDS})
        self._install(state, stream)
        tex = state.texture
        scorer = kwargs.pop("scorer", None) or self.scorer or default_scorer(tex.channels, tex.device)
        last = state._streams.get(stream)
        kept0 = None
        if state.config.stability > 0 and last is not None and last.frame < state.index and last.mode == cfg.mode:
            keep, bound = _kept_tiles(tex.level_shapes, last, cfg.mode)
            margin = state.config.stability
            flat = lambda maps: (np.concatenate([m.ravel() for m in maps]) * margin).astype(np.float32)  # noqa: E731
            scorer = _StableScorer(scorer, flat(keep), flat(bound))
            kept0 = keep[0]
        sel = select_tokens(tex, query, config=cfg, scorer=scorer, **kwargs)
        # remember: relevance (without the stability bonus) normalised to [0, 1], and where tokens were spent
        rel = sel.relevance - (state.config.stability * kept0 if kept0 is not None else 0.0)
        rel = np.exp(rel - rel.max()).astype(np.float32)
        fix = fixation_map(sel)
        record = state._memory[-1]
        record.relevance[stream], record.fixations[stream] = rel, fix
        state._streams[stream] = _StreamMemory(state.index, cfg.mode, sel.levels, sel.rows, sel.cols, sel.gist)
        state._streams.move_to_end(stream)
        while len(state._streams) > state.config.max_streams:
            old, _ = state._streams.popitem(last=False)
            for r in state._records():
                r.relevance.pop(old, None)
                r.fixations.pop(old, None)
        return sel

    # -- a whole stream ------------------------------------------------------------------------------------
    def propagate(self, state: VideoState, frames: Iterable[Any], query: Any = None, budget: int | None = None, *,
                  prompt_frames: str = "first", stream: str = "main", **kwargs: Any) -> Iterator[VideoResult]:
        """Add each frame and select for it: SAM 2's ``propagate_in_video`` for a stream of frames.

        Args:
            frames: :class:`Frame` objects (e.g. :func:`read_frames`), arrays or paths, consumed one at a time.
            query: text applies to every frame; points and boxes to the first frame only (``prompt_frames="first"``,
                they then live on in the memory's prev_relevance) or to every frame (``"all"``).
        """
        if prompt_frames not in ("first", "all"):
            raise ConfigError("prompt_frames must be 'first' or 'all'")
        q = Query.coerce(query)
        later = q if prompt_frames == "all" else Query(text=q.text)
        prev: Selection | None = None
        for i, item in enumerate(frames):
            stats = self.add_frame(state, item)
            sel = self.select(state, q if i == 0 else later, budget, stream=stream, **kwargs)
            kept = token_overlap(prev, sel) if prev is not None and not stats.new_scene else None
            src = item.index if isinstance(item, Frame) else i
            name = item.name if isinstance(item, Frame) else f"frame {i}"
            yield VideoResult(stats.index, src, name, stats, sel, kept)
            prev = sel


def _warp_memory(records: list[_Record], splat) -> None:
    """Move every remembered tile map that is still read with the picture (one sparse product for all of them): the
    relevance and fixations of every record, the saliency of the newest (the only one :meth:`VideoPredictor._compose`
    reads; older records drop theirs)."""
    slots: list[tuple[_Record, dict | None, str | None]] = []
    maps = []
    newest = max(records, key=lambda r: r.index)
    for r in records:
        if r is newest:
            slots.append((r, None, None))
            maps.append(r.saliency)
        else:
            r.saliency = None
        for d in (r.relevance, r.fixations):
            for k, v in d.items():
                slots.append((r, d, k))
                maps.append(v)
    for (r, d, k), m in zip(slots, warp_tile_maps(splat, maps)):
        if d is None:
            r.saliency = m
        else:
            d[k] = m


def _cell_generator(group, layout: _Layout, store: dict[str, np.ndarray]) -> Callable:
    """A generator for a group with a pixel map that also keeps the map's cell means (in ``store``); its tiles are the
    cells' means, the tile means of the map (see :func:`cells_to_tiles`)."""

    def generator(ctx: EncodeContext) -> np.ndarray:
        cells = ops.tile_mean(group.pixels(ctx), layout.cell)
        cells = store[group.name] = cells.reshape(cells.shape[:2] + (-1,))
        tiles = cells_to_tiles(cells, layout.cell_coverage, layout.per_tile)
        return tiles if group.finish is None else group.finish(tiles, ctx.patch)

    return generator


def _write_back(canvas: tuple[np.ndarray, np.ndarray], grey: np.ndarray, cells: np.ndarray,
                block: tuple[int, int, int, int], to_canvas: np.ndarray) -> None:
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
    to_block = then(then(np.array([[1.0, 0, x0], [0, 1.0, y0]]), cv2.invertAffineTransform(to_canvas)),
                    np.array([[1.0, 0, -u0], [0, 1.0, -v0]]))
    look = dict(M=to_block, dsize=(x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                borderMode=cv2.BORDER_CONSTANT)
    fresh = np.dstack([np.ones((v1 - v0, u1 - u0), np.float32), grey[v0:v1, u0:u1], cells[v0:v1, u0:u1]])
    back = cv2.warpAffine(fresh, **look)  # outside the block: 0, so samples near its edge are divided by their weight
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
    return {"dx": float(dx), "dy": float(dy), "scale": float(math.sqrt(abs(np.linalg.det(motion[:, :2])))),
            "rotation": float(math.degrees(math.atan2(motion[1, 0], motion[0, 0])))}


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


def _torch_tensors(ctx: EncodeContext) -> dict[str, torch.Tensor]:
    """The context's named arrays (``ctx.tensors``) as CPU torch tensors, as the texture stores them."""
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in ctx.tensors.items()}


def _frame_inputs(temporal: np.ndarray, prev_gray: np.ndarray | None) -> dict[str, np.ndarray]:
    """The temporal inputs of an encode (``EncodeContext.frame``): the temporal maps, and the previous frame's grey
    levels when there is one."""
    out = {"temporal": temporal}
    if prev_gray is not None:
        out["previous_gray"] = prev_gray
    return out


_SELECT_FIELDS = {f.name for f in dataclasses.fields(SelectConfig)} - {"budget", "mode"}


def _saliency_map(state: VideoState, layout: _Layout) -> np.ndarray:
    """The current frame's saliency on the tile grid, for the next frame's prev_saliency."""
    if "saliency" in layout.groups:
        a, _ = layout.groups["saliency"]
        return state._means[0][..., a].copy()
    ctx = EncodeContext(state._ref, state.encode_config)
    ctx.gray = state._ref_gray  # the reference's grey levels, kept with it
    return get_group("saliency").generator(ctx)[..., 0]


# ----------------------------------------------------------------------------------------------------------
# Reading frames


IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"}


class FrameSkippedWarning(UserWarning):
    """A frame mid-stream could not be decoded and was skipped."""


@dataclass
class Frame:
    """One decoded frame: its position in the source, a name for reports, the RGB pixels (H, W, 3) uint8."""

    index: int
    name: str
    image: np.ndarray


def _natural_key(name: str) -> list:
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


class FrameReader:
    """The frames of a video file (OpenCV; FFmpeg decodes mp4, webm, ...) or of a folder of images (sorted by name,
    numbers in numeric order), decoded one at a time.  Iterate it to get :class:`Frame` objects.

    Errors (:class:`VideoError`): no such path, an empty folder or one without image files, a single image file,
    a file OpenCV cannot open as a video or that has no decodable frame.  A frame that cannot be decoded
    mid-stream is skipped with a :class:`FrameSkippedWarning`.

    Attributes:
        kind: ``"folder"`` or ``"video"``.  count: frames announced (files, or the container's frame count; may
        be 0 when unknown).  fps: the video's frame rate (``None`` for a folder).
    """

    def __init__(self, source: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        self.path = Path(source)
        self.max_pixels = max_pixels
        self.fps: float | None = None
        self.skipped: list[str] = []  # frames that could not be decoded (each also warned about)
        self._cap = None
        path = self.path
        if not path.exists():
            raise VideoError(f"{path}: no such file or folder")
        if path.is_dir():
            self.kind = "folder"
            self._files = sorted((f for f in path.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES),
                                 key=lambda f: _natural_key(f.name))
            if not self._files:
                raise VideoError(f"{path}: the folder has no image frames ({', '.join(sorted(IMAGE_SUFFIXES))})")
            self.count = len(self._files)
            return
        self.kind = "video"
        if path.suffix.lower() in IMAGE_SUFFIXES:
            raise VideoError(f"{path}: a single image, not a video; use `foveate select` for an image, or pass a "
                             "folder of frames")
        if path.stat().st_size == 0:
            raise VideoError(f"{path}: the file is empty (0 bytes)")
        cap = cv2.VideoCapture(str(path))
        if not cap.isOpened():
            raise VideoError(f"{path}: not a readable video (OpenCV/FFmpeg cannot open it); pass a video file "
                             "(mp4, webm, ...) or a folder of frames")
        ok, first = cap.read()
        if not ok or first is None:
            cap.release()
            raise VideoError(f"{path}: no decodable video frame")
        h, w = first.shape[:2]
        if h * w > max_pixels:
            cap.release()
            raise VideoError(f"{path}: frames of {w}x{h} = {w * h:,} pixels exceed the limit of {max_pixels:,}; "
                             "raise max_pixels (--max-pixels) if you trust the file")
        self._cap, self._first = cap, first
        self.count = max(int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0), 0)
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        self.fps = fps if 0 < fps < 1000 else None

    def __iter__(self) -> Iterator[Frame]:
        if self.kind == "folder":
            for i, f in enumerate(self._files):
                try:
                    image = load_image(f, max_pixels=self.max_pixels)
                except ImageError as exc:
                    self._skip(f.name, f"{_first_line(exc)}; frame skipped")
                    continue
                yield Frame(i, f.name, image)
            return
        cap, first = self._cap, self._first
        if cap is None:
            raise VideoError(f"{self.path}: the reader was closed or already consumed; open a new FrameReader")
        self._cap = self._first = None
        try:
            yield Frame(0, "frame 0", cv2.cvtColor(first, cv2.COLOR_BGR2RGB))
            i, missed = 1, []
            while True:
                ok, bgr = cap.read()
                if not ok or bgr is None:
                    if self.count and i < self.count and len(missed) < 8:
                        missed.append(i)  # maybe a corrupt frame: try the next ones before calling it the end
                        i += 1
                        continue
                    if missed:
                        warnings.warn(f"{self.path.name}: the video ended at frame {missed[0]} of the {self.count} its "
                                      "header announces (truncated?)", FrameSkippedWarning, stacklevel=2)
                    break
                for j in missed:
                    self._skip(f"frame {j}", f"{self.path.name}: frame {j} could not be decoded; frame skipped")
                missed = []
                yield Frame(i, f"frame {i}", cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
                i += 1
        finally:
            cap.release()

    def _skip(self, name: str, message: str) -> None:
        self.skipped.append(name)
        warnings.warn(message, FrameSkippedWarning, stacklevel=3)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = self._first = None


def read_frames(source: str | Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> FrameReader:
    """Frames of a video file or a folder of images, one at a time (see :class:`FrameReader`)."""
    return FrameReader(source, max_pixels=max_pixels)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


# ----------------------------------------------------------------------------------------------------------
# The ``foveate video`` command's work: stream a source, write selections, statistics and an overlay video


@dataclass
class VideoSummary:
    frames: int
    skipped: int
    keyframes: int
    changed_share: float
    reencoded_share: float
    add_ms_median: float
    select_ms_median: float
    kept_share: float | None
    outputs: dict[str, str]
    notes: list[str] = field(default_factory=list)  # distinct selection notes (e.g. "query text not used")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_video(source: str | Path, query: Any, output: str | Path, *, predictor: VideoPredictor,
              budget: int | None = None, prompt_frames: str = "first", overlay: bool = True,
              max_frames: int | None = None, fps: float | None = None,
              on_frame: Callable[[VideoResult], None] | None = None, **select_kwargs: Any) -> VideoSummary:
    """Stream ``source`` through a new session and write ``selections.jsonl`` (one selection document per frame,
    with the frame's statistics), ``stats.jsonl`` (statistics only) and ``overlay.mp4`` into ``output``."""
    reader = read_frames(source, max_pixels=predictor.config.max_pixels)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    state = predictor.init_state()
    paths = {"selections": out / "selections.jsonl", "stats": out / "stats.jsonl"}
    writer, size = None, None
    adds, sels, changed, reenc, kept, keyframes, n = [], [], [], [], [], 0, 0
    notes: dict[str, None] = {}
    frames = reader if max_frames is None else _take(reader, max_frames)
    try:
        with open(paths["selections"], "w") as fsel, open(paths["stats"], "w") as fstat:
            for res in predictor.propagate(state, frames, query, budget, prompt_frames=prompt_frames, **select_kwargs):
                n += 1
                st = res.stats.to_dict()
                st.update({"source": res.name, "select_ms": round(res.selection.timings_ms["total"], 3),
                           "kept_share": None if res.kept_share is None else round(res.kept_share, 4)})
                fstat.write(json.dumps(st) + "\n")
                doc = res.selection.to_dict()
                doc["video"] = st
                fsel.write(json.dumps(doc) + "\n")
                adds.append(res.stats.timings_ms["total"])
                sels.append(res.selection.timings_ms["total"])
                changed.append(res.stats.changed_share)
                reenc.append(res.stats.reencoded_share)
                keyframes += res.stats.keyframe
                if res.kept_share is not None:
                    kept.append(res.kept_share)
                notes.update(dict.fromkeys(res.selection.notes))
                if overlay:
                    writer, size = _write_overlay(writer, size, state.texture.image, res, out, paths,
                                                  fps or reader.fps or 24.0)
                if on_frame is not None:
                    on_frame(res)
    finally:
        if writer is not None:
            writer.release()
        reader.close()
    if n == 0:
        raise VideoError(f"{source}: no frame could be decoded ({len(reader.skipped)} skipped)")
    med = lambda xs: float(np.median(xs)) if xs else 0.0  # noqa: E731
    return VideoSummary(frames=n, skipped=len(reader.skipped), keyframes=keyframes, changed_share=float(np.mean(changed)),
                        reencoded_share=float(np.mean(reenc)), add_ms_median=med(adds), select_ms_median=med(sels),
                        kept_share=float(np.mean(kept)) if kept else None,
                        outputs={k: str(v) for k, v in paths.items()}, notes=list(notes)[:10])


def _write_overlay(writer, size, image: np.ndarray, res: VideoResult, out: Path, paths: dict, fps: float):
    """Append one frame (heat map, tokens, a status line) to ``overlay.mp4``, opening it on the first frame."""
    from .render import render_overlay

    img = render_overlay(image, res.selection)
    label = (f"frame {res.index}  {'KEYFRAME ' + res.stats.reason if res.stats.keyframe else ''}  "
             f"re-encoded {100 * res.stats.reencoded_share:.0f}%")
    cv2.putText(img, label, (6, img.shape[0] - 8), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (255, 255, 255), 1, cv2.LINE_AA)
    if writer is None:
        size = (img.shape[1], img.shape[0])
        paths["overlay"] = out / "overlay.mp4"
        writer = cv2.VideoWriter(str(paths["overlay"]), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
        if not writer.isOpened():
            raise VideoError(f"cannot write {paths['overlay']} (no mp4 encoder available); use --no-overlay")
    if (img.shape[1], img.shape[0]) != size:  # a size change mid-stream: the video keeps its first size
        img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
    writer.write(cv2.cvtColor(img, cv2.COLOR_RGB2BGR))
    return writer, size


def _take(frames: Iterable[Frame], n: int) -> Iterator[Frame]:
    for i, f in enumerate(frames):
        if i >= n:
            return
        yield f
