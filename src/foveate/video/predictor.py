"""``VideoPredictor``: the session API -- one model (configuration and scorer), many sessions (:class:`VideoState`).

``add_frame`` decides what a frame needs (a new scene, a keyframe, the exact or the motion-compensated update),
moves the memory with the optical flow and builds the frame's texture; the updates themselves live in
``foveate.video.exact`` and ``foveate.video.motion``.  ``select`` scores the frame with the stream's temporal
channels and remembers what it chose; ``propagate`` does both for a stream of frames.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import cv2
import numpy as np
import torch
from torch import nn

from ..channels.base import EncodeContext
from ..channels.registry import resolve_groups, run_groups
from ..core import ops
from ..core.config import EncodeConfig, SelectConfig
from ..core.device import VIDEO_UPDATE_CV_THREADS, cv_threads, resolve_device, to_storage
from ..core.errors import ConfigError, VideoError
from ..core.io import ImageLike, load_image
from ..core.texture import Texture
from ..core.types import F32, F64, Bools
from ..query.query import Query
from ..query.scorer import Memo, Scorer
from ..selection import Selection, resolve_select_config
from ..selection import select as select_tokens
from ..weights.weights import WeightsSpec, load_weights
from .config import VideoConfig
from .exact import encode_changed, plan_updates
from .frames import Frame
from .motion import _camera_stats, canvas_generators, encode_moving, rebase
from .state import (
    NEW_SCENE_REASONS,
    FrameStats,
    VideoResult,
    VideoState,
    _frame_inputs,
    _Layout,
    _Record,
    _required,
    _StreamMemory,
    _torch_tensors,
    compose_temporal,
    install_stream,
    saliency_map,
    warp_memory,
)
from .tiles import (
    _downscale,
    cell_size,
    fixation_map,
    flow_copy,
    flow_shift,
    grey_cells,
    splat_matrix,
    then,
    tile_change,
    tile_flow,
    token_overlap,
)

# ----------------------------------------------------------------------------------------------------------
# Selection stability: a scorer that favours last frame's tiles


class _StableScorer(nn.Module):
    """Wraps a scorer: adds ``bonus`` (N_total,) to every tile's score and ``bound_bonus`` to its top-k bound.
    Implements the scorer interface ``select`` uses (``evaluate``, and ``forward``/``bound``/``explain``)."""

    def __init__(self, base: Scorer, bonus: F32, bound_bonus: F32) -> None:
        super().__init__()
        self.base, self.bonus, self.bound_bonus = base, bonus, bound_bonus

    def evaluate(
        self,
        feats: torch.Tensor,
        qmaps: torch.Tensor | None = None,
        qnames: Sequence[str] = (),
        memo: Memo | None = None,
    ) -> tuple[F32, F32, F32]:
        score, need, bound = self.base.evaluate(feats, qmaps, qnames, memo)
        return score + self.bonus, need, bound + self.bound_bonus

    def forward(
        self, feats: torch.Tensor, qmaps: torch.Tensor | None = None, qnames: Sequence[str] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        score, need = self.base(feats, qmaps, qnames)
        return score + torch.from_numpy(self.bonus).to(score), need

    def bound(self, feats: torch.Tensor, qmaps: torch.Tensor | None = None, qnames: Sequence[str] = ()) -> torch.Tensor:
        return self.base.bound(feats, qmaps, qnames) + torch.from_numpy(self.bound_bonus).to(feats)

    def explain(
        self, feats: torch.Tensor, qmaps: torch.Tensor | None, qnames: Sequence[str], rows: torch.Tensor
    ) -> dict[str, float]:
        return self.base.explain(feats, qmaps, qnames, rows)

    def prior(self, num_levels: int) -> F64:
        return self.base.prior(num_levels)

    # the query terms and the floor read the relevance model: the wrapped one's
    weights = property(lambda self: self.base.weights)
    floor = property(lambda self: self.base.floor)


def _kept_tiles(shapes: list[tuple[int, int]], last: _StreamMemory, mode: str) -> tuple[list[Bools], list[Bools]]:
    """Per level bool maps: the tiles whose choice last frame earns the stability bonus, and those whose top-k
    bound must include it.  top-k keeps level-0 tiles; the quadtree keeps its splits (the leaves' ancestors)."""
    n = len(shapes)
    keep: list[Bools] = [np.zeros(s, bool) for s in shapes]
    bound: list[Bools] = [np.zeros(s, bool) for s in shapes]
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


_SELECT_FIELDS = {f.name for f in dataclasses.fields(SelectConfig)} - {"budget", "mode"}


class VideoPredictor:
    """Encodes a video stream incrementally and answers queries per frame; holds no per-video state, so one
    predictor (its configuration and scorer) serves many sessions.

    Args:
        config: encode configuration; the ``temporal`` group is always added.  Default preset: ``fast``.
        video: :class:`VideoConfig` defaults for new sessions.
        select_config: default selection configuration.
        device: where the feature tensors and scoring live (``None``: CUDA if available, else CPU).
        scorer: a custom scorer (overrides ``weights``).
        weights: relevance weights: ``"handset"`` (the default for video), ``"default"`` (the package's trained
            weights), or a file from ``foveate train``.  Video keeps the hand-set weights by default: the trained
            ones were fitted on still images, and their channel scale outweighs the temporal memory (a prompt on the
            first frame fades as query-blind selections pile fixations elsewhere: tests/video).
        **overrides: fields of :class:`EncodeConfig` (``preset``, ``patch_size``, ...) or :class:`VideoConfig`
            (``memory``, ``change_threshold``, ...).
    """

    def __init__(
        self,
        config: EncodeConfig | None = None,
        video: VideoConfig | None = None,
        select_config: SelectConfig | None = None,
        device: str | torch.device | None = None,
        scorer: Scorer | None = None,
        weights: WeightsSpec = "handset",
        **overrides: Any,
    ) -> None:
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
        self.video = dataclasses.replace(
            video or VideoConfig(), **{k: v for k, v in overrides.items() if k in vid_fields}
        )
        self.select_config = select_config or SelectConfig()
        self.device = resolve_device(device)
        self.scorer = scorer.to(self.device) if scorer is not None else None
        self.weights = load_weights(weights)  # a bad weights file fails here, not at the first frame

    def init_state(self, **video_overrides: Any) -> VideoState:
        """A new, empty session; ``video_overrides`` replace fields of this predictor's :class:`VideoConfig`."""
        try:
            cfg = dataclasses.replace(self.video, **video_overrides)
        except TypeError as exc:
            raise ConfigError(str(exc)) from exc
        return VideoState(config=cfg, encode_config=self.config, device=self.device, session=uuid.uuid4().hex[:12])

    def reset_state(self, state: VideoState) -> None:
        """Forget every frame of a session (its configuration and id stay)."""
        VideoState.__init__(
            state, config=state.config, encode_config=state.encode_config, device=state.device, session=state.session
        )

    # -- add_frame ---------------------------------------------------------------------------------------------
    def add_frame(self, state: VideoState, frame: ImageLike) -> FrameStats:
        """Update the session's texture to ``frame`` (a path, array, PIL image, tensor or :class:`Frame`)."""
        t_start = time.perf_counter()
        rgb = load_image(frame.image if isinstance(frame, Frame) else frame, max_pixels=state.encode_config.max_pixels)
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
                raise VideoError(
                    f"frame {idx} is {w}x{h} but the session's frames are {pw}x{ph}; resize the frames, "
                    "or use on_size_change='keyframe' to start a new keyframe at a size change"
                )
            reason = "size_change"
        elif cfg.scene_cut is not None and float(np.abs(thumb - _required(state._thumb)).mean()) > cfg.scene_cut:
            reason = "scene_cut"
        elif idx - state._last_key >= cfg.keyframe_interval:
            reason = "interval"
        new_scene = reason in NEW_SCENE_REASONS
        # change detection against the reference: the exact update's input (moving updates and sessions that encode
        # every frame from scratch do without)
        diff = None if new_scene or moving or not cfg.incremental else tile_change(rgb, _required(state._ref), p)
        changed: Bools = np.ones(grid, bool) if diff is None else diff > cfg.threshold
        timings["change"] = (time.perf_counter() - t) * 1000.0

        # the memory: forget it at a new scene, else move it with the picture (its maps stay in the coordinates of
        # the last frame that changed, whose small grey copy is kept for the next flow); the same flow gives the
        # camera motion of a moving update
        t = time.perf_counter()
        shift = None
        # a motion-compensated update works on small images: OpenCV on fewer threads (foveate.core.device)
        small_work = contextlib.ExitStack()
        if moving and not new_scene and reason != "interval" and cfg.incremental:
            small_work.enter_context(cv_threads(VIDEO_UPDATE_CV_THREADS))
        if new_scene:
            state._forget()
            state._small = flow_copy(gray, cells, cfg.flow_size, p) if cfg.flow_size else None
        elif cfg.flow_size and changed.any():
            small, scale = flow_copy(gray, cells, cfg.flow_size, p)
            records = state._records()
            if min(small.shape) >= 16 and (records or moving):
                if state._flow is None:
                    state._flow = cv2.DISOpticalFlow.create(cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST)
                    state._flow.setFinestScale(1)  # the preset stops at 1/4 of the (already small) copy: too coarse
                    state._flow.setPatchStride(6)
                dest = tile_flow(_required(state._small)[0], small, state._flow, grid, p, scale)
                if records:
                    warp_memory(records, splat_matrix(*dest))
                if moving:
                    shift = flow_shift(*dest)
            state._small = (small, scale)
        timings["flow"] = (time.perf_counter() - t) * 1000.0
        t = time.perf_counter()
        temporal = compose_temporal(state, state._installed, idx, grid)
        timings["memory"] = (time.perf_counter() - t) * 1000.0

        prev_gray = None if new_scene else state._ref_gray
        done = None  # (changed share, re-encoded share, crops) of an update; None: encode the frame from scratch
        camera = None
        t = time.perf_counter()
        if new_scene or not cfg.incremental or (moving and reason == "interval"):
            pass
        elif moving:
            assert cells is not None and prev_gray is not None  # a moving session, not a new scene
            before = _required(state._camera)
            done = encode_moving(
                state, rgb, gray, cells, np.eye(2, 3) if shift is None else shift, prev_gray, temporal, timings
            )
            if done is not None:
                camera = _camera_stats(then(cv2.invertAffineTransform(before), _required(state._camera)), grid, p)
        else:
            assert prev_gray is not None  # not a new scene: the last frame's grey levels
            if reason == "interval":  # a refresh is an update with threshold 0: the texture becomes the frame's own
                assert diff is not None  # an incremental exact update, not a new scene: change detection ran
                changed = diff > 0
            plans = plan_updates(state, changed)  # None: the crops would cover the frame anyway
            timings["plan"] = (time.perf_counter() - t) * 1000.0
            if plans is not None:
                done = (
                    float(changed.mean()),
                    *encode_changed(state, rgb, changed, plans, prev_gray, temporal, timings),
                )
        timings.setdefault("plan", (time.perf_counter() - t) * 1000.0)
        small_work.close()
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
        layout = state.layout
        sal = saliency_map(state, layout)
        record = _Record(index=idx, saliency=sal)
        state._memory.append(record)
        if keyframe and cfg.keyframes:
            state._keyframes.append(record)
        state.texture = self._texture(state, rgb, idx)
        state.frames = idx + 1
        timings["texture"] = (time.perf_counter() - t) * 1000.0
        timings["total"] = (time.perf_counter() - t_start) * 1000.0
        stats = FrameStats(
            index=idx,
            keyframe=keyframe,
            reason=reason or ("full" if not cfg.incremental else ""),
            changed_share=done[0],
            reencoded_share=done[1],
            crops=done[2],
            timings_ms=timings,
            camera=camera,
        )
        state.texture.timings_ms = dict(timings)
        state.texture.extras["video"] = stats.to_dict()
        state.last_stats = stats
        return stats

    def _encode_full(
        self,
        state: VideoState,
        rgb: np.ndarray,
        gray: np.ndarray,
        prev_gray: np.ndarray | None,
        temporal: np.ndarray,
        timings: dict[str, float],
    ) -> tuple[float, int]:
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
        generators = canvas_generators(layout, cells) if moving else None
        x0, _, _, layout.absent = run_groups(ctx, resolve_groups(ecfg), generators)
        timings["local"] = (time.perf_counter() - t) * 1000.0
        t = time.perf_counter()
        state._means, state._maxes, _ = ops.build_mips(x0, layout.coverage[0], len(layout.coverage))
        state._tensors = _torch_tensors(ctx)
        if moving:
            rebase(state, gray, cells, x0)
        timings["mips"] = (time.perf_counter() - t) * 1000.0
        return 1.0, 1

    def _texture(self, state: VideoState, rgb: np.ndarray, idx: int) -> Texture:
        """The session's texture for the current frame: features from the masters, tokens cut from the frame.

        Its ``content_hash`` is ``video-<session>-<frame>``: the features depend on the stream's history (temporal
        channels; with a threshold > 0, earlier frames' pixels), so it must never pass for the encode of a still
        image.  ``Texture.save`` works; load such a file with ``verify=False``."""
        layout, dev = state.layout, state.device
        return Texture(
            image=rgb,
            config=state.encode_config,
            channels=layout.channels,
            groups=dict(layout.groups),
            absent=layout.absent,
            mean=to_storage(state._means, dev),
            max=to_storage(state._maxes, dev),
            coverage=layout.coverage_t,
            content_hash=f"video-{state.session}-{idx:08d}",
            extras={"video_session": state.session, "frame": idx},
            tensors=dict(state._tensors),
        )

    # -- select --------------------------------------------------------------------------------------------
    def select(
        self, state: VideoState, query: Any = None, budget: int | None = None, *, stream: str = "main", **kwargs: Any
    ) -> Selection:
        """Pick tokens for the current frame (see :func:`foveate.select`), and remember them in ``stream``.

        ``stream`` names an independent memory (prev_relevance, fixations, stability) -- SAM 2's object ids; use one
        per question you keep asking about the video.  Other keyword arguments are ``select``'s.
        """
        state._require_frame()
        cfg = resolve_select_config(
            kwargs.pop("config", None) or self.select_config,
            budget,
            kwargs.pop("mode", None),
            {k: kwargs.pop(k) for k in list(kwargs) if k in _SELECT_FIELDS},
        )
        if cfg.mode == "auto":  # the stream memory follows one layout from frame to frame
            cfg = dataclasses.replace(cfg, mode="quadtree")
        if cfg.mode == "uniform":
            raise ConfigError(
                "video selects a pyramid layout (quadtree or topk): the uniform layout keeps no "
                "tiles to carry from frame to frame"
            )
        cfg = dataclasses.replace(cfg, floor="off")  # the stream memory follows pyramid tiles from frame to frame
        install_stream(state, stream)
        tex = state._require_frame()
        scorer = (
            kwargs.pop("scorer", None) or self.scorer or Scorer.from_weights(self.weights, tex.channels, tex.device)
        )
        last = state._streams.get(stream)
        kept0 = None
        if state.config.stability > 0 and last is not None and last.frame < state.index and last.mode == cfg.mode:
            keep, bound = _kept_tiles(tex.level_shapes, last, cfg.mode)
            margin = state.config.stability

            def flat(maps: list[Bools]) -> F32:
                return (np.concatenate([m.ravel() for m in maps]) * margin).astype(np.float32)

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
    def propagate(
        self,
        state: VideoState,
        frames: Iterable[Any],
        query: Any = None,
        budget: int | None = None,
        *,
        prompt_frames: str = "first",
        stream: str = "main",
        **kwargs: Any,
    ) -> Iterator[VideoResult]:
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
