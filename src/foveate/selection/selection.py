"""The result of ``select``: the tokens chosen for one (texture, query, budget), as arrays indexed by token, and
the ``selection.json`` document they serialise to (schema: docs/selection-schema.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .auto import finest_levels

if TYPE_CHECKING:
    from ..query.query import Query

#: selection.json schema version (see docs/selection-schema.md)
SCHEMA_VERSION = 1


@dataclass
class Selection:
    """The tokens chosen for one (texture, query, budget).  Arrays are indexed by token, shape (K, ...).

    Attributes:
        levels, rows, cols: (K,) int64: each token is tile (rows[i], cols[i]) of pyramid level levels[i].
        scores: (K,) float32: the scorer's score (log-relevance) of each token's tile.
        boxes: (K, 4) int64: ``x0, y0, x1, y1`` in source pixels, clipped to the image (x1, y1 exclusive).
        centers: (K, 2) float32: box centre ``(cx, cy)`` normalised to [0, 1] by the image width and height.
        grid: (K, 4) int64: the level-0 tiles the token spans, ``r0, c0, r1, c1`` (r1, c1 exclusive).
        gist: (K,) bool: the token belongs to the top-k mode's gist.
        patches: (K, 3, P, P) uint8 torch tensor of pixels (``None`` when ``cut=False``).
        relevance: (gh, gw) float32: the level-0 score map (for heat maps).
        scales: (K,) float64: source pixels per token pixel -- ``2**level`` for a pyramid token; for the
            ``uniform`` layout the resize factor (then ``levels`` holds the nearest pyramid level at or below
            it, and rows/cols index the uniform grid).
        layout: ``"pyramid"`` (quadtree, top-k) or ``"uniform"``.
    """

    levels: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    scores: np.ndarray
    boxes: np.ndarray
    centers: np.ndarray
    grid: np.ndarray
    gist: np.ndarray
    patches: torch.Tensor | None
    relevance: np.ndarray
    image_size: tuple[int, int]
    patch_size: int
    num_levels: int
    budget: int
    mode: str
    query: Query
    texture_id: str
    timings_ms: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    explain: dict[str, float] | None = None
    #: with explain: what drove the query terms (OCR lines, ...)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    #: source pixels per token pixel; not given: 2 ** level (a pyramid's tokens), filled by __post_init__
    scales: np.ndarray = None  # type: ignore[assignment]
    layout: str = "pyramid"

    def __post_init__(self) -> None:
        if self.scales is None:
            self.scales = np.exp2(self.levels.astype(np.float64))

    def __len__(self) -> int:
        return int(self.levels.shape[0])

    @property
    def num_tiles(self) -> int:
        gh, gw = self.relevance.shape
        out: int = gh * gw
        return out

    def level_counts(self) -> dict[int, int]:
        vals, counts = np.unique(self.levels, return_counts=True)
        return {int(v): int(c) for v, c in zip(vals, counts)}

    def level_map(self) -> np.ndarray:
        """(gh, gw) int64: the finest selected level covering each level-0 tile, -1 where nothing is selected.

        Painted per level, not per token: coarse levels first, finer ones overwrite (the minimum level).  The
        uniform layout covers every tile at its one level."""
        gh, gw = self.relevance.shape
        if self.layout == "uniform":
            return np.full((gh, gw), int(self.levels.min()) if len(self) else -1, np.int64)
        return finest_levels(list(zip(self.levels.tolist(), self.rows.tolist(), self.cols.tolist())), (gh, gw))

    def to_dict(self) -> dict[str, Any]:
        """The ``selection.json`` document (schema in docs/selection-schema.md)."""
        h, w = self.image_size
        return {
            "schema_version": SCHEMA_VERSION,
            "texture_id": self.texture_id,
            "image": {"width": w, "height": h},
            "patch_size": self.patch_size,
            "num_levels": self.num_levels,
            "mode": self.mode,
            "layout": self.layout,
            # the uniform layout's resize factor (source px per token px); pyramid tokens: 2 ** level
            "uniform_scale": round(float(self.scales[0]), 6) if self.layout == "uniform" and len(self) else None,
            "budget": self.budget,
            "num_tokens": len(self),
            "num_tiles_full": self.num_tiles,
            "query": self.query.to_dict(),
            "level_counts": {str(k): v for k, v in self.level_counts().items()},
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "notes": list(self.notes),
            "explain": self.explain,
            "evidence": self.evidence,
            # built from .tolist() columns: per-element NumPy indexing made this ~5x slower (it is on the
            # HTTP service's select path); values are the same Python ints, floats and bools
            "tokens": [
                {
                    "level": lvl,
                    "row": r,
                    "col": c,
                    "box": box,
                    "center": [round(x, 6), round(y, 6)],
                    "grid": grid,
                    "score": round(score, 5),
                    "gist": gist,
                }
                for lvl, r, c, box, (x, y), grid, score, gist in zip(
                    self.levels.tolist(),
                    self.rows.tolist(),
                    self.cols.tolist(),
                    self.boxes.tolist(),
                    self.centers.astype(np.float64).tolist(),
                    self.grid.tolist(),
                    self.scores.astype(np.float64).tolist(),
                    self.gist.tolist(),
                )
            ],
        }

    def tensors(self) -> dict[str, torch.Tensor]:
        """What ``tokens.safetensors`` holds: patches, boxes, levels, positions, scores."""
        out = {
            "boxes": torch.from_numpy(self.boxes.astype(np.int64)),
            "levels": torch.from_numpy(self.levels.astype(np.int64)),
            "rows": torch.from_numpy(self.rows.astype(np.int64)),
            "cols": torch.from_numpy(self.cols.astype(np.int64)),
            "centers": torch.from_numpy(self.centers.astype(np.float32)),
            "grid": torch.from_numpy(self.grid.astype(np.int64)),
            "scores": torch.from_numpy(self.scores.astype(np.float32)),
            "gist": torch.from_numpy(self.gist.astype(np.uint8)),
            "scales": torch.from_numpy(self.scales.astype(np.float32)),
        }
        if self.patches is not None:
            out["patches"] = self.patches.contiguous()
        return out
