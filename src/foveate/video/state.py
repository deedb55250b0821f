"""A video session's state and its memory: :class:`VideoState` (SAM 2's ``inference_state``, typed),
:class:`FrameStats`, the remembered frames' tile maps and how they become the ``temporal`` channels
(:func:`compose_temporal`), move with the picture (:func:`warp_memory`) and switch between streams
(:func:`install_stream`); the session's channel layout and update plan (``_Layout``)."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from ..channels.base import EncodeContext
from ..channels.registry import get_group, resolve_groups
from ..core import ops
from ..core.config import EncodeConfig
from ..core.errors import NoImageSetError
from ..core.texture import Texture
from ..core.types import F32, I64
from .config import VideoConfig, update_rule
from .tiles import _indices, cell_size, update_mips, warp_tile_maps

if TYPE_CHECKING:
    from ..selection import Selection


T = TypeVar("T")

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
        out = {
            "frame": self.index,
            "keyframe": self.keyframe,
            "reason": self.reason,
            "changed_share": round(self.changed_share, 5),
            "reencoded_share": round(self.reencoded_share, 5),
            "crops": self.crops,
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
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
    moving_warp: I64
    moving_nearest: I64
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
        local = [
            (k, tuple(names), any(update_rule(n).reads_previous for n in names)) for k, names in sorted(buckets.items())
        ]
        h, w = shape
        p = config.patch_size
        gh, gw = ops.grid_shape(h, w, p)
        _, _, coverage = ops.build_mips(
            np.zeros((gh, gw, 0), np.float32), ops.coverage0(h, w, p), ops.num_levels(gh, gw, config.max_levels)
        )
        cell = cell_size(p)
        rules = [update_rule(n) for n in moving["local"]]
        margins = [r.margin if r.motion_margin is None else r.motion_margin for r in rules]
        return cls(
            shape=shape,
            grid=(gh, gw),
            channels=sum((get_group(n).channels for n in groups), ()),
            groups=groups,
            absent=(),
            coverage=coverage,
            coverage_t=[torch.from_numpy(c).to(device) for c in coverage],
            local=local,
            global_groups=tuple(global_groups),
            temporal=groups["temporal"],
            moving_local=tuple(moving["local"]),
            moving_margin=max(margins + [0]),
            moving_frame=tuple(moving["frame"]),
            moving_warp=_indices([groups[n] for n in moving["warp"]]),
            moving_nearest=_indices([groups[n] for n in moving["nearest"]]),
            cell=cell,
            per_tile=p // cell,
            cell_coverage=ops.coverage0(h, w, cell),
            canvas_margin=-(-max(h, w) // (8 * cell)),
        )


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
    _memory: deque[_Record] = field(default_factory=deque, repr=False)
    _keyframes: deque[_Record] = field(default_factory=deque, repr=False)
    _streams: OrderedDict[str, _StreamMemory] = field(default_factory=OrderedDict, repr=False)
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
        return _required(self._ref)

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
        a, b = self.layout.temporal
        return self._means[0][..., a:b].copy()

    @property
    def memory_frames(self) -> list[int]:
        """Frame indices held in memory (FIFO and keyframes), oldest first."""
        return sorted(r.index for r in self._records())

    @property
    def streams(self) -> list[str]:
        return list(self._streams)

    @property
    def layout(self) -> _Layout:
        """The session's channel layout and update plan (made by the first frame's encode)."""
        return _required(self._layout)

    def _require_frame(self) -> Texture:
        """The current frame's texture (:class:`NoImageSetError` before the first frame)."""
        if self.texture is None:
            raise NoImageSetError("no frame yet: call add_frame(state, frame) before select()")
        return self.texture

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


def _required(value: T | None) -> T:
    """``value``, a part of the session that ``add_frame`` makes (:class:`NoImageSetError` while it is missing)."""
    if value is None:
        raise NoImageSetError("no frame yet: call add_frame(state, frame) first")
    return value


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


