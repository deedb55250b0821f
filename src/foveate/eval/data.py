"""Evaluation data: a folder with ``queries.jsonl``, one object per line::

    {"image": "images/a.png", "query": "What is the total?", "boxes": [[x0, y0, x1, y1], ...]}

in pixels of the stored image.  Optional keys: ``text_heights`` (one per box: the height of a line of its text,
used instead of the box height for legibility) and ``answer_text`` (one string per box, or one for all: what
an OCR of the selection should read there).  Other keys are kept as metadata (``--group-by``).

:func:`read_queries` parses every line; a malformed line (whatever it holds: nesting too deep, numbers too long, a lone
surrogate), a missing or unreadable image, a box outside the image is a :class:`Problem` with its line number
(:func:`check_boxes`); the run goes on and the summary counts them.  A byte order mark before the first line is
skipped.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np

from ..core.errors import DatasetError
from .metrics import clip_boxes

QUERIES_FILE = "queries.jsonl"

#: box-size buckets: a query's mean ground-truth box area as a fraction of the image area, upper bounds
SIZE_BUCKETS = (("tiny <0.1%", 0.001), ("small 0.1-1%", 0.01), ("medium 1-10%", 0.1), ("large >=10%", math.inf))

#: every kind of :class:`Problem` and what it means (also written to eval.json)
PROBLEM_KINDS = {
    "json": "not a JSON object (or unreadable: nested too deep, a number too long, a string not valid Unicode)",
    "schema": "missing or malformed field",
    "image_missing": "image file not found",
    "image_unreadable": "image could not be decoded",
    "box_invalid": "empty box (x1 <= x0 or y1 <= y0), dropped",
    "box_outside": "box entirely outside the image, dropped",
    "box_clipped": "box partly outside the image, clipped",
    "no_boxes": "no usable box left, query skipped",
    "budget": "budget below the coarsest tiles (a quadtree row), the query skipped at that budget for every row",
    "ocr": "OCR failed on an image",
}


@dataclass
class Problem:
    """Something wrong with one line of ``queries.jsonl`` (``line`` is 1-based; ``None`` for the whole file)."""

    line: int | None
    kind: str
    message: str
    skipped: bool  # the query (or, for ``budget``, that budget of it) is not evaluated
    image: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else QUERIES_FILE
        return f"{where}: {self.message}"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class EvalQuery:
    """One valid line: the query and its ground truth (boxes float64 (N, 4), in source pixels)."""

    line: int
    image: str
    text: str
    boxes: np.ndarray
    text_heights: np.ndarray | None = None
    #: (answer, box it should be read in -- ``None``: any of the query's boxes)
    answers: list[tuple[str, tuple[float, float, float, float] | None]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


class _LineError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


#: how deep a line's JSON may nest (a query line needs 3: object, boxes, box); deeper is a ``json`` problem, so that
#: what is kept as metadata can be written back (eval.json, eval.md) without running out of stack
MAX_DEPTH = 32


def _finite(v: Any) -> float | None:
    """``v`` as a finite float, ``None`` when it is no number (a bool, a string ...), not finite or too large for a
    float (an integer of hundreds of digits)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _numbers(value: Any, what: str) -> list[float]:
    vals = [_finite(v) for v in value] if isinstance(value, (list, tuple)) else [None]
    if any(v is None for v in vals):
        raise _LineError("schema", f"{what} must be a list of finite numbers, got {json.dumps(value)[:80]}")
    return [v for v in vals if v is not None]


