"""Writing a selection's outputs: ``selection.json``, ``overlay.png``, ``mosaic.png``, ``tokens.safetensors`` and
``crops/``, and the PNG bytes and token metadata the HTTP service sends."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core.io import encode_image
from ..core.texture import Texture
from ..selection import Selection
from ..vlm import VlmRule
from .crops import crop_images, plan_crops
from .overlay import render_mosaic, render_overlay


def png_bytes(rgb: np.ndarray) -> bytes:
    """``rgb`` (H, W, 3) uint8 as PNG bytes (compression level 3): what ``overlay.png``, ``mosaic.png`` and
    the crops hold, on disk and over HTTP."""
    return encode_image(rgb, "png")


def write_png(path: Path, rgb: np.ndarray) -> None:
    try:
        Path(path).write_bytes(png_bytes(rgb))
    except OSError as exc:
        raise OSError(f"could not write {path}") from exc


def tokens_metadata(sel: Selection) -> dict[str, str]:
    """The string metadata of ``tokens.safetensors``: patch size, image size, texture id, query (JSON)."""
    return {
        "patch_size": str(sel.patch_size),
        "image_width": str(sel.image_size[1]),
        "image_height": str(sel.image_size[0]),
        "texture_id": sel.texture_id,
        "query": json.dumps(sel.query.to_dict()),
    }


def write_outputs(
    texture: Texture,
    sel: Selection,
    outdir: str | Path,
    *,
    overlay: bool = True,
    mosaic: bool = True,
    tokens: bool = True,
    crops: bool = True,
    max_crops: int | None = None,
    vlm: VlmRule | str = "openai",
) -> dict[str, Path]:
    """Write ``selection.json``, ``overlay.png``, ``mosaic.png``, ``tokens.safetensors`` and ``crops/`` (the pictures to
    send the VLM rule ``vlm``, a spec or a rule, at most ``max_crops`` besides the context) to ``outdir``. Returns
    the paths written, by name."""
    from safetensors.torch import save_file

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    doc = sel.to_dict()
    if crops:
        plan = plan_crops(sel, vlm, max_crops=max_crops)
        cdir = out / "crops"
        cdir.mkdir(exist_ok=True)
        for old in cdir.glob("[0-9][0-9]-*.png"):  # pictures of an earlier plan written here
            old.unlink()
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