# ----------------------------------------------------------------------------------------------------------
# The memory: remembered frames -> temporal channels


def compose_temporal(
    state: VideoState, stream: str, idx: int, grid: tuple[int, int], saliency: np.ndarray | None = None
) -> np.ndarray:
    """(gh, gw, 3) float32 temporal channels for ``stream`` at frame ``idx`` from the records before it.

    The saliency channel (the previous frame's, decayed) belongs to no stream: ``saliency`` passes the one already
    composed for this frame, needed once the frame's own record is the newest and the previous one has dropped its
    map (:func:`warp_memory`)."""
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
    if saliency is not None:
        sal = saliency
    elif records:  # the previous frame's saliency: the newest record's (the only one kept)
        newest = max(records, key=lambda r: r.index)
        assert newest.saliency is not None  # the newest record keeps its saliency (warp_memory)
        sal = np.float32(cfg.decay ** (idx - newest.index - 1)) * newest.saliency
    norm = sum(cfg.decay**j for j in range(cfg.memory))
    out = np.dstack([rel, sal, fix / np.float32(norm)])
    temporal: F32 = np.clip(np.nan_to_num(out), 0.0, 1.0).astype(np.float32)
    return temporal


def install_stream(state: VideoState, stream: str) -> None:
    """Write ``stream``'s temporal channels into the current texture (in place) if another stream's are there."""
    if state._installed == stream:
        return
    layout = state.layout
    a, b = layout.temporal
    sal = state._means[0][..., a + 1].copy()  # the frame's saliency channel, the same for every stream
    composed = compose_temporal(state, stream, state.index, layout.grid, saliency=sal)
    state._means[0][..., a:b] = state._maxes[0][..., a:b] = composed
    update_mips(state._means, state._maxes, layout.coverage, [(_indices([(a, b)]), np.ones(layout.grid, bool))])
    tex = state._require_frame()
    for lvl in range(tex.num_levels):
        tex.mean[lvl][..., a:b] = torch.from_numpy(state._means[lvl][..., a:b]).to(tex.mean[lvl])
        tex.max[lvl][..., a:b] = torch.from_numpy(state._maxes[lvl][..., a:b]).to(tex.max[lvl])
    tex.invalidate()
    state._installed = stream


def warp_memory(records: list[_Record], splat: Any) -> None:
    """Move every remembered tile map that is still read with the picture (one sparse product for all of them): the
    relevance and fixations of every record, the saliency of the newest (the only one :func:`compose_temporal`
    reads; older records drop theirs)."""
    slots: list[tuple[_Record, dict[str, np.ndarray] | None, str]] = []  # (record, its map's dict or None, key)
    maps: list[np.ndarray] = []
    newest = max(records, key=lambda r: r.index)
    for r in records:
        if r is newest:
            assert r.saliency is not None  # the newest record is the last frame's: add_frame gave it its saliency
            slots.append((r, None, ""))
            maps.append(r.saliency)
        else:
            r.saliency = None
        for d in (r.relevance, r.fixations):
            for k, v in d.items():
                slots.append((r, d, k))
                maps.append(v)
    for (r, slot, k), m in zip(slots, warp_tile_maps(splat, maps)):
        if slot is None:
            r.saliency = m
        else:
            slot[k] = m


def saliency_map(state: VideoState, layout: _Layout) -> np.ndarray:
    """The current frame's saliency on the tile grid, for the next frame's prev_saliency."""
    if "saliency" in layout.groups:
        a, _ = layout.groups["saliency"]
        return state._means[0][..., a].copy()
    ctx = EncodeContext(_required(state._ref), state.encode_config)
    ctx.gray = _required(state._ref_gray)  # the reference's grey levels, kept with it
    out = get_group("saliency").generator(ctx)
    assert out is not None  # the saliency group reads the image only: it always has a map
    return out[..., 0]
