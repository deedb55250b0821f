"""Pixels of a plan: each picture cut from the image and resized to the size it is sent at (:func:`cut_pictures`),
what the model then sees after the provider's own resize (:func:`seen_view`), and that view back at the source
size of its box (:func:`source_view`: what the OCR answer check reads, like the evaluation's mosaic and uniform
image)."""

from __future__ import annotations

import cv2
import numpy as np

from .compose import SEPARATOR_GREY
from .picture import Picture
from .plan import Plan


def _resize(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``img`` at ``size`` (w, h): area interpolation to shrink, bilinear to enlarge; the array itself when equal."""
    w, h = size
    if (img.shape[1], img.shape[0]) == (w, h):
        return img
    shrink = w * h < img.shape[0] * img.shape[1]
    return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def cut_picture(image: np.ndarray, pic: Picture) -> np.ndarray:
    """The RGB picture as sent: ``pic.box`` of ``image`` (H, W, 3) at ``pic.sent`` (w, h); a composite: its parts on a
    grey canvas, each at its place and size."""
    if pic.parts:
        canvas = np.full((pic.sent[1], pic.sent[0], 3), SEPARATOR_GREY, np.uint8)
        for part in pic.parts:
            (x, y), (w, h) = part.at, part.size
            x0, y0, x1, y1 = part.box
            canvas[y : y + h, x : x + w] = _resize(image[y0:y1, x0:x1], (w, h))
        return canvas
    x0, y0, x1, y1 = pic.box
    return np.ascontiguousarray(_resize(image[y0:y1, x0:x1], pic.sent))


def cut_pictures(image: np.ndarray, plan: Plan) -> list[np.ndarray]:
    """Every picture of ``plan`` as sent, in plan order."""
    return [cut_picture(image, p) for p in plan.pictures]


def seen_view(sent: np.ndarray, pic: Picture) -> np.ndarray:
    """What the model sees of a sent picture: resized to ``pic.seen`` (the provider's own resize)."""
    return _resize(sent, pic.seen)


def source_view(image: np.ndarray, pic: Picture) -> np.ndarray:
    """The picture as the model sees it, back at the source size of its box (bilinear): where the provider shrank
    it, the detail is gone, as in the evaluation's uniform image.  A composite has one view per part
    (:meth:`Picture.views`)."""
    x0, y0, x1, y1 = pic.box
    return _resize(seen_view(cut_picture(image, pic), pic), (x1 - x0, y1 - y0))
