"""What a person and a VLM need from a selection: the overlay, the mosaic, the token tensors, the crops, JSON.

* ``overlay.png`` -- the relevance heat map over the image, with every token's outline coloured by level.
* ``mosaic.png`` -- the image as the VLM sees it: each region at the resolution of the token covering it.
* ``tokens.safetensors`` -- patches (K, 3, P, P) uint8 plus boxes, levels, positions, scores.
* ``crops/`` -- the fine tokens merged into at most N rectangles plus one thumbnail, each with its pixel size
  and the tokens a VLM with a given patch size would spend on it: a way to send fewer image tokens to a
  hosted VLM today, without changing the model.
* ``selection.json`` -- everything above as data (schema: docs/selection-schema.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from .core.texture import Texture
from .selection import Selection

#: outline colour per level (RGB): level 0 green, then cyan, yellow, orange, magenta, ...
LEVEL_COLORS = [(40, 220, 40), (0, 190, 255), (255, 220, 0), (255, 120, 0), (230, 0, 230), (255, 255, 255),
                (160, 160, 160), (90, 90, 90)]


def _level_color(level: int) -> tuple[int, int, int]:
    return LEVEL_COLORS[min(level, len(LEVEL_COLORS) - 1)]


def heatmap(sel: Selection, size: tuple[int, int]) -> np.ndarray:
    """The level-0 relevance map, min-max normalised, upsampled to ``size`` = (H, W), TURBO colours.  RGB uint8."""
    rel = sel.relevance.astype(np.float32)
    lo, hi = float(rel.min()), float(rel.max())
    norm = (rel - lo) / (hi - lo) if hi > lo else np.zeros_like(rel)
    gh, gw = rel.shape
    p = sel.patch_size
    big = cv2.resize(norm, (gw * p, gh * p), interpolation=cv2.INTER_LINEAR)[: size[0], : size[1]]
    bgr = cv2.applyColorMap(np.clip(big * 255, 0, 255).astype(np.uint8), cv2.COLORMAP_TURBO)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def render_overlay(image: np.ndarray, sel: Selection, alpha: float = 0.4, legend: bool = True) -> np.ndarray:
    """Heat map blended over ``image`` (H, W, 3) uint8, token outlines coloured by level.  RGB uint8."""
    h, w = image.shape[:2]
    out = cv2.addWeighted(image, 1.0 - alpha, heatmap(sel, (h, w)), alpha, 0.0)
    for (x0, y0, x1, y1), lvl, g in zip(sel.boxes, sel.levels, sel.gist):
        if g:
            continue  # the gist covers everything; outlining it would hide the rest
        cv2.rectangle(out, (int(x0), int(y0)), (int(x1) - 1, int(y1) - 1), _level_color(int(lvl)), 1)
    if legend and min(h, w) >= 64:
        y = 4
        for lvl, n in sorted(sel.level_counts().items()):
            text = f"L{lvl}: {n}"
            cv2.rectangle(out, (4, y), (84, y + 16), (0, 0, 0), -1)
            cv2.rectangle(out, (6, y + 3), (16, y + 13), _level_color(lvl), -1)
            cv2.putText(out, text, (20, y + 12), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (255, 255, 255), 1, cv2.LINE_AA)
            y += 18
    return out


def render_mosaic(texture: Texture, sel: Selection, fill: int = 128) -> np.ndarray:
    """The image rebuilt from the selected tokens only, each region at its token's level (bilinear upsampling
    of that pyramid level).  Regions no token covers (top-k without gist) are ``fill`` grey.  (H, W, 3) uint8."""
    p = texture.patch_size
    pyr = texture.pixel_levels()
    gh, gw = texture.level_shapes[0]
    lm = sel.level_map()
    canvas = np.full((gh * p, gw * p, 3), fill, np.uint8)
    for lvl in np.unique(lm):
        if lvl < 0:
            continue
        mask = np.repeat(np.repeat(lm == lvl, p, axis=0), p, axis=1)
        src = pyr[int(lvl)]
        up = src if lvl == 0 else cv2.resize(src, (src.shape[1] << int(lvl), src.shape[0] << int(lvl)),
                                            interpolation=cv2.INTER_LINEAR)
        canvas[mask] = up[: gh * p, : gw * p][mask]
    h, w = texture.image_size
    return canvas[:h, :w].copy()


# ----------------------------------------------------------------------------------------------------------
# Crops for hosted VLM APIs


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


# ----------------------------------------------------------------------------------------------------------
# Writing everything


def png_bytes(rgb: np.ndarray) -> bytes:
    """``rgb`` (H, W, 3) uint8 as PNG bytes (compression level 3): what ``overlay.png``, ``mosaic.png`` and
    the crops hold, on disk and over HTTP."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 3])
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 RGB array
        raise RuntimeError("PNG encoding failed")
    return buf.tobytes()


def write_png(path: Path, rgb: np.ndarray) -> None:
    try:
        Path(path).write_bytes(png_bytes(rgb))
    except OSError as exc:
        raise OSError(f"could not write {path}") from exc


def tokens_metadata(sel: Selection) -> dict[str, str]:
    """The string metadata of ``tokens.safetensors``: patch size, image size, texture id, query (JSON)."""
    return {"patch_size": str(sel.patch_size), "image_width": str(sel.image_size[1]),
            "image_height": str(sel.image_size[0]), "texture_id": sel.texture_id,
            "query": json.dumps(sel.query.to_dict())}


def write_outputs(texture: Texture, sel: Selection, outdir: str | Path, *, overlay: bool = True,
                  mosaic: bool = True, tokens: bool = True, crops: bool = True, max_crops: int = 4,
                  vlm_patch: int = 14) -> dict[str, Path]:
    """Write ``selection.json``, ``overlay.png``, ``mosaic.png``, ``tokens.safetensors`` and ``crops/`` to
    ``outdir``.  Returns the paths written, by name."""
    from safetensors.torch import save_file

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    doc = sel.to_dict()
    if crops:
        plan = plan_crops(sel, max_crops=max_crops, vlm_patch=vlm_patch)
        cdir = out / "crops"
        cdir.mkdir(exist_ok=True)
        for name, arr in crop_images(texture.image, plan):
            write_png(cdir / name, arr)
        (cdir / "crops.json").write_text(json.dumps(plan.to_dict(), indent=2))
        doc["crops"] = plan.to_dict()
        written["crops"] = cdir
    if overlay:
        write_png(out / "overlay.png", render_overlay(texture.image, sel))
        written["overlay"] = out / "overlay.png"
    if mosaic:
        write_png(out / "mosaic.png", render_mosaic(texture, sel))
        written["mosaic"] = out / "mosaic.png"
    if tokens:
        if sel.patches is None:
            raise ValueError("this selection has no patches (select with cut=True to write tokens)")
        save_file(sel.tensors(), str(out / "tokens.safetensors"), metadata=tokens_metadata(sel))
        written["tokens"] = out / "tokens.safetensors"
    (out / "selection.json").write_text(json.dumps(doc, indent=1))
    written["selection"] = out / "selection.json"
    return written
