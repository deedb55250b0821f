"""Writing a selection's outputs: ``selection.json``, ``overlay.png``, ``mosaic.png``, ``tokens.safetensors`` and
``crops/`` (:func:`save`), and the PNG bytes and token metadata the HTTP service sends.

Pictures are written at the size they are looked at: the overlay with its long side at most ``max_side`` (1,024 px by
default), the mosaic no larger than the finest picture the crop plan sends (it shows what the VLM sees, at most that
sharp) nor than ``max_side``; PNG by default, JPEG or WebP on request.  ``selection.json`` lists every file written
with its size in bytes (``files``) and the size each picture was written at (``pictures``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core.config import DEFAULT_MAX_SIDE
from ..core.errors import ConfigError
from ..core.io import encode_image
from ..core.texture import Texture
from ..selection import Selection
from ..vlm import VlmRule
from .crops import crop_images, plan_crops
from .overlay import render_mosaic, render_overlay, resize_to, shown_size


def png_bytes(rgb: np.ndarray) -> bytes:
    """``rgb`` (H, W, 3) uint8 as PNG bytes (compression level 3): what ``overlay.png``, ``mosaic.png`` and
    the crops hold, on disk and over HTTP."""
    return encode_image(rgb, "png")


def write_png(path: Path, rgb: np.ndarray) -> None:
    write_picture(path, rgb, "png")


#: the picture formats :func:`save` writes, by name: file suffix
FORMATS = {"png": ".png", "jpeg": ".jpg", "webp": ".webp"}


def picture_bytes(rgb: np.ndarray, fmt: str = "png", quality: int = 85) -> bytes:
    """``rgb`` (H, W, 3) uint8 as ``fmt`` bytes: png (lossless), jpeg or webp (lossy, ``quality`` 1-100)."""
    if fmt not in FORMATS:
        raise ConfigError(f"picture format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt != "webp":
        return encode_image(rgb, fmt, quality)
    import cv2

    ok, buf = cv2.imencode(
        ".webp", cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR), [cv2.IMWRITE_WEBP_QUALITY, int(quality)]
    )
    if not ok:  # pragma: no cover - OpenCV builds carry libwebp
        raise RuntimeError("webp encoding failed")
    return buf.tobytes()


def write_picture(path: Path, rgb: np.ndarray, fmt: str = "png", quality: int = 85) -> None:
    try:
        Path(path).write_bytes(picture_bytes(rgb, fmt, quality))
    except OSError as exc:
        raise OSError(f"could not write {path}") from exc


def caption(sel: Selection, model: str | None = None) -> str:
    """The overlay's caption: the question (or what prompted the selection), budget, tokens by mode, model."""
    q = sel.query
    what = f'"{q.text}"' if q.text else ("point/box prompt" if q.has_prompt else "no query (saliency)")
    text = f"{what} | {len(sel)} of {sel.budget} tokens ({sel.mode})"
    return text + (f" | {model}" if model else "")


def tokens_metadata(sel: Selection) -> dict[str, str]:
    """The string metadata of ``tokens.safetensors``: patch size, image size, texture id, query (JSON)."""
    return {
        "patch_size": str(sel.patch_size),
        "image_width": str(sel.image_size[1]),
        "image_height": str(sel.image_size[0]),
        "texture_id": sel.texture_id,
        "query": json.dumps(sel.query.to_dict()),
    }


def save(
    texture: Texture,
    sel: Selection,
    folder: str | Path,
    *,
    overlay: bool = True,
    mosaic: bool = True,
    tokens: bool = True,
    crops: bool = True,
    max_crops: int | None = None,
    vlm: VlmRule | str = "openai",
    max_side: int | None = DEFAULT_MAX_SIDE,
    image_format: str = "png",
    quality: int = 85,
    heat: bool = True,
) -> dict[str, Path]:
    """Write a selection's files to ``folder``: ``selection.json``, ``overlay.png`` (the heat map, token outlines,
    a legend and caption bar; ``heat=False``: outlines only), ``mosaic.png``, ``tokens.safetensors`` and ``crops/``
    (the pictures to send the VLM rule ``vlm``, a spec or a rule, at most ``max_crops`` besides the context).
    ``max_side``: the overlay's and mosaic's long side at most (None: full size); ``image_format``: png, jpeg or
    webp for the overlay and mosaic (the crops stay PNG: they are what is sent).  Returns the paths written, by
    name; ``selection.json`` holds each file's size in bytes under ``files``."""
    from safetensors.torch import save_file

    if image_format not in FORMATS:
        raise ConfigError(f"picture format must be one of {', '.join(FORMATS)}, got {image_format!r}")
    if max_side is not None and max_side < 64:
        raise ConfigError(f"max_side must be at least 64 px, got {max_side}")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    doc = sel.to_dict()
    ext = FORMATS[image_format]
    finest = 1.0  # source pixels per pixel of the sharpest picture the plan sends
    model = vlm if isinstance(vlm, str) else vlm.name
    if crops:
        plan = plan_crops(sel, vlm, max_crops=max_crops)
        model = plan.model or plan.rule
        finest = max(1.0, min((v.scale for p in plan.pictures for v in p.views()), default=1.0))
        cdir = out / "crops"
        cdir.mkdir(exist_ok=True)
        for old in cdir.glob("[0-9][0-9]-*.png"):  # pictures of an earlier plan written here
            old.unlink()
        for name, arr in crop_images(texture.image, plan):
            write_png(cdir / name, arr)
        (cdir / "crops.json").write_text(json.dumps(plan.to_dict(), indent=2))
        doc["crops"] = plan.to_dict()
        written["crops"] = cdir
    for old_ext in FORMATS.values():  # an earlier run's pictures in another format
        for name in ("overlay", "mosaic"):
            if old_ext != ext and (out / f"{name}{old_ext}").exists():
                (out / f"{name}{old_ext}").unlink()
    shown: dict[str, list[int]] = {}
    if overlay:
        ov = render_overlay(texture.image, sel, heat=heat, caption=caption(sel, model), max_side=max_side)
        write_picture(out / f"overlay{ext}", ov, image_format, quality)
        written["overlay"] = out / f"overlay{ext}"
        shown["overlay"] = [ov.shape[1], ov.shape[0]]
    if mosaic:
        h, w = texture.image_size
        side = max(h, w) / finest
        size = shown_size((h, w), round(min(side, max_side or side)))
        m = resize_to(render_mosaic(texture, sel), size)
        write_picture(out / f"mosaic{ext}", m, image_format, quality)
        written["mosaic"] = out / f"mosaic{ext}"
        shown["mosaic"] = [m.shape[1], m.shape[0]]
    if tokens:
        if sel.patches is None:
            raise ValueError("this selection has no patches (select with cut=True to write tokens)")
        save_file(sel.tensors(), str(out / "tokens.safetensors"), metadata=tokens_metadata(sel))
        written["tokens"] = out / "tokens.safetensors"
    doc["pictures"] = shown
    doc["files"] = {
        str(p.relative_to(out)): p.stat().st_size
        for key, path in written.items()
        for p in (sorted(path.iterdir()) if key == "crops" else [path])
    }
    (out / "selection.json").write_text(json.dumps(doc, indent=1))
    written["selection"] = out / "selection.json"
    return written


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
    """:func:`save` with its default sizes and formats (the name of earlier versions)."""
    return save(
        texture, sel, outdir, overlay=overlay, mosaic=mosaic, tokens=tokens, crops=crops, max_crops=max_crops, vlm=vlm
    )
