"""``foveate eval``: on annotated data, do the selected tokens cover what the query asks about -- and how do
simple baselines at the same budget do on the same queries?

A data set is a folder with ``queries.jsonl``, one object per line::

    {"image": "images/a.png", "query": "What is the total?", "boxes": [[x0, y0, x1, y1], ...]}

in pixels of the stored image.  Optional keys: ``text_heights`` (one per box: the height of a line of its text,
used instead of the box height for legibility) and ``answer_text`` (one string per box, or one for all: what
an OCR of the selection should read there).  Other keys are kept as metadata (``--group-by``).

The stage, top to bottom:

* **data** -- :func:`read_queries` parses every line; a malformed line, a missing or unreadable image, a box
  outside the image is a :class:`Problem` with its line number; the run goes on and the summary counts them.
* **baselines** -- pure functions from geometry to :class:`Tokens` (boxes + scale per token): *uniform* (the
  whole image resized to fit the budget), *random* (level-0 tiles plus the top-k gist), *oracle* (the same
  selection procedure driven by the ground-truth boxes); *query-blind* is foveate with no query, and *full*
  (every level-0 tile, over any budget) is the reference the metric itself allows.
* **OCR answer check** -- :func:`answer_found`: a normalised, location-aware match of ``answer_text`` in what
  an OCR reads from the mosaic, the full image and the uniform image (needs ``foveate.query.text``; otherwise the
  column is reported as unavailable).
* **runner** -- :func:`run_eval`: each image is encoded once and serves all its queries, budgets, baselines.
* **aggregation and outputs** -- :func:`aggregate`, :func:`render_markdown`, :func:`print_tables`,
  :func:`write_outputs` (JSON with every record, markdown, optional matplotlib plots).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
import unicodedata
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .core.config import EncodeConfig, SelectConfig, replace_config
from .core.errors import BudgetError, ConfigError, DatasetError, FoveateError
from .metrics import DEFAULT_HIT_THRESHOLD, DEFAULT_MIN_PX, clip_boxes, legible_level, query_metrics
from .selection import Selection, quadtree_select, tile_geometry, topk_split

QUERIES_FILE = "queries.jsonl"

#: every comparison row, in table order (``foveate:<variant>`` rows follow ``foveate``)
BASELINES = ("uniform", "random", "query_blind", "oracle", "full")
METHOD_LABELS = {"foveate": "foveate", "uniform": "uniform", "random": "random", "query_blind": "query-blind",
                 "oracle": "oracle", "full": "full image"}
METHOD_HELP = {
    "foveate": "foveate with the query",
    "uniform": "the whole image resized to fit the budget on a P x P grid (what a standard VLM does)",
    "random": "random level-0 tiles plus the same gist, mean of the seeds",
    "query_blind": "foveate with the query ignored (saliency only)",
    "oracle": "the same selection procedure driven by the ground-truth boxes (an upper reference at this budget)",
    "full": "every level-0 tile: the reference, over any budget",
}

#: the methods whose picture is read by OCR: foveate's mosaic, the uniform image, the full image
OCR_METHODS = ("foveate", "uniform", "full")

#: box-size buckets: a query's mean ground-truth box area as a fraction of the image area, upper bounds
SIZE_BUCKETS = (("tiny <0.1%", 0.001), ("small 0.1-1%", 0.01), ("medium 1-10%", 0.1), ("large >=10%", math.inf))

#: every kind of :class:`Problem` and what it means (also written to eval.json)
PROBLEM_KINDS = {
    "json": "not a JSON object",
    "schema": "missing or malformed field",
    "image_missing": "image file not found",
    "image_unreadable": "image could not be decoded",
    "box_invalid": "empty box (x1 <= x0 or y1 <= y0), dropped",
    "box_outside": "box entirely outside the image, dropped",
    "box_clipped": "box partly outside the image, clipped",
    "no_boxes": "no usable box left, query skipped",
    "budget": "budget below the coarsest tiles (quadtree), skipped at that budget",
    "ocr": "OCR failed on an image",
}


# ----------------------------------------------------------------------------------------------------------
# Data


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


def _numbers(value: Any, what: str) -> list[float]:
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        raise _LineError("schema", f"{what} must be a list of finite numbers, got {json.dumps(value)[:80]}")
    return [float(v) for v in value]


def parse_query_line(raw: str, line: int) -> EvalQuery:
    """One ``queries.jsonl`` line -> :class:`EvalQuery`; raises ``_LineError`` with a kind and a message."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _LineError("json", f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise _LineError("json", f"expected a JSON object, got {type(obj).__name__}")
    missing = [k for k in ("image", "query", "boxes") if k not in obj]
    if missing:
        raise _LineError("schema", f"missing key(s) {', '.join(missing)} (need image, query, boxes)")
    image, text, boxes = obj["image"], obj["query"], obj["boxes"]
    if not isinstance(image, str) or not image.strip():
        raise _LineError("schema", "'image' must be a non-empty relative path")
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
        raise DatasetError(f"no {QUERIES_FILE} in {data_dir}; a data set is a folder with {QUERIES_FILE} "
                           "(one {\"image\", \"query\", \"boxes\"} object per line) and its images")
    queries, problems, n = [], [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, raw in enumerate(f, 1):
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
            problems.append(Problem(q.line, "box_invalid", f"{desc} is empty (need x0 < x1, y0 < y1); dropped",
                                    False, q.image))
        elif x1 <= 0 or y1 <= 0 or x0 >= w or y0 >= h:
            problems.append(Problem(q.line, "box_outside", f"{desc} lies outside the {w}x{h} image {q.image}; "
                                    "dropped", False, q.image))
        else:
            if x0 < 0 or y0 < 0 or x1 > w or y1 > h:
                problems.append(Problem(q.line, "box_clipped", f"{desc} extends beyond the {w}x{h} image "
                                        f"{q.image}; clipped", False, q.image))
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


# ----------------------------------------------------------------------------------------------------------
# Selections as the metrics see them, and the baselines (pure geometry)


@dataclass
class Tokens:
    """A set of tokens: boxes (K, 4) in source pixels and scales (K,) = source pixels per token pixel."""

    boxes: np.ndarray
    scales: np.ndarray

    def __len__(self) -> int:
        return int(len(self.scales))

    @classmethod
    def from_tiles(cls, tiles: Sequence[tuple[int, int, int]], image_size: tuple[int, int], patch: int,
                   grid0: tuple[int, int]) -> Tokens:
        arr = np.array(tiles, np.int64).reshape(-1, 3)
        boxes, _, _ = tile_geometry(arr[:, 0], arr[:, 1], arr[:, 2], image_size, patch, grid0)
        return cls(boxes.astype(np.float64), np.exp2(arr[:, 0].astype(np.float64)))

    @classmethod
    def from_selection(cls, sel: Selection) -> Tokens:
        return cls(sel.boxes.astype(np.float64), np.exp2(sel.levels.astype(np.float64)))


def uniform_scale(image_size: tuple[int, int], patch: int, budget: int) -> float:
    """The smallest downscale s >= 1 at which the image, resized to (H/s, W/s), fits in ``budget`` tiles of
    ``patch`` px: ``ceil(W / (s P)) * ceil(H / (s P)) <= budget``.  The tile count only changes where W/(sP)
    or H/(sP) is a whole number, so the answer is one of those breakpoints (or 1)."""
    h, w = image_size
    if budget < 1:
        raise BudgetError(f"budget must be at least 1 token, got {budget}")

    def count(s: float) -> int:
        return math.ceil(w / (s * patch) - 1e-9) * math.ceil(h / (s * patch) - 1e-9)

    cands = {1.0} | {side / (k * patch) for side in (w, h) for k in range(1, math.ceil(side / patch) + 1)}
    return min(s for s in cands if s >= 1.0 and count(s) <= budget)


def uniform_tokens(image_size: tuple[int, int], patch: int, budget: int) -> Tokens:
    """The uniform baseline's grid: tiles of ``s * patch`` source px (s from :func:`uniform_scale`)."""
    h, w = image_size
    s = uniform_scale(image_size, patch, budget)
    side = s * patch
    nx, ny = math.ceil(w / side - 1e-9), math.ceil(h / side - 1e-9)
    xs = np.minimum(np.arange(nx + 1) * side, w)
    ys = np.minimum(np.arange(ny + 1) * side, h)
    gx0, gy0 = np.meshgrid(xs[:-1], ys[:-1])
    gx1, gy1 = np.meshgrid(xs[1:], ys[1:])
    boxes = np.stack([gx0.ravel(), gy0.ravel(), gx1.ravel(), gy1.ravel()], -1)
    return Tokens(boxes, np.full(len(boxes), s))


def uniform_view(image: np.ndarray, scale: float) -> np.ndarray:
    """What the uniform baseline shows the VLM, back at the source size (for OCR, like the mosaic):
    area-downsampled by ``scale``, then bilinear upsampled.  (H, W, 3) uint8."""
    import cv2

    if scale <= 1.0:
        return image
    h, w = image.shape[:2]
    small = cv2.resize(image, (max(1, round(w / scale)), max(1, round(h / scale))), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


def random_tiles(shapes: list[tuple[int, int]], budget: int, gist: bool,
                 rng: np.random.Generator) -> list[tuple[int, int, int]]:
    """The random baseline: the top-k gist (when ``gist`` and it fits) plus distinct random level-0 tiles,
    ``min(budget, gist + all level-0 tiles)`` in all."""
    g, k = topk_split(shapes, budget, gist)
    gh, gw = shapes[0]
    idx = rng.choice(gh * gw, size=k, replace=False)
    return g + [(0, int(i) // gw, int(i) % gw) for i in idx]


def _tile_overlap(shape: tuple[int, int], side: int, boxes: np.ndarray) -> np.ndarray:
    """(gh, gw) float64: summed area of ``boxes`` (N, 4) inside each tile of a grid of ``side`` px tiles."""
    gh, gw = shape
    out = np.zeros(shape, np.float64)
    edges_y, edges_x = np.arange(gh) * side, np.arange(gw) * side
    for x0, y0, x1, y1 in boxes:
        fy = np.clip(np.minimum(edges_y + side, y1) - np.maximum(edges_y, y0), 0, None)
        fx = np.clip(np.minimum(edges_x + side, x1) - np.maximum(edges_x, x0), 0, None)
        out += np.outer(fy, fx)
    return out


def oracle_tiles(shapes: list[tuple[int, int]], patch: int, gt_boxes: np.ndarray, text_heights: np.ndarray | None,
                 config: SelectConfig, min_px: float = DEFAULT_MIN_PX) -> list[tuple[int, int, int]]:
    """A selection that knows the boxes, made by the same procedure as ``config.mode``, never over budget.

    * quadtree: :func:`quadtree_select` with priority = the area of the boxes inside a tile that are not yet
      legible at its level (``legible_level`` of their text height), so splits go where boxes still need detail;
    * topk: the same gist, then the level-0 tiles holding the most legible-able box area (then any box area).

    Greedy, so an upper reference at this budget rather than a proven optimum.
    """
    heights = gt_boxes[:, 3] - gt_boxes[:, 1] if text_heights is None else text_heights
    lmax = np.array([legible_level(float(h), min_px) for h in heights], np.int64)
    if config.mode == "quadtree":
        score = []
        for lvl, shape in enumerate(shapes):
            blurry = gt_boxes[(lmax >= 0) & (lmax < lvl)]  # legible only below this level
            score.append(np.log(_tile_overlap(shape, patch << lvl, blurry) + 1e-9))
        need = [np.ones(s) for s in shapes]
        return quadtree_select(score, need, config.budget, area_exponent=0.0, min_level=config.min_level)
    g, k = topk_split(shapes, config.budget, config.gist)
    gh, gw = shapes[0]
    legible = _tile_overlap(shapes[0], patch, gt_boxes[lmax >= 0]).ravel()
    anybox = _tile_overlap(shapes[0], patch, gt_boxes).ravel()
    order = np.lexsort((np.arange(gh * gw), -anybox, -legible))[:k]
    return g + [(0, int(i) // gw, int(i) % gw) for i in order]


# ----------------------------------------------------------------------------------------------------------
# End-to-end OCR check: is the answer text readable in what the VLM would see?


def normalize_text(text: str) -> str:
    """The matching form of a string: Unicode NFKC, case-folded, letters and digits only (whitespace and
    punctuation dropped, since OCR and annotators disagree on both: "10/ 13/ 99" == "10/13/99")."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold() if ch.isalnum())


def substring_edit_distance(pattern: str, text: str) -> int:
    """Fewest edits (insert, delete, substitute) turning ``pattern`` into some substring of ``text``
    (Sellers 1980: Levenshtein with a free start and end in ``text``)."""
    if not pattern:
        return 0
    prev = list(range(len(pattern) + 1))  # column for the empty text prefix
    best = prev[-1]
    for tc in text:
        cur = [0]
        for i, pc in enumerate(pattern, 1):
            cur.append(min(prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + (pc != tc)))
        best = min(best, cur[-1])
        prev = cur
    return best


def _area(b) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _inter(a, b) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def lines_at(lines: Sequence[Any], boxes: Iterable[Sequence[float]], pad: float = 0.25) -> str:
    """The OCR text read at ``boxes``: the lines (objects with ``.text`` and ``.box``) whose box overlaps one
    of the boxes (each grown by ``pad`` x its height on every side) by at least half of the smaller of the two
    areas, in reading order (rows top to bottom, left to right within a row), joined by spaces."""
    grown = []
    for x0, y0, x1, y1 in boxes:
        m = pad * (y1 - y0)
        grown.append((x0 - m, y0 - m, x1 + m, y1 + m))
    picked = [ln for ln in lines if any(_inter(ln.box, g) >= 0.5 * min(_area(ln.box), _area(g)) > 0 for g in grown)]
    picked.sort(key=lambda ln: (ln.box[1] + ln.box[3]) / 2)
    rows: list[list] = []
    for ln in picked:  # same row: vertical centres closer than half the smaller height
        cy, hh = (ln.box[1] + ln.box[3]) / 2, ln.box[3] - ln.box[1]
        if rows:
            last = rows[-1][-1]
            if abs(cy - (last.box[1] + last.box[3]) / 2) < 0.5 * min(hh, last.box[3] - last.box[1]):
                rows[-1].append(ln)
                continue
        rows.append([ln])
    return " ".join(ln.text for row in rows for ln in sorted(row, key=lambda ln: ln.box[0]))


def answer_found(answer: str, read: str, max_error_rate: float = 0.2) -> tuple[bool, bool] | None:
    """Is ``answer`` in the OCR text ``read``?  ``(exact, fuzzy)`` after :func:`normalize_text`: *exact* -- the
    normalised answer is a substring of the normalised text; *fuzzy* -- some substring is within
    ``floor(max_error_rate * len)`` edits (so answers of up to 4 characters must match exactly).  ``None`` when
    the answer has no letter or digit (nothing to read)."""
    a, t = normalize_text(answer), normalize_text(read)
    if not a:
        return None
    exact = a in t
    fuzzy = exact or substring_edit_distance(a, t) <= math.floor(max_error_rate * len(a))
    return exact, fuzzy


def query_answer_found(q: EvalQuery, lines: Sequence[Any], max_error_rate: float = 0.2) -> dict | None:
    """Every answer of ``q`` read at its own box (or at any of the query's boxes): ``{"exact", "fuzzy"}``,
    true when all answers are found; ``None`` when the query has no readable answer text."""
    results = []
    for text, box in q.answers:
        r = answer_found(text, lines_at(lines, [box] if box is not None else q.boxes), max_error_rate)
        if r is not None:
            results.append(r)
    if not results:
        return None
    return {"exact": all(r[0] for r in results), "fuzzy": all(r[1] for r in results)}


def load_ocr() -> tuple[Callable[[np.ndarray], list] | None, str]:
    """``(foveate.query.text.read_text, "")`` when the OCR module is installed, else ``(None, why not)``."""
    try:
        from .query.text import read_text
    except ImportError as exc:
        return None, f"OCR is not available (foveate.query.text could not be imported: {exc})"
    return read_text, ""


# ----------------------------------------------------------------------------------------------------------
# Configuration


SELECT_KNOBS = ("mode", "area_exponent", "min_level", "topk_levels", "topk_candidates", "gist")


def parse_select_value(key: str, text: str) -> Any:
    """A ``SelectConfig`` field from its command-line spelling: ``topk_levels=4,2,0``,
    ``topk_candidates=500,none`` (or ``default``), ``gist=false``, ``area_exponent=0.5``, ``mode=topk``."""
    t = text.strip().lower()
    try:
        if key == "mode":
            return t
        if key == "area_exponent":
            return float(t)
        if key == "min_level":
            return int(t)
        if key == "gist":
            if t not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(text)
            return t in ("true", "1", "yes")
        if key == "topk_levels":
            return tuple(int(v) for v in t.split(","))
        if key == "topk_candidates":
            if t in ("default", ""):
                return None
            return tuple(None if v in ("none", "all") else int(v) for v in t.split(","))
    except ValueError:
        raise ConfigError(f"bad value {text!r} for {key}") from None
    raise ConfigError(f"unknown selection setting {key!r}; use one of {', '.join(SELECT_KNOBS)} "
                      "(budgets are set for the whole run)")


def parse_variant(spec: str, base: SelectConfig) -> tuple[str, SelectConfig]:
    """``NAME:key=value[:key=value...]`` -> (name, config) -- e.g. ``cascade5:mode=topk:topk_levels=4,3,2,1,0``."""
    name, _, rest = spec.partition(":")
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"variant {spec!r}: start with a name (letters, digits, - or _), then :key=value pairs")
    changes = {}
    for part in filter(None, rest.split(":")):
        key, eq, value = part.partition("=")
        if not eq:
            raise ConfigError(f"variant {spec!r}: {part!r} is not key=value")
        changes[key.strip()] = parse_select_value(key.strip(), value)
    return name, replace_config(base, changes, context=f"variant {spec!r}: ")


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run.

    Attributes:
        budgets: token budgets; every query is evaluated at each.
        encode: how images are encoded (once each).  select: foveate's selection (its budget is replaced).
        variants: more foveate rows, ``(name, SelectConfig)``, from the same textures.
        baselines: which of ``BASELINES`` to run.
        min_px, hit_threshold: the legibility rule and the hit threshold (see ``foveate.metrics``).
        random_seeds: seeds averaged for the random baseline.  seed: base seed (random baseline, ``limit``).
        limit: evaluate a random sample of this many queries (drawn with ``seed``), in file order.
        ocr: ``"auto"`` (when the set has ``answer_text`` and OCR is installed), ``"on"`` (error if missing), ``"off"``.
        ocr_budgets: run the OCR check at these budgets only (``None``: all); OCR is by far the slowest part.
        max_error_rate: fuzzy OCR match tolerance (edits per answer character).
    """

    budgets: tuple[int, ...] = (273,)
    encode: EncodeConfig = field(default_factory=EncodeConfig)
    select: SelectConfig = field(default_factory=SelectConfig)
    variants: tuple[tuple[str, SelectConfig], ...] = ()
    baselines: tuple[str, ...] = BASELINES
    min_px: float = DEFAULT_MIN_PX
    hit_threshold: float = DEFAULT_HIT_THRESHOLD
    random_seeds: int = 5
    seed: int = 0
    limit: int | None = None
    ocr: str = "auto"
    ocr_budgets: tuple[int, ...] | None = None
    max_error_rate: float = 0.2
    device: str | None = "cpu"

    def __post_init__(self) -> None:
        budgets = tuple(self.budgets)
        if not budgets:
            raise BudgetError("give at least one budget")
        for b in budgets:
            SelectConfig(budget=b)  # validates
        object.__setattr__(self, "budgets", tuple(sorted(set(budgets))))
        unknown = set(self.baselines) - set(BASELINES)
        if unknown:
            raise ConfigError(f"unknown baseline(s) {sorted(unknown)}; known: {', '.join(BASELINES)}")
        names = [n for n, _ in self.variants]
        if len(set(names)) != len(names):
            raise ConfigError(f"variant names must differ, got {names}")
        if self.ocr not in ("auto", "on", "off"):
            raise ConfigError(f"ocr must be auto, on or off, got {self.ocr!r}")
        if self.ocr_budgets is not None:
            object.__setattr__(self, "ocr_budgets", tuple(sorted(set(self.ocr_budgets))))
            if not set(self.ocr_budgets) <= set(budgets):
                raise ConfigError(f"OCR budgets {self.ocr_budgets} must be among the budgets {tuple(sorted(budgets))}")
        if self.min_px <= 0 or not 0 < self.hit_threshold <= 1:
            raise ConfigError("min_px must be > 0 and hit_threshold in (0, 1]")
        if self.random_seeds < 1:
            raise ConfigError("random_seeds must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError("limit must be at least 1")

    @property
    def methods(self) -> list[str]:
        return ["foveate"] + [f"foveate:{n}" for n, _ in self.variants] + [b for b in BASELINES if b in self.baselines]

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("budgets", "baselines", "min_px", "hit_threshold", "random_seeds", "seed",
                                           "limit", "ocr", "ocr_budgets", "max_error_rate")}
        d["encode"] = self.encode.to_dict()
        d["select"] = {k: getattr(self.select, k) for k in SELECT_KNOBS}
        d["variants"] = {n: {k: getattr(c, k) for k in SELECT_KNOBS} for n, c in self.variants}
        return d


# ----------------------------------------------------------------------------------------------------------
# The runner


@dataclass
class EvalResult:
    """Everything a run produced.  ``records``: one dict per (query, budget)."""

    data_dir: str
    config: EvalConfig
    records: list[dict]
    problems: list[Problem]
    counts: dict[str, int]
    timings_s: dict[str, float]
    ocr: dict[str, str]

    def to_dict(self) -> dict:
        return {
            "data_dir": self.data_dir, "config": self.config.to_dict(), "counts": self.counts,
            "timings_s": {k: round(v, 3) for k, v in self.timings_s.items()}, "ocr": self.ocr,
            "methods": {m: METHOD_HELP.get(m.split(":")[0], "") for m in self.config.methods},
            "summary": aggregate(self.records, self.config.methods),
            "by_size": aggregate(self.records, self.config.methods, key="bucket"),
            "problem_kinds": {k: v for k, v in PROBLEM_KINDS.items() if any(p.kind == k for p in self.problems)},
            "problems": [p.to_dict() for p in self.problems],
            "records": self.records,
        }


def _score(tokens: Tokens, q: EvalQuery, image_size: tuple[int, int], cfg: EvalConfig) -> dict:
    m = query_metrics(tokens.boxes, None, q.boxes, image_size, q.text_heights, cfg.min_px, cfg.hit_threshold,
                      token_scales=tokens.scales)
    return {"coverage": m.coverage, "legible_coverage": m.legible_coverage, "hit": m.hit, "tokens": len(tokens)}


def _mean_scores(rows: list[dict]) -> dict:
    return {k: float(np.mean([float(r[k]) for r in rows])) for k in ("coverage", "legible_coverage", "hit", "tokens")}


def _tile_set(sel: Selection) -> frozenset:
    return frozenset(zip(sel.levels.tolist(), sel.rows.tolist(), sel.cols.tolist()))


class _Ocr:
    """OCR with a cache keyed by the pixels read (identical mosaics are read once) and error accounting."""

    def __init__(self, fn: Callable[[np.ndarray], list]) -> None:
        self.fn, self.cache, self.calls, self.seconds = fn, {}, 0, 0.0

    def __call__(self, image: np.ndarray) -> list:
        key = hashlib.sha1(np.ascontiguousarray(image).data).hexdigest() + str(image.shape)
        if key not in self.cache:
            t0 = time.perf_counter()
            self.cache[key] = list(self.fn(image))
            self.seconds += time.perf_counter() - t0
            self.calls += 1
        return self.cache[key]


def sample_queries(queries: list[EvalQuery], limit: int | None, seed: int) -> list[EvalQuery]:
    """``limit`` queries drawn at random with ``seed`` (all when ``limit`` is None), kept in file order."""
    if limit is None or limit >= len(queries):
        return queries
    idx = np.random.default_rng(seed).choice(len(queries), size=limit, replace=False)
    return [queries[i] for i in sorted(idx)]


def _ocr_setup(cfg: EvalConfig, has_answers: bool) -> tuple[_Ocr | None, dict[str, str]]:
    """The OCR reader (or None) and the column's status: ok, off, not applicable or unavailable (with why)."""
    if cfg.ocr == "off":
        return None, {"status": "off", "reason": "OCR check switched off (--ocr off)"}
    fn, why = load_ocr()
    if cfg.ocr == "on" and fn is None:
        raise FoveateError(why + "; install the OCR extra or run with --ocr off")
    if not has_answers:
        return None, {"status": "not applicable", "reason": "the set provides no answer_text"}
    if fn is None:
        return None, {"status": "unavailable", "reason": why}
    return _Ocr(fn), {"status": "ok", "reason": ""}


@dataclass
class _Run:
    """State shared by the images of one run."""

    cfg: EvalConfig
    data_dir: Path
    device: Any
    ocr: _Ocr | None
    problems: list[Problem] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    t: Counter = field(default_factory=Counter)


def run_eval(data_dir: str | Path, config: EvalConfig | None = None,
             progress: Callable[[int, int], None] | None = None) -> EvalResult:
    """Evaluate foveate and the baselines on a data set folder.

    Each image is decoded and encoded once; all its queries, budgets, variants and baselines reuse the texture.
    ``progress(done, total)`` is called as (query, budget) pairs complete.
    """
    from .core.device import resolve_device

    cfg = config or EvalConfig()
    t_start = time.perf_counter()
    data_dir = Path(data_dir)
    queries, problems, n_lines = read_queries(data_dir)
    queries = sample_queries(queries, cfg.limit, cfg.seed)
    ocr, ocr_status = _ocr_setup(cfg, any(q.answers for q in queries))
    run = _Run(cfg, data_dir, resolve_device(cfg.device), ocr, problems)
    by_image: dict[str, list[EvalQuery]] = defaultdict(list)
    for q in queries:
        by_image[q.image].append(q)
    run.counts.update(lines=n_lines, queries_read=n_lines - sum(p.skipped for p in problems), queries=len(queries),
                      images=len(by_image), encodes=0)
    done, total = 0, len(queries) * len(cfg.budgets)
    for image_rel, qs in by_image.items():
        _eval_image(run, image_rel, qs)
        done += len(qs) * len(cfg.budgets)
        if progress:
            progress(done, total)
    counts, t = run.counts, run.t
    if ocr is not None:
        t["ocr"] = ocr.seconds
        counts["ocr_reads"] = ocr.calls
    counts["records"] = len(run.records)
    counts["evaluated_queries"] = len({r["line"] for r in run.records})
    counts["problems"] = len(problems)
    for p in problems:
        counts[f"problem:{p.kind}"] += 1
    counts["skipped_lines"] = len({p.line for p in problems if p.skipped and p.kind != "budget"})
    t["wall"] = time.perf_counter() - t_start
    problems.sort(key=lambda p: (p.line or 0))
    return EvalResult(str(data_dir), cfg, run.records, problems, dict(counts), dict(t), ocr_status)


def _eval_image(run: _Run, image_rel: str, qs: list[EvalQuery]) -> None:
    """Decode and encode one image once, then evaluate all its queries at every budget."""
    from .core.io import load_image
    from .core.texture import encode_array
    from .selection import select

    cfg, problems, t = run.cfg, run.problems, run.t
    path = run.data_dir / image_rel
    if not path.is_file():
        problems += [Problem(q.line, "image_missing", f"image {image_rel} not found in {run.data_dir}", True,
                             image_rel) for q in qs]
        return
    t0 = time.perf_counter()
    try:
        rgb = load_image(path, max_pixels=cfg.encode.max_pixels)
    except FoveateError as exc:
        problems += [Problem(q.line, "image_unreadable", f"image {image_rel}: {exc}", True, image_rel) for q in qs]
        return
    size = (int(rgb.shape[0]), int(rgb.shape[1]))
    checked = []
    for q in qs:
        cq, probs = check_boxes(q, size)
        problems += probs
        if cq is not None:
            checked.append(cq)
    if not checked:
        return
    t1 = time.perf_counter()
    tex = encode_array(rgb, cfg.encode, run.device)
    run.counts["encodes"] += 1
    t["decode"] += t1 - t0
    t["encode"] += time.perf_counter() - t1
    shapes, patch = tex.level_shapes, tex.patch_size
    full = Tokens.from_tiles([(0, r, c) for r in range(shapes[0][0]) for c in range(shapes[0][1])], size, patch,
                             shapes[0])
    want_ocr = run.ocr is not None and any(q.answers for q in checked)
    full_lines = _full_image_lines(run, tex, rgb, checked[0]) if want_ocr else None
    seed_key = zlib.crc32(image_rel.encode())
    variants = [("foveate", cfg.select)] + [(f"foveate:{n}", c) for n, c in cfg.variants]
    for budget in cfg.budgets:
        cfg_b = {name: dataclasses.replace(c, budget=budget, cut=False) for name, c in variants}
        t2 = time.perf_counter()
        try:
            blind = select(tex, None, config=cfg_b["foveate"])
        except BudgetError as exc:
            problems += [Problem(q.line, "budget", f"budget {budget}: {exc}", True, image_rel) for q in checked]
            continue
        baselines: dict[str, Tokens] = {"uniform": uniform_tokens(size, patch, budget),
                                        "query_blind": Tokens.from_selection(blind), "full": full}
        rnd = [Tokens.from_tiles(random_tiles(shapes, budget, cfg.select.gist,
                                              np.random.default_rng([cfg.seed, k, seed_key])), size, patch, shapes[0])
               for k in range(cfg.random_seeds)]
        t["baselines"] += time.perf_counter() - t2
        ocr_here = want_ocr and (cfg.ocr_budgets is None or budget in cfg.ocr_budgets)
        uni_scale = float(baselines["uniform"].scales[0])
        uni_lines = _read(run, uniform_view(rgb, uni_scale), checked[0], "uniform image") if ocr_here else None
        blind_set = _tile_set(blind)
        for q in checked:
            bucket, frac = size_bucket(q, size)
            rec: dict[str, Any] = {"line": q.line, "image": image_rel, "query": q.text, "budget": budget,
                                   "bucket": bucket, "box_area_frac": round(frac, 6), "n_boxes": len(q.boxes),
                                   "meta": q.meta, "methods": {}}
            sels = {}
            for name, c in cfg_b.items():
                t3 = time.perf_counter()
                try:
                    sels[name] = select(tex, q.text, config=c)
                except BudgetError as exc:
                    problems.append(Problem(q.line, "budget", f"budget {budget}, {name}: {exc}", True, image_rel))
                    continue
                t4 = time.perf_counter()
                rec["methods"][name] = _score(Tokens.from_selection(sels[name]), q, size, cfg)
                t["select"] += t4 - t3
                t["metrics"] += time.perf_counter() - t4
            if "foveate" in sels:
                rec["same_as_query_blind"] = _tile_set(sels["foveate"]) == blind_set
            t5 = time.perf_counter()
            for name in cfg.baselines:
                if name == "random":
                    rec["methods"][name] = _mean_scores([_score(r, q, size, cfg) for r in rnd])
                elif name == "oracle":
                    tiles = oracle_tiles(shapes, patch, q.boxes, q.text_heights, cfg_b["foveate"], cfg.min_px)
                    rec["methods"][name] = _score(Tokens.from_tiles(tiles, size, patch, shapes[0]), q, size, cfg)
                else:
                    rec["methods"][name] = _score(baselines[name], q, size, cfg)
            if "uniform" in rec["methods"]:
                rec["methods"]["uniform"]["scale"] = round(uni_scale, 4)
            t["baselines"] += time.perf_counter() - t5
            if ocr_here and q.answers:
                rec["ocr"] = _ocr_record(run, tex, q, sels.get("foveate"), uni_lines, full_lines)
            run.records.append(rec)


def _ocr_record(run: _Run, tex, q: EvalQuery, sel: Selection | None, uni_lines: list | None,
                full_lines: list | None) -> dict:
    """Is ``q``'s answer read in foveate's mosaic, the uniform image, the full image?  ``{method: {exact, fuzzy}}``."""
    from .render import render_mosaic

    mosaic_lines = _read(run, render_mosaic(tex, sel), q, "mosaic") if sel is not None else None
    out = {}
    for name, lines in (("foveate", mosaic_lines), ("uniform", uni_lines), ("full", full_lines)):
        if lines is not None:
            found = query_answer_found(q, lines, run.cfg.max_error_rate)
            if found is not None:
                out[name] = found
    return out


def _full_image_lines(run: _Run, tex, rgb: np.ndarray, q: EvalQuery) -> list | None:
    """OCR of the full image: the lines the texture's text group already read from these pixels when it has one
    (the same OCR of the same image: not run twice), else a read."""
    from .query.text import has_text_group, text_index

    if has_text_group(tex):
        return list(text_index(tex).lines)
    return _read(run, rgb, q, "full image")


def _read(run: _Run, image: np.ndarray, q: EvalQuery, what: str) -> list | None:
    """OCR one picture; a failure is a Problem (the OCR cells of the queries concerned stay empty)."""
    try:
        return run.ocr(image)
    except Exception as exc:  # noqa: BLE001 -- any OCR failure is reported, never fatal
        run.problems.append(Problem(q.line, "ocr", f"OCR of the {what} of {q.image} failed: {exc}", False, q.image))
        return None


# ----------------------------------------------------------------------------------------------------------
# Aggregation


def _group_key(rec: dict, key: str | None) -> str:
    if key is None:
        return "all"
    if key == "bucket":
        return rec["bucket"]
    v = rec["meta"].get(key)
    return json.dumps(v) if isinstance(v, (list, dict)) else str(v)


def aggregate(records: list[dict], methods: Sequence[str], key: str | None = None) -> dict:
    """Means per budget, group and method: ``{budget: {group: {"n": .., method: {coverage, legible_coverage,
    hit, tokens}, "ocr": {method: {exact, fuzzy, n}}}}}``.  ``key``: ``None`` (one group, "all"), ``"bucket"``
    (box size) or a metadata key of the set (e.g. ``isthing``)."""
    acc: dict = defaultdict(lambda: defaultdict(list))
    for r in records:
        acc[(r["budget"], _group_key(r, key))]["_"].append(r)
    out: dict = {}
    order = [b for b, _ in SIZE_BUCKETS] if key == "bucket" else None
    for (budget, group), d in sorted(acc.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]) if order
                                                                  else kv[0][1])):
        recs = d["_"]
        g: dict = {"n": len(recs)}
        for m in methods:
            rows = [r["methods"][m] for r in recs if m in r["methods"]]
            if rows:
                g[m] = _mean_scores(rows) | {"n": len(rows)}
        ocr: dict = {}
        for m in OCR_METHODS:
            rows = [r["ocr"][m] for r in recs if m in r.get("ocr", {})]
            if rows:
                ocr[m] = {"exact": float(np.mean([x["exact"] for x in rows])),
                          "fuzzy": float(np.mean([x["fuzzy"] for x in rows])), "n": len(rows)}
        if ocr:
            g["ocr"] = ocr
        same = [r["same_as_query_blind"] for r in recs if "same_as_query_blind" in r]
        if same:
            g["same_as_query_blind"] = float(np.mean(same))
        out.setdefault(str(budget), {})[group] = g
    return out


# ----------------------------------------------------------------------------------------------------------
# Outputs: markdown, rich tables, JSON, plots


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _ocr_cell(g: dict, m: str, result: EvalResult) -> str:
    if m not in OCR_METHODS:
        return ""
    if result.ocr["status"] != "ok":
        return result.ocr["status"]
    o = g.get("ocr", {}).get(m)
    return f"{_pct(o['exact'])} / {_pct(o['fuzzy'])} (n={o['n']})" if o else "-"


def summary_rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table: per budget and method, tokens and the metrics in %."""
    summ = aggregate(result.records, result.config.methods)
    show_ocr = result.ocr["status"] != "not applicable"
    header = ["budget", "method", "tokens", "coverage %", "legible cov. %", "hit %"]
    if show_ocr:
        header.append("OCR answer exact / fuzzy %")
    rows = []
    for budget, groups in summ.items():
        g = groups["all"]
        for m in result.config.methods:
            if m not in g:
                continue
            s = g[m]
            label = METHOD_LABELS.get(m, m)
            if m == "random":
                label += f" ({result.config.random_seeds} seeds)"
            row = [budget, label, f"{s['tokens']:.0f}", _pct(s["coverage"]), _pct(s["legible_coverage"]),
                   _pct(s["hit"])]
            if show_ocr:
                row.append(_ocr_cell(g, m, result))
            rows.append(row)
    return header, rows


def group_rows(result: EvalResult, key: str = "bucket") -> tuple[list[str], list[list[str]]]:
    """Legible coverage / hit (%) per budget and group (box-size bucket or a metadata key), one column a method."""
    agg = aggregate(result.records, result.config.methods, key=key)
    methods = result.config.methods
    header = ["budget", "bucket" if key == "bucket" else key, "n"] + [METHOD_LABELS.get(m, m) for m in methods]
    rows = []
    for budget, groups in agg.items():
        for name, g in groups.items():
            rows.append([budget, name, str(g["n"])] + [
                f"{_pct(g[m]['legible_coverage'])} / {_pct(g[m]['hit'])}" if m in g else "-" for m in methods])
    return header, rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    right = {i for i, h in enumerate(header) if h not in ("method", "bucket") and not h.startswith("OCR")}
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def describe_run(result: EvalResult) -> str:
    """One paragraph: the set, the sizes, the settings, the time."""
    c, cfg = result.counts, result.config
    sel = cfg.select
    mode = sel.mode + (f" (area_exponent {sel.area_exponent:g}, min_level {sel.min_level})" if sel.mode == "quadtree"
                       else f" (levels {','.join(map(str, sel.topk_levels))}, gist {'on' if sel.gist else 'off'})")
    text = (f"{c.get('evaluated_queries', 0)} queries on {c.get('encodes', 0)} images ({c.get('encodes', 0)} encodes "
            f"for {c.get('records', 0)} query x budget evaluations); preset {cfg.encode.preset}, patch "
            f"{cfg.encode.patch_size}, mode {mode}; legible when text height / scale >= {cfg.min_px:g} px, hit when "
            f"every box is >= {100 * cfg.hit_threshold:g} % legibly covered; seed {cfg.seed}"
            + (f", random sample of {cfg.limit} queries" if cfg.limit else "")
            + f". Wall time {result.timings_s.get('wall', 0):.0f} s.")
    if cfg.variants:
        text += " Variants: " + "; ".join(f"{n} = " + ", ".join(f"{k}={getattr(v, k)}" for k in SELECT_KNOBS
                                                               if getattr(v, k) != getattr(sel, k))
                                          for n, v in cfg.variants) + "."
    return text


def problem_summary(result: EvalResult) -> str:
    c = result.counts
    kinds = {k.split(":", 1)[1]: v for k, v in c.items() if k.startswith("problem:")}
    if not kinds:
        return "No problems in the data."
    parts = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
    return f"{c.get('problems', 0)} problems ({parts}); {c.get('skipped_lines', 0)} of {c.get('lines', 0)} lines skipped."


def render_markdown(result: EvalResult, title: str | None = None, group_by: Sequence[str] = ()) -> str:
    """The tables as markdown, ready to paste into EVAL.md."""
    title = title or Path(result.data_dir).name
    out = [f"### {title}", "", describe_run(result), ""]
    out += [_md_table(*summary_rows(result)), ""]
    if result.ocr["status"] == "ok":
        out += ["OCR: share of queries whose answer_text is read at its box (exact / fuzzy match, see EVAL.md); "
                "foveate = OCR of the mosaic, uniform = of the resized image, full image = of the original.", ""]
    elif result.ocr["status"] != "not applicable":
        out += [f"OCR column: {result.ocr['status']} -- {result.ocr['reason']}.", ""]
    same = [r["same_as_query_blind"] for r in result.records if "same_as_query_blind" in r]
    if same:
        out += [f"foveate's selection equals the query-blind one for {100 * np.mean(same):.1f} % of the queries.", ""]
    out += ["Legible coverage / hit (%) by box size (a query's mean box area as a share of the image):", ""]
    out += [_md_table(*group_rows(result, "bucket")), ""]
    for key in group_by:
        out += [f"Legible coverage / hit (%) by `{key}`:", "", _md_table(*group_rows(result, key)), ""]
    out += [problem_summary(result), ""]
    return "\n".join(out)


def print_tables(result: EvalResult, console, group_by: Sequence[str] = ()) -> None:
    """The same tables with rich."""
    from rich.table import Table

    def show(title: str, header: list[str], rows: list[list[str]]) -> None:
        t = Table(title=title, box=None, title_justify="left")
        for h in header:
            t.add_column(h, justify="left" if h in ("method", "bucket") or h.startswith("OCR") else "right")
        prev = None
        for r in rows:
            if prev is not None and r[0] != prev:
                t.add_section()
            prev = r[0]
            t.add_row(*r)
        console.print(t)

    console.print(describe_run(result), highlight=False)
    show("metrics (mean over queries, %)", *summary_rows(result))
    show("legible coverage / hit % by box size", *group_rows(result, "bucket"))
    for key in group_by:
        show(f"legible coverage / hit % by {key}", *group_rows(result, key))
    if result.ocr["status"] not in ("ok", "not applicable"):
        console.print(f"OCR column: {result.ocr['status']} -- {result.ocr['reason']}", highlight=False)
    for p in result.problems[:20]:
        console.print(str(p), style="yellow", markup=False, highlight=False)
    if len(result.problems) > 20:
        console.print(f"... {len(result.problems) - 20} more problems in the JSON file", highlight=False)
    console.print(problem_summary(result), highlight=False)


def write_outputs(result: EvalResult, outdir: str | Path, *, plots: bool = False, gallery: int = 12,
                  group_by: Sequence[str] = ()) -> dict[str, Path]:
    """Write ``eval.json`` (config, counts, timings, aggregates, problems, every record) and ``eval.md``; with
    ``plots``, ``curves.png`` (metric vs budget per method) and ``gallery.png`` (the worst queries)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written = {"json": out / "eval.json", "markdown": out / "eval.md"}
    doc = result.to_dict()
    for key in group_by:
        doc[f"by_{key}"] = aggregate(result.records, result.config.methods, key=key)
    written["json"].write_text(json.dumps(doc, separators=(",", ":"), default=_json_default))
    written["markdown"].write_text(render_markdown(result, group_by=group_by))
    if plots:
        written["curves"] = plot_curves(result, out / "curves.png")
        if gallery > 0 and result.records:
            written["gallery"] = plot_gallery(result, out / "gallery.png", gallery)
    return written


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer, np.floating, np.bool_)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def load_pyplot():
    """matplotlib's pyplot on the Agg backend, or a FoveateError saying what to install."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FoveateError("plots need matplotlib: pip install 'foveate[plots]' (or run without --plots)") from None
    return plt


def plot_curves(result: EvalResult, path: Path) -> Path:
    """Coverage, legible coverage and hit rate vs budget, one line per method."""
    plt = load_pyplot()
    summ = aggregate(result.records, result.config.methods)
    budgets = [int(b) for b in summ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, metric, label in zip(axes, ("coverage", "legible_coverage", "hit"),
                                 ("coverage", "legible coverage", "hit rate")):
        for m in result.config.methods:
            ys = [summ[str(b)]["all"].get(m, {}).get(metric) for b in budgets]
            if any(y is not None for y in ys):
                style = {"oracle": dict(linestyle="--"), "full": dict(linestyle="--"),
                         "query_blind": dict(linestyle=":", marker="s", markersize=9, markerfacecolor="none")}
                ax.plot(budgets, [np.nan if y is None else 100 * y for y in ys], **({"marker": "o"} | style.get(m, {})),
                        label=METHOD_LABELS.get(m, m), zorder=3 if m.startswith("foveate") else 2)
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel("budget (tokens)")
        ax.set_ylabel(f"{label} (%)")
        ax.set_ylim(0, 102)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{Path(result.data_dir).name}: {result.counts.get('evaluated_queries', 0)} queries")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def worst_records(result: EvalResult, n: int, budget: int | None = None, per_image: int = 1) -> list[dict]:
    """The ``n`` records with the lowest foveate legible coverage (then coverage) at ``budget`` (default: the
    budget nearest 273), at most ``per_image`` from one image."""
    budgets = result.config.budgets
    b = budget if budget is not None else min(budgets, key=lambda v: abs(v - 273))
    recs = [r for r in result.records if r["budget"] == b and "foveate" in r["methods"]]
    recs.sort(key=lambda r: (r["methods"]["foveate"]["legible_coverage"], r["methods"]["foveate"]["coverage"],
                             r["line"]))
    out, seen = [], Counter()
    for r in recs:
        if seen[r["image"]] < per_image:
            out.append(r)
            seen[r["image"]] += 1
        if len(out) == n:
            break
    return out


def plot_gallery(result: EvalResult, path: Path, n: int = 12) -> Path:
    """The worst queries (one per image), two panels each: foveate's overlay (tokens outlined by level) with the
    ground-truth boxes in red, and the mosaic (what the VLM sees) cropped around those boxes.  The images are
    encoded again here (a handful; nothing from the run is kept in memory)."""
    import cv2

    from .core.io import load_image
    from .core.texture import encode_array
    from .render import render_mosaic, render_overlay
    from .selection import select

    plt = load_pyplot()
    recs = worst_records(result, n)
    cols = 2 * min(2, len(recs))
    rows = math.ceil(2 * len(recs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 4.4 * rows), squeeze=False)
    data_dir = Path(result.data_dir)
    queries = {q.line: q for q in read_queries(data_dir)[0]}
    panels = iter(axes.ravel())
    for rec in recs:
        tex = encode_array(load_image(data_dir / rec["image"]), result.config.encode)
        sel = select(tex, rec["query"], config=dataclasses.replace(result.config.select, budget=rec["budget"],
                                                                   cut=False))
        q, _ = check_boxes(queries[rec["line"]], tex.image_size)
        thick = max(2, round(max(tex.image_size) / 300))
        views = [render_overlay(tex.image, sel), render_mosaic(tex, sel)]
        for img in views:
            for x0, y0, x1, y1 in q.boxes:
                cv2.rectangle(img, (int(x0), int(y0)), (int(x1) - 1, int(y1) - 1), (255, 0, 0), thick)
        # the crop: the boxes' bounding box with as much context again (at least 160 px), inside the image
        h, w = tex.image_size
        bx0, by0 = q.boxes[:, 0].min(), q.boxes[:, 1].min()
        bx1, by1 = q.boxes[:, 2].max(), q.boxes[:, 3].max()
        mx, my = max(bx1 - bx0, 160) / 2, max(by1 - by0, 160) / 2
        cx0, cy0 = int(max(0, bx0 - mx)), int(max(0, by0 - my))
        cx1, cy1 = int(min(w, bx1 + mx)), int(min(h, by1 + my))
        f = rec["methods"]["foveate"]
        ax = next(panels)
        ax.imshow(views[0])
        ax.set_title(f"line {rec['line']}: {rec['query'][:40]}\nlegible {100 * f['legible_coverage']:.0f}%, "
                     f"coverage {100 * f['coverage']:.0f}%, {f['tokens']} tokens", fontsize=8)
        ax = next(panels)
        ax.imshow(views[1][cy0:cy1, cx0:cx1])
        ax.set_title(f"mosaic near the boxes ({rec['image'][-28:]})", fontsize=8)
    for ax in axes.ravel():
        ax.axis("off")
    fig.suptitle(f"{Path(result.data_dir).name}: worst {len(recs)} queries at budget {recs[0]['budget']}, one per "
                 "image (red: ground truth)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))  # leave room for the title
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
