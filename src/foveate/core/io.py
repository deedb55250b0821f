"""Read anything a user calls an image into a contiguous ``uint8`` RGB array of shape (H, W, 3).

Accepted: a path (PNG, JPEG, WebP, TIFF, BMP and whatever else Pillow decodes; the first frame of animated or
multi-page files), encoded bytes, a NumPy array, a PIL image or a torch tensor.

Conversion rules (documented, tested):

* EXIF orientation is applied, so the array is the picture as a viewer shows it.
* Grey, palette, CMYK, YCbCr, LAB and HSV become RGB; alpha (RGBA, LA, palette transparency) is composited on
  white, the way a page with transparency prints.
* 16-bit integer data is scaled to 8 bits by 255/65535 (full range); float data in [0, 1] is scaled by 255,
  other floats are clipped to [0, 255]; NaN becomes 0.
* Arrays are HxW, HxWxC (NumPy's convention) or CxHxW (torch's convention, also a leading batch of 1),
  with C in {1, 3, 4}.

Errors: an empty, truncated, corrupt or non-image file is an ``ImageDecodeError``; an image with more pixels
than ``max_pixels`` is an ``ImageTooLargeError`` raised from the header, before any pixel is decoded.

The way back: :func:`encode_image` writes an RGB array as PNG or JPEG bytes.
"""

from __future__ import annotations

import io as _io
import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from .errors import FoveateError, ImageDecodeError, ImageTooLargeError, UnsupportedInputError

DEFAULT_MAX_PIXELS = 64_000_000

ImageLike = str | os.PathLike[str] | bytes | bytearray | memoryview | np.ndarray | Image.Image | Any

#: what Pillow's decoders raise on bad data -- any exception: besides the usual (OSError, SyntaxError,
#: struct.error, ...) a plugin may raise NotImplementedError (DDS pixel formats it does not implement),
#: RuntimeError, AttributeError...  foveate's own errors pass through unchanged.
_DECODE_ERRORS = (Exception,)


