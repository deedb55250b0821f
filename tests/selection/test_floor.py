"""The uniform floor as a promise: on a photo where a class name matches a stray line of print (a small label far
from the object), the shipped gate falls back to the uniform layout at every budget, so the selection is never worse
than the uniform resize on the hit metric; without the gate (``floor="off"``) the selection foveates.  The picture is
drawn here and read by the real OCR."""

from __future__ import annotations

import numpy as np
import pytest

BUDGETS = (64, 144, 273, 576)
OBJECT = (330, 200, 390, 240)  # x0, y0, x1, y1: the "dog"


@pytest.fixture(scope="module")
def stray_label_photo():
    import cv2

    import foveate

    rng = np.random.default_rng(0)
    img = (rng.normal(0, 12, (480, 640, 3)) + np.array([90, 140, 80])).clip(0, 255).astype(np.uint8)
    img = cv2.GaussianBlur(img, (5, 5), 0)
    x0, y0, x1, y1 = OBJECT
    outline = np.array([[x0, y1], [x0 + 12, y0 + 8], [x0 + 30, y0], [x1, y0 + 14], [x1 - 8, y1]], np.int32)
    cv2.fillPoly(img, [outline], (150, 90, 40))
    for k in range(6):  # fur
        cv2.line(img, (x0 + 6 + 8 * k, y0 + 10), (x0 + 2 + 8 * k, y1 - 4), (90, 50, 20), 2)
    cv2.rectangle(img, (10, 452), (110, 470), (245, 245, 245), -1)  # a small sign in the far corner
    cv2.putText(img, "DOG PARK", (14, 465), cv2.FONT_HERSHEY_SIMPLEX, 0.4, (10, 10, 10), 1, cv2.LINE_AA)
    return foveate.encode(img, device="cpu")


def _hit(boxes, scales, size) -> bool:
    from foveate.eval.metrics import query_metrics

    return bool(query_metrics(boxes, None, np.array([OBJECT], float), size, None, token_scales=scales).hit)


def test_the_gate_sees_a_stray_line_and_a_name(stray_label_photo):
    from foveate.channels.text.group import stored_lines
    from foveate.query.query import Query
    from foveate.query.terms import query_maps
    from foveate.selection.floor import floor_features
    from foveate.weights import load_weights

    tex = stray_label_photo
    assert any("DOG" in ln.text.upper() for ln in stored_lines(tex) or ())  # the real OCR reads the sign
    q = Query.coerce("dog")
    lines = query_maps(tex, q, load_weights("default")).lines
    assert lines is not None and lines.top > 0.3  # the class name pulls the ranker to the sign
    f = floor_features(tex, q, lines, 64)
    assert f["short_query"] == 1.0
    assert f["stray_lines"] == pytest.approx(lines.top, abs=0.05)  # the sign is small and far from the object
    question = floor_features(tex, Query.coerce("What does the sign in the corner say?"), lines, 64)
    assert question["short_query"] == 0.0


@pytest.mark.parametrize("budget", BUDGETS)
def test_a_class_name_never_does_worse_than_the_uniform_layout(stray_label_photo, budget):
    from foveate.selection import select
    from foveate.selection.uniform import uniform_grid

    tex = stray_label_photo
    ub, us, _ = uniform_grid(tex.image_size, tex.patch_size, budget)
    uniform_hit = _hit(ub, np.full(len(ub), us), tex.image_size)
    sel = select(tex, "dog", budget)
    assert _hit(sel.boxes, sel.scales, tex.image_size) >= uniform_hit
    # the promise is the gate's doing: it falls back, and says so; without it the selection foveates
    assert sel.layout == "uniform" and any(n.startswith("uniform floor") for n in sel.notes)
    assert select(tex, "dog", budget, floor="off").layout == "pyramid"
