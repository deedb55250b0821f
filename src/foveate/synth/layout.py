"""What a generated document is made of: text items placed with a role (:class:`Item`), the document (:class:`Doc`),
and the placement of a label with its value (:func:`_pair`); the kinds of document are :mod:`.documents` and
:mod:`.forms`."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Item:
    """A text item to draw: ``x`` is its left edge, right edge or centre (``anchor`` l, r, c); ``role`` names
    what it is (``None``: a label or filler), ``role|name`` for an item's price or quantity."""

    text: str
    x: float
    y: float
    size: int
    font: str | None
    anchor: str = "l"
    role: str | None = None
    box: list = field(default_factory=list)


@dataclass
class Doc:
    kind: str
    width: int
    height: int
    items: list[Item]
    rules: list[tuple[float, float, float, float]] = field(default_factory=list)


def _pair(
    r: random.Random,
    items: list[Item],
    x: float,
    y: float,
    size: int,
    font: str | None,
    label: str,
    value: str,
    role: str | None,
    mode: str,
    x_value: float | None = None,
    right: float | None = None,
) -> float:
    """Place a label and its value: on one line (``colon``), the value right-aligned or at ``x_value`` on the same
    row (``same``), below the label (``below``), or the value alone (``none``).  Returns the next free y."""
    if mode == "none":
        items.append(Item(value, x, y, size, font, role=role))
        return y + size * 1.5
    if mode == "colon":
        items.append(Item(f"{label}: {value}", x, y, size, font, role=role))
        return y + size * 1.5
    items.append(Item(label + (":" if r.random() < 0.6 else ""), x, y, size, font))
    if mode == "below":
        items.append(Item(value, x, y + size * 1.4, size, font, role=role))
        return y + size * 2.9
    if right is not None:
        items.append(Item(value, right, y, size, font, "r", role))
    else:
        assert x_value is not None, "a value on the label's row needs right or x_value"  # every caller gives one
        items.append(Item(value, x_value, y, size, font, role=role))
    return y + size * 1.5
