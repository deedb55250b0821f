"""How a video session updates: :class:`VideoConfig` (with the default change thresholds of the two updates) and
the per-group :class:`UpdateRule` registry that says what an incremental update recomputes.

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
round(8 sigma + 1) | 1`` for float images); ``tests/video/test_exact.py`` checks that they are enough and that a
smaller one is caught.  With motion compensation only the tiles over the threshold are written, from crops reaching the
groups' margins in pixels: their neighbours keep the prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.errors import ConfigError


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
        keyframe_interval: a full refresh every this many frames (1: every frame).  60 (0.2.0; 30 before): on
            ``sam2_bedroom_video`` the motion-compensated update then costs ~0.5 ms a frame less for 1.6 points fewer
            tokens as a from-scratch encode chooses them, and DAVIS box coverage stays within 0.6 points
            of from-scratch (EVAL.md, "Video").
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
    keyframe_interval: int = 60
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
            (
                isinstance(self.keyframes, int) and 0 <= self.keyframes <= 1000,
                "keyframes must be an integer in [0, 1000]",
            ),
            (
                isinstance(self.keyframe_interval, int) and self.keyframe_interval >= 1,
                "keyframe_interval must be a positive integer",
            ),
            (
                self.change_threshold is None or self.change_threshold >= 0,
                "change_threshold must be >= 0 (grey levels), or None (the update's default)",
            ),
            (self.scene_cut is None or self.scene_cut > 0, "scene_cut must be > 0 grey levels, or None (off)"),
            (self.on_size_change in ("keyframe", "error"), "on_size_change must be 'keyframe' or 'error'"),
            (
                self.flow_size is None or (isinstance(self.flow_size, int) and self.flow_size >= 16),
                "flow_size must be an integer >= 16, or None (no optical flow)",
            ),
            (0.0 <= self.decay <= 1.0, "decay must be in [0, 1]"),
            (self.stability >= 0, "stability must be >= 0"),
            (isinstance(self.max_streams, int) and self.max_streams >= 1, "max_streams must be >= 1"),
            (0.0 < self.full_frame_share <= 1.0, "full_frame_share must be in (0, 1]"),
            (self.update in ("auto", "exact", "motion"), "update must be 'auto', 'exact' or 'motion'"),
            (
                self.update != "motion" or self.flow_size is not None,
                "update='motion' needs optical flow: set flow_size (or use update='exact')",
            ),
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
