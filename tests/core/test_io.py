"""Image input: formats, modes, EXIF, in-memory types, and every kind of bad file."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from foveate import ImageDecodeError, ImageTooLargeError, UnsupportedInputError, load_image

RGB = np.dstack(
    [
        np.tile(np.arange(40, dtype=np.uint8) * 6, (30, 1)),
        np.tile(np.arange(30, dtype=np.uint8)[:, None] * 8, (1, 40)),
        np.full((30, 40), 77, np.uint8),
    ]
)


def _encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


@pytest.mark.parametrize(
    "fmt,lossless", [("PNG", True), ("BMP", True), ("TIFF", True), ("WEBP", True), ("JPEG", False)]
)
def test_formats_round_trip(tmp_path, fmt, lossless):
    kw = {"lossless": True} if fmt == "WEBP" else {}
    path = tmp_path / f"x.{fmt.lower()}"
    path.write_bytes(_encode(Image.fromarray(RGB), fmt, **kw))
    out = load_image(path)
    assert out.shape == (30, 40, 3) and out.dtype == np.uint8 and out.flags["C_CONTIGUOUS"]
    if lossless:
        np.testing.assert_array_equal(out, RGB)
    else:
        assert np.abs(out.astype(int) - RGB).mean() < 6


def test_grey_palette_and_bilevel():
    grey = Image.fromarray(RGB[..., 0])
    np.testing.assert_array_equal(load_image(_encode(grey, "PNG")), np.repeat(RGB[..., :1], 3, -1))
    pal = Image.fromarray(RGB).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    np.testing.assert_array_equal(load_image(_encode(pal, "PNG")), np.asarray(pal.convert("RGB")))
    bw = Image.fromarray(RGB[..., 0] > 100)
    out = load_image(_encode(bw, "PNG"))
    assert set(np.unique(out)) <= {0, 255}


def test_alpha_composited_on_white():
    rgba = np.zeros((10, 10, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[:, :5, 3] = 255  # left opaque red-ish, right fully transparent
    out = load_image(_encode(Image.fromarray(rgba, "RGBA"), "PNG"))
    np.testing.assert_array_equal(out[0, 0], [200, 0, 0])
    np.testing.assert_array_equal(out[0, 9], [255, 255, 255])
    la = Image.fromarray(rgba[..., [0, 3]], "LA")
    np.testing.assert_array_equal(load_image(_encode(la, "PNG"))[0, 9], [255, 255, 255])


def test_palette_transparency():
    im = Image.new("P", (4, 4), 0)
    im.putpalette([10, 20, 30, 200, 0, 0] + [0] * 762)
    im.putpixel((0, 0), 1)
    out = load_image(_encode(im, "PNG", transparency=0))
    np.testing.assert_array_equal(out[0, 0], [200, 0, 0])
    np.testing.assert_array_equal(out[3, 3], [255, 255, 255])


def test_cmyk_jpeg_and_tiff():
    cmyk = Image.new("CMYK", (8, 8), (0, 255, 255, 0))  # pure red in CMYK
    for fmt in ("JPEG", "TIFF"):
        out = load_image(_encode(cmyk, fmt))
        assert out.shape == (8, 8, 3)
        assert out[..., 0].mean() > 200 and out[..., 1].mean() < 60 and out[..., 2].mean() < 60


def test_16bit_grey_scaled_not_clipped():
    g16 = (np.arange(64, dtype=np.uint32).reshape(8, 8) * 1000).astype(np.uint16)
    for fmt in ("PNG", "TIFF"):
        out = load_image(_encode(Image.fromarray(g16), fmt))
        expected = np.rint(g16.astype(np.float64) * 255 / 65535).astype(np.uint8)
        assert np.abs(out[..., 0].astype(int) - expected).max() <= 1
        assert out[..., 0].max() > 200  # a clipping conversion would saturate everything above 255 to 255
        assert len(np.unique(out[..., 0])) > 50


def test_exif_orientation_applied():
    im = Image.fromarray(RGB)  # 40 wide, 30 tall
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 CW for display
    out = load_image(_encode(im, "JPEG", exif=exif.tobytes(), quality=95))
    assert out.shape == (40, 30, 3)


def test_in_memory_inputs():
    np.testing.assert_array_equal(load_image(Image.fromarray(RGB)), RGB)
    np.testing.assert_array_equal(load_image(RGB), RGB)
    np.testing.assert_array_equal(load_image(RGB[..., 0]), np.repeat(RGB[..., :1], 3, -1))
    chw = torch.from_numpy(RGB).permute(2, 0, 1)
    np.testing.assert_array_equal(load_image(chw), RGB)
    np.testing.assert_array_equal(load_image(chw[None]), RGB)
    np.testing.assert_array_equal(load_image(chw.float() / 255.0), RGB)
    np.testing.assert_array_equal(load_image(RGB.astype(np.float32) / 255.0), RGB)
    np.testing.assert_array_equal(load_image(bytearray(_encode(Image.fromarray(RGB), "PNG"))), RGB)


def test_float_nan_and_bool_arrays():
    a = np.full((4, 4), np.nan, np.float32)
    assert (load_image(a) == 0).all()
    assert (load_image(np.ones((4, 4), bool)) == 255).all()


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((0, 5, 3), np.uint8),
        np.zeros((5, 5, 2), np.uint8),
        np.zeros((2, 3, 4, 5), np.uint8),
        b"not an image object"[:0],
    ],
)
def test_unusable_arrays(bad):
    with pytest.raises((UnsupportedInputError, ImageDecodeError)):
        load_image(bad)


def test_unsupported_type():
    with pytest.raises(UnsupportedInputError, match="cannot read an image from"):
        load_image(12345)


def test_zero_byte_missing_directory_and_non_image(tmp_path):
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    with pytest.raises(ImageDecodeError, match="empty"):
        load_image(empty)
    with pytest.raises(ImageDecodeError, match="no such file"):
        load_image(tmp_path / "missing.png")
    with pytest.raises(ImageDecodeError, match="directory"):
        load_image(tmp_path)
    text = tmp_path / "notes.png"
    text.write_text("this is not a picture\n" * 10)
    with pytest.raises(ImageDecodeError, match="not a readable image"):
        load_image(text)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "TIFF"])
def test_truncated_files(tmp_path, fmt):
    rng = np.random.default_rng(1)
    data = _encode(Image.fromarray(rng.integers(0, 255, (200, 200, 3), dtype=np.uint8)), fmt)
    path = tmp_path / f"cut.{fmt.lower()}"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageDecodeError):
        load_image(path)


def _png_with_declared_size(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    )


def test_decompression_bomb_header_rejected_before_decoding():
    data = _png_with_declared_size(100_000, 100_000)
    with pytest.raises(ImageTooLargeError, match="too large"):
        load_image(data)
    data = _png_with_declared_size(10_000, 10_000)  # below Pillow's own limit: our header check stops it
    with pytest.raises(ImageTooLargeError, match="10000x10000"):
        load_image(data)


def test_pixel_limit_is_configurable():
    data = _encode(Image.fromarray(RGB), "PNG")
    with pytest.raises(ImageTooLargeError, match="max_pixels|--max-pixels"):
        load_image(data, max_pixels=1000)
    assert load_image(data, max_pixels=1200).shape == (30, 40, 3)
    with pytest.raises(ImageTooLargeError):
        load_image(np.zeros((100, 100, 3), np.uint8), max_pixels=9999)


def test_tiny_and_extreme_aspect():
    assert load_image(np.zeros((1, 1, 3), np.uint8)).shape == (1, 1, 3)
    assert load_image(_encode(Image.new("RGB", (10, 10000)), "PNG")).shape == (10000, 10, 3)