def _check_tree(obj: Any) -> None:
    """Refuse a value nested deeper than :data:`MAX_DEPTH`, or holding a string that is not valid Unicode (a lone
    surrogate such as ``"\\ud800"``, which no UTF-8 file can hold): walked without recursion."""
    stack = [(obj, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise _LineError("json", "holds a string that is not valid Unicode (a lone surrogate escape)") from None
        elif isinstance(v, (dict, list)):
            if depth > MAX_DEPTH:
                raise _LineError("json", f"nested deeper than {MAX_DEPTH} levels")
            items = [*v.keys(), *v.values()] if isinstance(v, dict) else v
            stack += [(x, depth + 1) for x in items]


def parse_query_line(raw: str, line: int) -> EvalQuery:
    """One ``queries.jsonl`` line -> :class:`EvalQuery`; raises ``_LineError`` with a kind and a message."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _LineError("json", f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise _LineError("json", f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise _LineError("json", f"not readable JSON ({str(exc).split(';')[0]})") from None
    if not isinstance(obj, dict):
        raise _LineError("json", f"expected a JSON object, got {type(obj).__name__}")
    _check_tree(obj)
    missing = [k for k in ("image", "query", "boxes") if k not in obj]
    if missing:
        raise _LineError("schema", f"missing key(s) {', '.join(missing)} (need image, query, boxes)")
    image, text, boxes = obj["image"], obj["query"], obj["boxes"]
    if not isinstance(image, str) or not image.strip() or "\0" in image:
        raise _LineError("schema", "'image' must be a non-empty relative path")
    if PurePosixPath(image).is_absolute() or PureWindowsPath(image).is_absolute() or PureWindowsPath(image).drive:
        raise _LineError("schema", f"'image' must be a path inside the data folder, got the absolute path {image!r}")
    if ".." in PurePosixPath(image.replace("\\", "/")).parts:
        raise _LineError("schema", f"'image' must be a path inside the data folder, got {image!r} (it climbs out: ..)")
    if not isinstance(text, str):
        raise _LineError("schema", f"'query' must be a string, got {type(text).__name__}")
    if not isinstance(boxes, list) or not boxes:
        raise _LineError("schema", "'boxes' must be a non-empty list of [x0, y0, x1, y1]")
    rows = []
    for i, b in enumerate(boxes):
        vals = _numbers(b, f"box {i}")
        if len(vals) != 4:
            raise _LineError("schema", f"box {i} must have 4 numbers [x0, y0, x1, y1], got {len(vals)}")
        rows.append(vals)
    arr = np.array(rows, np.float64)
    heights = None
    if obj.get("text_heights") is not None:
        heights = np.array(_numbers(obj["text_heights"], "'text_heights'"), np.float64)
        if len(heights) != len(arr):
            raise _LineError("schema", f"{len(heights)} text_heights for {len(arr)} boxes (need one per box)")
        if (heights <= 0).any():
            raise _LineError("schema", "text_heights must be positive")
    answers: list = []
    ans = obj.get("answer_text")
    if ans is not None:
        if isinstance(ans, str):
            ans = [ans]
        if not isinstance(ans, list) or not all(isinstance(a, str) for a in ans):
            raise _LineError("schema", "'answer_text' must be a string or a list of strings")
        aligned = len(ans) == len(arr)
        answers = [(a, tuple(arr[i]) if aligned else None) for i, a in enumerate(ans)]
    meta = {k: v for k, v in obj.items() if k not in ("image", "query", "boxes", "text_heights", "answer_text")}
    return EvalQuery(line, image, text, arr, heights, answers, meta)


def read_queries(data_dir: str | Path) -> tuple[list[EvalQuery], list[Problem], int]:
    """Parse ``DATA_DIR/queries.jsonl``.  Returns (valid queries, problems, number of non-blank lines)."""
    path = Path(data_dir) / QUERIES_FILE
    if not Path(data_dir).is_dir():
        raise DatasetError(f"{data_dir} is not a folder; pass a folder that holds {QUERIES_FILE}")
    if not path.is_file():
        raise DatasetError(
            f"no {QUERIES_FILE} in {data_dir}; a data set is a folder with {QUERIES_FILE} "
            '(one {"image", "query", "boxes"} object per line) and its images'
        )
    queries, problems, n = [], [], 0
    # utf-8-sig: a byte order mark (as some editors write) is no part of the first line
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for i, raw in enumerate(f, 1):
            raw = raw.lstrip("\ufeff")  # and one that starts a file appended to it
            if not raw.strip():
                continue
            n += 1
            try:
                queries.append(parse_query_line(raw, i))
            except _LineError as exc:
                problems.append(Problem(i, exc.kind, str(exc), True))
    return queries, problems, n


def check_boxes(q: EvalQuery, image_size: tuple[int, int]) -> tuple[EvalQuery | None, list[Problem]]:
    """Clip ``q``'s boxes to the image (H, W): a box partly outside is clipped, an empty or wholly outside box
    is dropped (with its text height), and a query with no box left is skipped.  Each case is a Problem."""
    h, w = image_size
    keep, problems = [], []
    for i, (x0, y0, x1, y1) in enumerate(q.boxes):
        desc = f"box {i} [{x0:g}, {y0:g}, {x1:g}, {y1:g}]"
        if x1 <= x0 or y1 <= y0:
            problems.append(
                Problem(q.line, "box_invalid", f"{desc} is empty (need x0 < x1, y0 < y1); dropped", False, q.image)
            )
        elif x1 <= 0 or y1 <= 0 or x0 >= w or y0 >= h:
            problems.append(
                Problem(
                    q.line, "box_outside", f"{desc} lies outside the {w}x{h} image {q.image}; dropped", False, q.image
                )
            )
        else:
            if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
                problems.append(
                    Problem(
                        q.line,
                        "box_clipped",
                        f"{desc} extends beyond the {w}x{h} image {q.image}; clipped",
                        False,
                        q.image,
                    )
                )
            keep.append(i)
    if not keep:
        problems.append(Problem(q.line, "no_boxes", "no usable box left; query skipped", True, q.image))
        return None, problems
    boxes = clip_boxes(q.boxes[keep], (h, w))
    heights = q.text_heights[keep] if q.text_heights is not None else None
    return dataclasses.replace(q, boxes=boxes, text_heights=heights), problems


def size_bucket(q: EvalQuery, image_size: tuple[int, int]) -> tuple[str, float]:
    """(bucket name, mean box area / image area) of a query (boxes already clipped)."""
    h, w = image_size
    frac = float(np.mean((q.boxes[:, 2] - q.boxes[:, 0]) * (q.boxes[:, 3] - q.boxes[:, 1]))) / float(h * w)
    for name, upper in SIZE_BUCKETS:
        if frac < upper:
            return name, frac
    return SIZE_BUCKETS[-1][0], frac


#: ``split_of``'s shares of images for train and validation; the rest is the test split.
SPLIT_SHARES = (0.6, 0.2)
SPLITS = ("train", "val", "test")


def split_of(set_name: str, image: str, seed: int = 0) -> str:
    """Which split an image belongs to: ``train`` (60 %), ``val`` (20 %) or ``test`` (20 %), by a hash of
    (seed, set name, image path) -- a split by image, never by query, stable under reordering or adding images,
    the same in ``foveate train`` and ``foveate eval --split``."""
    import hashlib

    h = int(hashlib.sha256(f"{seed}:{set_name}:{image}".encode()).hexdigest()[:12], 16) / 16**12
    return "train" if h < SPLIT_SHARES[0] else ("val" if h < SPLIT_SHARES[0] + SPLIT_SHARES[1] else "test")
