"""What a user asks about: a :class:`Query` -- text and/or SAM-style prompts (points, boxes) in source-image
pixels -- validated once, before anything is scored."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import QueryError

#: Longest query text kept (characters); longer text is truncated, and the selection says so.
MAX_QUERY_CHARS = 2000


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: bytes a command line could not decode (``surrogateescape``) and lone surrogates become
    U+FFFD, so that no tokenizer meets a string it cannot encode."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a lone surrogate outside the escape range
        return text.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True)
class Query:
    """What a user asks about: text and/or SAM-style prompts, in source-image pixels.

    Attributes:
        text: free text ("what is the total?"); may be ``None``.
        points: ``(x, y)`` pixel positions.
        point_labels: one per point, 1 = look here (default), 0 = not here (SAM's convention).
        boxes: ``(x0, y0, x1, y1)`` pixel boxes to look inside.
    """

    text: str | None = None
    points: tuple[tuple[float, float], ...] = ()
    point_labels: tuple[int, ...] = ()
    boxes: tuple[tuple[float, float, float, float], ...] = ()

    def __post_init__(self) -> None:
        try:
            pts = tuple((float(x), float(y)) for x, y in self.points)
            boxes = tuple(tuple(float(v) for v in b) for b in self.boxes)
            labels = tuple(int(v) for v in self.point_labels) if self.point_labels else (1,) * len(pts)
        except (TypeError, ValueError) as exc:
            raise QueryError(f"points must be (x, y) pairs and boxes (x0, y0, x1, y1) numbers: {exc}") from None
        if any(len(b) != 4 for b in boxes):
            raise QueryError("every box must have four numbers: x0, y0, x1, y1")
        if len(labels) != len(pts):
            raise QueryError(f"{len(labels)} point labels for {len(pts)} points")
        if any(v not in (0, 1) for v in labels):
            raise QueryError("point labels must be 1 (look here) or 0 (not here)")
        if any(not all(math.isfinite(v) for v in p) for p in pts + boxes):
            raise QueryError("points and boxes must be finite numbers")
        text = self.text
        if text is not None:
            if not isinstance(text, str):
                raise QueryError(f"query text must be a string, got {type(text).__name__}")
            text = " ".join(valid_text(text).split()) or None
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "point_labels", labels)
        object.__setattr__(self, "boxes", boxes)

    @classmethod
    def coerce(cls, query: Any) -> Query:
        """``None`` -> empty query, ``str`` -> text query, ``dict`` -> fields, ``Query`` -> itself."""
        if query is None:
            return cls()
        if isinstance(query, Query):
            return query
        if isinstance(query, str):
            return cls(text=query)
        if isinstance(query, Mapping):
            unknown = set(query) - {"text", "points", "point_labels", "boxes"}
            if unknown:
                raise QueryError(f"unknown query field(s) {sorted(unknown)}; use text, points, point_labels, boxes")
            return cls(**query)
        raise QueryError(f"cannot read a query from {type(query).__name__}; pass a string, a dict or a Query")

    @property
    def is_empty(self) -> bool:
        return self.text is None and not self.points and not self.boxes

    @property
    def has_prompt(self) -> bool:
        return bool(self.points or self.boxes)

    def validate(self, image_size: tuple[int, int]) -> None:
        """Points must lie inside the image and boxes must overlap it (``QueryError`` otherwise)."""
        h, w = image_size
        for x, y in self.points:
            if not (0 <= x <= w and 0 <= y <= h):
                raise QueryError(f"point ({x:g}, {y:g}) is outside the {w}x{h} image")
        for x0, y0, x1, y1 in self.boxes:
            if x1 <= x0 or y1 <= y0:
                raise QueryError(f"box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) is empty: need x0 < x1 and y0 < y1")
            if x1 <= 0 or y1 <= 0 or x0 >= w or y0 >= h:
                raise QueryError(f"box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) lies outside the {w}x{h} image")

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"text": self.text}
        if self.points:
            d["points"] = [list(p) for p in self.points]
            d["point_labels"] = list(self.point_labels)
        if self.boxes:
            d["boxes"] = [list(b) for b in self.boxes]
        return d
