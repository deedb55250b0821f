"""Crops for hosted VLM APIs: the fine tokens merged into at most N rectangles plus one thumbnail, each with its
pixel size and the tokens a VLM with a given patch size would spend on it -- a way to send fewer image tokens to a
hosted VLM today, without changing the model (``crops/``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import cv2
import numpy as np

from ..selection import Selection


@dataclass
class Crop:
    """A rectangle of the source image to send to a VLM, with what it costs."""

    box: tuple[int, int, int, int]  # x0, y0, x1, y1 source pixels
    kind: str  # "crop" or "thumbnail"
    width: int  # pixels as sent
    height: int
    tokens: int  # estimated VLM tokens: ceil(width / vlm_patch) * ceil(height / vlm_patch)

    def to_dict(self) -> dict:
        return {"box": list(self.box), "kind": self.kind, "width": self.width, "height": self.height,
                "tokens": self.tokens}


@dataclass
class CropPlan:
    crops: list[Crop]
    thumbnail: Crop
    vlm_patch: int
    full_image_tokens: int  # the whole image at native resolution
    notes: list[str] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return self.thumbnail.tokens + sum(c.tokens for c in self.crops)

    def to_dict(self) -> dict:
        return {
            "vlm_patch": self.vlm_patch,
            "total_tokens": self.total_tokens,
            "full_image_tokens": self.full_image_tokens,
            "saving": round(1.0 - self.total_tokens / max(self.full_image_tokens, 1), 4),
            "thumbnail": self.thumbnail.to_dict(),
            "crops": [c.to_dict() for c in self.crops],
            "notes": self.notes,
        }


def vlm_tokens(width: int, height: int, vlm_patch: int) -> int:
    return math.ceil(width / vlm_patch) * math.ceil(height / vlm_patch)


def merge_boxes(boxes: np.ndarray, max_boxes: int) -> np.ndarray:
    """Merge axis-aligned boxes (K, 4) into at most ``max_boxes`` covering rectangles.

    First boxes that overlap or touch are merged; then, while too many remain, the pair whose bounding box
    adds the least area beyond the two boxes is merged.  The result covers every input box.
    """
    rects = [tuple(int(v) for v in b) for b in boxes]
    if not rects:
        return np.zeros((0, 4), np.int64)

    def union(a, b):
        return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))

    changed = True
    while changed:  # merge touching/overlapping rectangles until none touch
        changed = False
        out: list[tuple] = []
        for r in rects:
            for i, o in enumerate(out):
                if r[0] <= o[2] and o[0] <= r[2] and r[1] <= o[3] and o[1] <= r[3]:
                    out[i] = union(o, r)
                    changed = True
                    break
            else:
                out.append(r)
        rects = out
    arr = np.array(rects, np.int64)
    while len(arr) > max_boxes:
        area = (arr[:, 2] - arr[:, 0]) * (arr[:, 3] - arr[:, 1])
        ux0 = np.minimum(arr[:, None, 0], arr[None, :, 0])
        uy0 = np.minimum(arr[:, None, 1], arr[None, :, 1])
        ux1 = np.maximum(arr[:, None, 2], arr[None, :, 2])
        uy1 = np.maximum(arr[:, None, 3], arr[None, :, 3])
        extra = (ux1 - ux0) * (uy1 - uy0) - area[:, None] - area[None, :]
        np.fill_diagonal(extra, np.iinfo(np.int64).max)
        i, j = np.unravel_index(int(np.argmin(extra)), extra.shape)
        merged = union(tuple(arr[i]), tuple(arr[j]))
        keep = [k for k in range(len(arr)) if k not in (i, j)]
        arr = np.vstack([arr[keep], np.array([merged], np.int64)])
    return arr


def plan_crops(sel: Selection, max_crops: int = 4, fine_level: int = 1, vlm_patch: int = 14,
               thumbnail_side: int = 448) -> CropPlan:
    """Merge the tokens at level <= ``fine_level`` into at most ``max_crops`` rectangles plus a thumbnail.

    Token estimates assume the VLM cuts ``vlm_patch`` px patches from each picture as sent (e.g. 14 for
    CLIP-L/14 encoders, 28 for Qwen2-VL's merged 2x2 patches of 14).
    """
    h, w = sel.image_size
    notes = []
    fine = (sel.levels <= fine_level) & ~sel.gist
    if not fine.any() and len(sel):
        finest = int(sel.levels[~sel.gist].min()) if (~sel.gist).any() else int(sel.levels.min())
        fine = (sel.levels == finest) & ~sel.gist if (~sel.gist).any() else sel.levels == finest
        notes.append(f"no token at level <= {fine_level}; crops use the finest selected level {finest}")
    rects = merge_boxes(sel.boxes[fine], max_crops)
    crops = [Crop((int(a), int(b), int(c), int(d)), "crop", int(c - a), int(d - b),
                  vlm_tokens(int(c - a), int(d - b), vlm_patch)) for a, b, c, d in rects]
    s = min(1.0, thumbnail_side / max(h, w))
    tw, th = max(1, round(w * s)), max(1, round(h * s))
    thumb = Crop((0, 0, w, h), "thumbnail", tw, th, vlm_tokens(tw, th, vlm_patch))
    return CropPlan(crops, thumb, vlm_patch, vlm_tokens(w, h, vlm_patch), notes)


def crop_images(image: np.ndarray, plan: CropPlan) -> list[tuple[str, np.ndarray]]:
    """``(file name, RGB array)`` for the thumbnail and every crop of a plan."""
    th = plan.thumbnail
    out = [("thumbnail.png", cv2.resize(image, (th.width, th.height), interpolation=cv2.INTER_AREA)
            if (th.height, th.width) != image.shape[:2] else image)]
    for i, c in enumerate(plan.crops):
        x0, y0, x1, y1 = c.box
        out.append((f"crop_{i}.png", image[y0:y1, x0:x1]))
    return out
