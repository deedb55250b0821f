"""Generated clips and checks the video tests share (NumPy frames; an mp4 written by OpenCV)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch

from foveate.core import ops
from foveate.core.texture import compute_channels, encode_array

CPU = torch.device("cpu")


def background(h: int, w: int, seed: int = 0, block: int = 4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 256, (h // block + 1, w // block + 1, 3), dtype=np.uint8)
    return np.ascontiguousarray(np.repeat(np.repeat(base, block, 0), block, 1)[:h, :w])


def clip(n: int = 12, h: int = 200, w: int = 330) -> list[np.ndarray]:
    """A moving red box on a textured background (sizes not multiples of 16: partial border tiles), a one-pixel
    change far away, a chroma-only change, a small global brightness step, and a scene cut and back."""
    bg = background(h, w)
    frames = []
    for t in range(n):
        f = bg.copy()
        x = 12 + 9 * t
        f[50:80, x : x + 24] = (250, 30, 30)
        if t >= 3:
            f[150, 300] = (0, 0, 0)  # one pixel, far from the box
        if t == 5:
            f[10:30, 200:240] = f[10:30, 200:240, ::-1]  # colours swapped: same layout, other chroma
        if t == 7:
            f = np.clip(f.astype(np.int16) + 3, 0, 255).astype(np.uint8)
        if t == 9:
            f = np.ascontiguousarray(f[::-1, ::-1])  # a cut ...
        frames.append(f)  # ... and back at t == 10
    return frames


def from_scratch(state):
    """The texture encode_array makes of the session's reference and inputs, and its float32 masters."""
    inputs = state.encode_inputs()
    tex = encode_array(state.reference, state.encode_config, CPU, frame=inputs)
    x0, _, _, _, _ = compute_channels(state.reference, state.encode_config, inputs)
    h, w = state.reference.shape[:2]
    means, maxes, _ = ops.build_mips(x0, ops.coverage0(h, w, state.encode_config.patch_size), tex.num_levels)
    return tex, means, maxes


def assert_same_texture(state, atol32: float = 1e-5):
    tex, means, maxes = from_scratch(state)
    got = state.texture
    assert got.channels == tex.channels and got.level_shapes == tex.level_shapes and got.absent == tex.absent
    for lvl in range(tex.num_levels):  # every channel, every level, mean and max
        for kind, a, b in (("mean", got.mean[lvl], tex.mean[lvl]), ("max", got.max[lvl], tex.max[lvl])):
            diff = (a.float() - b.float()).abs()
            worst = tuple(int(v) for v in torch.nonzero(diff == diff.max())[0])
            assert float(diff.max()) <= 1e-3, (lvl, kind, tex.channels[worst[-1]], worst, float(diff.max()))
        assert np.abs(state._means[lvl] - means[lvl]).max() <= atol32
        assert np.abs(state._maxes[lvl] - maxes[lvl]).max() <= atol32


def smooth_texture(h: int, w: int, seed: int = 0) -> np.ndarray:
    """(h, w, 3) uint8: blurred noise with structure at several scales (registration needs gradients)."""
    rng = np.random.default_rng(seed)
    img = np.zeros((h, w, 3), np.float32)
    for sigma, amp in ((1.5, 60.0), (4.0, 90.0), (12.0, 120.0)):
        img += cv2.GaussianBlur(rng.normal(0, 1, (h, w, 3)).astype(np.float32), (0, 0), sigma) * amp
    return np.clip(img + 128, 0, 255).astype(np.uint8)


def panned_clip(n: int, h: int = 208, w: int = 304, step: tuple[float, float] = (2.5, 1.25)) -> list[np.ndarray]:
    """A camera panning over a larger picture by ``step`` px per frame (sub-pixel: bilinear resampling)."""
    scene = smooth_texture(h + 80, w + 80)
    out = []
    for t in range(n):
        m = np.array([[1.0, 0.0, -(20 + step[0] * t)], [0.0, 1.0, -(20 + step[1] * t)]])
        out.append(cv2.warpAffine(scene, m, (w, h), flags=cv2.INTER_LINEAR))
    return out


def moving_box(n: int, step: int = 8, h: int = 256, w: int = 384):
    bg = background(h, w, seed=5, block=8)
    out = []
    for t in range(n):
        f = bg.copy()
        x = 40 + step * t
        f[100:164, x : x + 64] = background(64, 64, seed=9, block=4)  # a textured box flow can follow
        out.append(f)
    return out


def smooth_scene(n: int, step: int, h: int = 256, w: int = 384) -> list[np.ndarray]:
    """A patterned 64x64 object moving ``step`` px right per frame over a smooth background (structure at several
    scales, as in real video: optical flow can follow it)."""
    rng = np.random.default_rng(5)
    bg = cv2.resize(
        rng.integers(0, 256, (h // 16, w // 16, 3), dtype=np.uint8), (w, h), interpolation=cv2.INTER_NEAREST
    )
    bg = cv2.GaussianBlur(bg, (0, 0), 3)
    yy, xx = np.mgrid[0:64, 0:64]
    obj = (
        np.stack(
            [128 + 100 * np.sin(xx / 5.0) * np.cos(yy / 7.0), 60 + 80 * ((xx // 16 + yy // 16) % 2), 200 - 2 * yy], -1
        )
        .clip(0, 255)
        .astype(np.uint8)
    )
    out = []
    for t in range(n):
        f = bg.copy()
        f[96:160, 32 + step * t : 96 + step * t] = obj
        out.append(f)
    return out


def write_mp4(path: Path, frames: list[np.ndarray], fps: float = 10.0) -> Path:
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    assert writer.isOpened()
    for f in frames:
        writer.write(cv2.cvtColor(f, cv2.COLOR_RGB2BGR))
    writer.release()
    return path
