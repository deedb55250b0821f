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
levels unless set).  Both refresh fully on keyframes and scene cuts and write the temporal channels from the memory;
the ``exact`` and ``motion`` modules describe them step by step.

A scene cut (the 64 px grey thumbnail changes by more than ``scene_cut`` grey levels on average) or a frame of
another size (or a :class:`VideoError` with ``on_size_change="error"``) starts a new scene: encoded from scratch,
memory cleared.  **Temporal channels** (group ``temporal``, channels 15-17 of the full layout): the memory -- a FIFO
of the last ``memory`` frames plus the last ``keyframes`` keyframes -- is moved into the new frame by optical flow
(OpenCV DIS, ultrafast preset with finest scale 1 and patch stride 6, on a grey copy shrunk by an integer factor to at
least ``flow_size`` px on the long side -- the maps live on the tile grid; tile maps are splatted forward, so uncovered
background gets no past), then
``prev_relevance`` = max over remembered frames of their relevance (normalised to [0, 1], times
``decay ** (age - 1)``), ``prev_saliency`` = the previous frame's saliency, ``fixations`` = the decayed sum of
the tiles chosen in remembered frames (a token at level l counts 4**-l), normalised to [0, 1].  That is
O(memory) work on tile maps per frame, so O(T) for a clip.  Relevance and fixations belong to a *stream*
(``select(..., stream="main")``): several questions about one video keep separate memories over one encode.

Layout: ``config`` (``VideoConfig``, the change thresholds, the per-group ``UpdateRule`` registry), ``state``
(``VideoState``, ``FrameStats``, the memory's records, the channel layout), ``predictor`` (``VideoPredictor``: the
session API), ``exact`` (the exact incremental update), ``motion`` (the motion-compensated update: registration,
the canvas, crops), ``tiles`` (pure tile-grid ops both updates use), ``frames`` (``FrameReader``, ``read_frames``)
and ``run`` (``run_video``: what ``foveate video`` does).
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{
            n: ".config"
            for n in (
                "DISTANCE_MARGIN",
                "EDGES_MARGIN",
                "EXACT_THRESHOLD",
                "FREQUENCY_MARGIN",
                "MOTION_THRESHOLD",
                "UPDATE_RULES",
                "UpdateRule",
                "VideoConfig",
                "gaussian_radius",
                "register_update_rule",
                "update_rule",
            )
        },
        **{n: ".frames" for n in ("IMAGE_SUFFIXES", "Frame", "FrameReader", "FrameSkippedWarning", "read_frames")},
        "register": ".motion",
        "VideoPredictor": ".predictor",
        **{n: ".run" for n in ("VideoSummary", "run_video")},
        **{n: ".state" for n in ("NEW_SCENE_REASONS", "FrameStats", "VideoResult", "VideoState")},
        **{
            n: ".tiles"
            for n in (
                "CROP_CALL_TILES",
                "MIP_CALL_COST",
                "cell_size",
                "cells_to_tiles",
                "cover_tiles",
                "crop_box",
                "dilate_tiles",
                "fixation_map",
                "flow_shift",
                "grey_cells",
                "move_tiles",
                "plan_crops",
                "regrid",
                "splat_matrix",
                "then",
                "tile_change",
                "tile_flow",
                "token_overlap",
                "update_mips",
                "warp_tile_maps",
            )
        },
    },
)