def load_image(source: ImageLike, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Return ``source`` as a contiguous uint8 array (H, W, 3) in RGB order."""
    if isinstance(source, (str, os.PathLike)):
        return _from_path(Path(source), max_pixels)
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not data:
            raise ImageDecodeError("the image data is empty (0 bytes)")
        return _from_bytes(data, "<bytes>", max_pixels)
    if isinstance(source, Image.Image):
        _check_pixels(source.size[0], source.size[1], max_pixels, "image")
        try:
            return _pil_to_rgb(source)
        except FoveateError:
            raise
        except _DECODE_ERRORS as exc:
            raise ImageDecodeError(f"the PIL image cannot be read as RGB ({_reason(exc)})") from exc
    if isinstance(source, np.ndarray):
        return _array_to_rgb(source, max_pixels)
    torch = _maybe_torch()
    if torch is not None and isinstance(source, torch.Tensor):
        t = source.detach().cpu()
        if t.dtype == torch.bfloat16 or t.dtype == torch.float16:
            t = t.float()
        arr = t.numpy()
        # torch is channels-first (CxHxW, or 1xCxHxW); an HxWxC tensor is accepted too
        if arr.ndim == 4 and arr.shape[0] == 1:
            arr = arr[0]
        if arr.ndim == 3 and arr.shape[0] in (1, 3, 4):
            arr = np.moveaxis(arr, 0, -1)
        return _array_to_rgb(arr, max_pixels)
    raise UnsupportedInputError(
        f"cannot read an image from {type(source).__name__}; pass a file path, encoded bytes, a NumPy array, "
        "a PIL image or a torch tensor"
    )


def peek_size(source: ImageLike, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int] | None:
    """(H, W) of an image file or encoded bytes from its header, without decoding a pixel (``ImageTooLargeError``
    over ``max_pixels``).  ``None`` where the header says nothing usable: the decode then says why."""
    if isinstance(source, (str, os.PathLike)):
        try:
            im = Image.open(source)
        except Exception:
            return None
    elif isinstance(source, (bytes, bytearray, memoryview)):
        try:
            im = Image.open(_io.BytesIO(bytes(source)))
        except Exception:
            return None
    else:
        return None
    with im:
        w, h = im.size
    _check_pixels(w, h, max_pixels, str(source) if isinstance(source, (str, os.PathLike)) else "image")
    return h, w


def _maybe_torch() -> ModuleType | None:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    return torch


def _check_pixels(width: int, height: int, max_pixels: int, what: str) -> None:
    if width <= 0 or height <= 0:
        raise ImageDecodeError(f"{what} has an empty size {width}x{height}")
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f"{what} is {width}x{height} = {width * height:,} pixels, above the limit of {max_pixels:,}; "
            "downscale it or raise max_pixels (--max-pixels) if you trust the file"
        )


def _from_path(path: Path, max_pixels: int) -> np.ndarray:
    if not path.exists():
        raise ImageDecodeError(f"{path}: no such file")
    if path.is_dir():
        raise ImageDecodeError(f"{path}: is a directory, not an image file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImageDecodeError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if size == 0:
        raise ImageDecodeError(f"{path}: the file is empty (0 bytes)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImageDecodeError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return _from_bytes(data, str(path), max_pixels)


def _from_bytes(data: bytes, name: str, max_pixels: int) -> np.ndarray:
    with warnings.catch_warnings():
        # we apply our own pixel limit from the header; Pillow's warning would only be noise
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im = Image.open(_io.BytesIO(data))
        except Image.DecompressionBombError as exc:
            raise ImageTooLargeError(
                f"{name}: the image is too large to decode safely ({_reason(exc)}); the limit is {max_pixels:,} pixels"
            ) from exc
        except Image.UnidentifiedImageError as exc:
            if data.startswith(b"%PDF-"):
                raise UnsupportedInputError(
                    f"{name}: a PDF is a document, not an image: encode it with foveate.encode (every page) or "
                    "foveate select / prompt; this entry point takes one image"
                ) from exc
            raise ImageDecodeError(
                f"{name}: not a readable image (unknown or unsupported format; expected PNG, "
                "JPEG, WebP, TIFF, BMP, ...)"
            ) from exc
        except FoveateError:
            raise
        except _DECODE_ERRORS as exc:
            raise _decode_error(name, exc, "not a readable image", im=None) from exc
        _check_pixels(im.size[0], im.size[1], max_pixels, name)
        try:
            im.load()
            return _pil_to_rgb(im)
        except Image.DecompressionBombError as exc:
            raise ImageTooLargeError(f"{name}: the image is too large to decode safely ({_reason(exc)})") from exc
        except FoveateError:
            raise
        except _DECODE_ERRORS as exc:
            raise _decode_error(name, exc, "the image data is corrupt or truncated", im) from exc


def _decode_error(name: str, exc: BaseException, what: str, im: Image.Image | None) -> FoveateError:
    """A decoder's exception as foveate's typed error: a variant the decoder does not implement is
    ``UnsupportedInputError`` (415 from the service), anything else ``ImageDecodeError``."""
    if isinstance(exc, NotImplementedError):
        fmt = f" ({im.format})" if im is not None and im.format else ""
        return UnsupportedInputError(
            f"{name}: an image variant{fmt} the decoder does not implement ({_reason(exc)}); convert it to PNG or JPEG"
        )
    return ImageDecodeError(f"{name}: {what} ({_reason(exc)})")


def _reason(exc: BaseException) -> str:
    msg = str(exc).strip() or type(exc).__name__
    return msg.splitlines()[0][:200]


def _pil_to_rgb(im: Image.Image) -> np.ndarray:
    im = ImageOps.exif_transpose(im) or im
    mode = im.mode
    if mode == "RGB":
        return np.ascontiguousarray(np.asarray(im, dtype=np.uint8))
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        return _array_to_rgb(np.asarray(im), max_pixels=im.size[0] * im.size[1])
    if mode == "P" and "transparency" in im.info:
        im = im.convert("RGBA")
        mode = "RGBA"
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        im = im.convert("RGBA")
        white = Image.new("RGBA", im.size, (255, 255, 255, 255))
        return np.ascontiguousarray(np.asarray(Image.alpha_composite(white, im).convert("RGB"), dtype=np.uint8))
    return np.ascontiguousarray(np.asarray(im.convert("RGB"), dtype=np.uint8))


def _to_uint8(arr: np.ndarray) -> np.ndarray:
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.bool_:
        return arr.astype(np.uint8) * 255
    if arr.dtype == np.uint16:
        return ((arr.astype(np.uint32) * 255 + 32767) // 65535).astype(np.uint8)
    if np.issubdtype(arr.dtype, np.floating):
        a = np.nan_to_num(arr.astype(np.float32), nan=0.0, posinf=255.0, neginf=0.0)
        if a.size and float(a.max()) <= 1.0:
            a = a * 255.0
        return np.clip(np.rint(a), 0, 255).astype(np.uint8)
    if np.issubdtype(arr.dtype, np.integer):
        hi = int(arr.max()) if arr.size else 0
        if hi > 255 and hi <= 65535 and int(arr.min()) >= 0:
            return _to_uint8(arr.astype(np.uint16))
        out: np.ndarray = np.clip(arr, 0, 255).astype(np.uint8)
        return out
    raise UnsupportedInputError(f"cannot read an image from an array of dtype {arr.dtype}")


def _array_to_rgb(arr: np.ndarray, max_pixels: int) -> np.ndarray:
    if arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4) and arr.shape[0] in (1, 3, 4):
        arr = np.moveaxis(arr, 0, -1)  # CxHxW
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (3, 4)):
        raise UnsupportedInputError(
            f"cannot read an image from an array of shape {tuple(arr.shape)}; expected HxW, HxWxC or CxHxW "
            "with C in 1, 3, 4"
        )
    h, w = arr.shape[:2]
    if h == 0 or w == 0:
        raise UnsupportedInputError(f"the image array is empty (shape {tuple(arr.shape)})")
    _check_pixels(w, h, max_pixels, "image array")
    a = _to_uint8(arr)
    if a.ndim == 2:
        a = np.repeat(a[..., None], 3, axis=-1)
    elif a.shape[-1] == 4:
        alpha = a[..., 3:4].astype(np.float32) / 255.0
        a = np.rint(a[..., :3].astype(np.float32) * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)
    return np.ascontiguousarray(a)


def encode_image(rgb: np.ndarray, fmt: str = "png", quality: int = 90) -> bytes:
    """``rgb`` (H, W, 3) uint8 as PNG (compression level 3) or JPEG (``quality``) bytes, via OpenCV."""
    import cv2

    fmt = fmt.lower()
    if fmt == "png":
        ext, params = ".png", [cv2.IMWRITE_PNG_COMPRESSION, 3]
    elif fmt in ("jpeg", "jpg"):
        ext, params = ".jpg", [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    else:
        raise UnsupportedInputError(f"image format must be png or jpeg, got {fmt!r}")
    ok, buf = cv2.imencode(ext, cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR), params)
    if not ok:  # pragma: no cover - OpenCV encodes any uint8 RGB array
        raise RuntimeError(f"{fmt} encoding failed")
    return buf.tobytes()
