"""The motion-compensated update: registration recovers a known camera motion, the texture follows a panning
camera without drift, and the re-encoding goes where the camera does not explain the picture."""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch

from foveate.core.texture import encode_array
from foveate.video import VideoPredictor, register
from foveate.video import motion as video_motion

from .common import CPU, panned_clip, smooth_texture


def test_register_recovers_a_known_similarity_transform():
    grey = cv2.cvtColor(smooth_texture(90, 120, seed=4), cv2.COLOR_RGB2GRAY).astype(np.float32)
    head = np.dstack([np.ones_like(grey), grey])
    angle, scale, shift = math.radians(1.5), 1.02, (1.7, -0.8)
    cy, cx = 45.0, 60.0
    truth = cv2.getRotationMatrix2D((cx, cy), math.degrees(angle), scale)
    truth[:, 2] += shift  # frame cell coordinates -> canvas coordinates
    frame = cv2.warpAffine(grey, truth, (120, 90), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
    identity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    got = register(head, frame[10:-10, 10:-10], then_shift(identity, 10.0), iterations=8, step=1)
    want = then_shift(truth, 10.0)
    ys, xs = np.mgrid[0:70:10, 0:100:10]
    pts = np.stack([xs.ravel(), ys.ravel(), np.ones(xs.size)])
    assert np.abs(got @ pts - want @ pts).max() < 0.1  # cells, over the whole frame


def then_shift(m: np.ndarray, d: float) -> np.ndarray:
    """``m`` for a frame cropped by ``d`` cells on the top and left."""
    return np.hstack([m[:, :2], (m[:, 2] + m[:, :2] @ np.array([d, d]))[:, None]])


def test_motion_compensation_follows_a_panning_camera():
    frames = panned_clip(10)
    pred = VideoPredictor(preset="fast", device="cpu")
    moving = pred.init_state(keyframe_interval=100)
    assert moving.config.motion_compensated and moving.config.threshold == 8.0
    first = None
    for i, f in enumerate(frames):
        st = pred.add_frame(moving, f)
        if i == 0:
            assert st.keyframe and st.camera is None
            first = encode_array(f, moving.encode_config, CPU)
            continue
        assert not st.keyframe and abs(st.camera["scale"] - 1.0) < 0.01 and abs(st.camera["rotation"]) < 0.5
        # the camera since the keyframe (content moves by -step px per frame): anchored, so no drift
        since_key = video_motion._camera_stats(moving._camera, moving._layout.grid, 16)
        assert abs(since_key["dx"] + 2.5 * i) < 0.5 and abs(since_key["dy"] + 1.25 * i) < 0.5, (i, since_key)
        assert st.reencoded_share <= moving.config.reencode_budget + 1e-9
    truth = encode_array(frames[-1], moving.encode_config, CPU)
    names = [c for c in truth.channels if c not in ("prev_relevance", "prev_saliency", "fixations", "motion")]
    idx = [truth.channels.index(c) for c in names]
    got, want, old = (t.mean[0][..., idx].float() for t in (moving.texture, truth, first))
    err, unmoved = float((got - want).abs().mean()), float((old - want).abs().mean())
    assert err < 0.02 and err < unmoved / 3, (err, unmoved)  # close to the frame's own encode; not the stale one


def test_motion_compensation_reencodes_what_the_camera_does_not_explain():
    """An object moving against the panning background is where the re-encoding goes; the budget caps it."""
    frames = panned_clip(6)
    for t, f in enumerate(frames):
        f[60:110, 40 + 12 * t : 90 + 12 * t] = (240, 20, 20)
    pred = VideoPredictor(preset="fast", device="cpu")
    roomy, default = pred.init_state(keyframe_interval=100, reencode_budget=0.6), pred.init_state(keyframe_interval=100)
    for f in frames:
        st = pred.add_frame(roomy, f)
        sd = pred.add_frame(default, f)
        assert not st.keyframe or st.index == 0
        assert sd.index == 0 or sd.reencoded_share <= default.config.reencode_budget + 1e-9  # here: ~one tile
    truth = encode_array(frames[-1], roomy.encode_config, CPU)
    r = truth.channels.index("r")
    now = (slice(4, 6), slice(7, 9))  # tiles inside the object on the last frame (x 100-150, y 60-110)
    then_ = (slice(4, 6), slice(3, 5))  # inside where it was on the keyframe (x 40-90) moved by the camera (-12 px)
    for box in (now, then_):
        assert torch.allclose(roomy.texture.mean[0][box + (r,)].float(), truth.mean[0][box + (r,)].float(), atol=0.03)
    assert 0 < st.reencoded_share < 0.6
