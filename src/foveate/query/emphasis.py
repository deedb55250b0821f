"""Query-aware channel emphasis: a documented rule that turns words of the query into extra weight on texture
channels (the ``emphasis`` query term).

The scorer's channel weights (``foveate.weights.defaults.DEFAULT_WEIGHTS``) are query-blind.  Some questions say which
channels matter: a colour word asks about colour, "what does it say" asks about text.  The rule, applied to the
query's words (case-folded, accents stripped):

==============================  =================================================================================
query words                     map (level-0 tiles, in [0, 1])
==============================  =================================================================================
a named colour (:data:`COLOURS`) closeness of the tile's mean RGB to that colour: ``exp(-(dE / 40)^2)``, dE the
                                 CIELAB distance; several colours: the maximum
"colour", "color", "colourful"   chroma of the tile's mean colour (CIELAB chroma / 60, clipped)
reading words (:data:`READING`) the ``text`` channel (OCR line mask) and ``text_density``: ``max(text,
                                 text_density)``; needs the text group
==============================  =================================================================================

The term's weight is :data:`EMPHASIS_WEIGHT` (1.5: a clear but secondary push, below the text and prompt
terms' 4.0).  Channels a texture lacks make their rule silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._lazy import lazy_module
from ..core.types import F32
from ..weights.defaults import QUERY_WEIGHTS
from .base import QueryTerm
from .text.match import tokenize

cv2 = lazy_module("cv2")

if TYPE_CHECKING:
    from ..core.texture import Texture
    from ..weights.weights import Weights
    from .query import Query

EMPHASIS_WEIGHT = QUERY_WEIGHTS["emphasis"]

#: colour name -> sRGB prototype
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 30, 30),
    "green": (40, 150, 50),
    "blue": (30, 70, 200),
    "yellow": (230, 210, 40),
    "orange": (240, 140, 30),
    "purple": (120, 50, 150),
    "violet": (140, 80, 200),
    "pink": (240, 150, 180),
    "brown": (120, 75, 40),
    "black": (15, 15, 15),
    "white": (245, 245, 245),
    "grey": (128, 128, 128),
    "gray": (128, 128, 128),
    "cyan": (40, 200, 220),
    "magenta": (210, 40, 170),
    "gold": (210, 170, 50),
}
GENERIC_COLOUR = frozenset({"colour", "color", "colours", "colors", "coloured", "colored", "colourful", "colorful"})
#: words that ask to read: the text channels are emphasised
READING = frozenset(
    {
        "read",
        "reads",
        "say",
        "says",
        "said",
        "written",
        "writing",
        "text",
        "wording",
        "spell",
        "spelled",
        "spelt",
        "transcribe",
        "ocr",
        "printed",
        "caption",
        "label",
        "sign",
        "handwriting",
    }
)


def _lab(rgb: np.ndarray) -> np.ndarray:
    """(..., 3) float RGB in [0, 1] -> CIELAB (OpenCV's float conversion: L in [0, 100])."""
    a = np.ascontiguousarray(rgb.reshape(-1, 1, 3), np.float32)
    return cv2.cvtColor(a, cv2.COLOR_RGB2Lab).reshape(rgb.shape)


def emphasis_rules(words: set[str]) -> list[str]:
    """The rules a set of query words triggers, by name (``colour:red``, ``colour``, ``reading``)."""
    rules = [f"colour:{w}" for w in sorted(words & COLOURS.keys())]
    if words & GENERIC_COLOUR and not rules:
        rules.append("colour")
    if words & READING:
        rules.append("reading")
    return rules


def emphasis_map(texture: Texture, query: Query, weights: Weights | None = None) -> F32 | None:
    """The ``emphasis`` query term (see the module docstring); ``None`` when no rule applies."""
    if query.text is None:
        return None
    rules = emphasis_rules(set(tokenize(query.text)))
    maps = []
    if any(r.startswith("colour") for r in rules) and all(c in texture.channels for c in ("r", "g", "b")):
        rgb = np.stack([texture.channel(c) for c in ("r", "g", "b")], -1)
        lab = _lab(rgb)
        for r in rules:
            if r == "colour":
                maps.append(np.clip(np.hypot(lab[..., 1], lab[..., 2]) / 60.0, 0.0, 1.0))
            elif r.startswith("colour:"):
                proto = _lab(np.array(COLOURS[r.split(":", 1)[1]], np.float32) / 255.0)
                de = np.linalg.norm(lab - proto, axis=-1)
                maps.append(np.exp(-((de / 40.0) ** 2)))
    if "reading" in rules and "text" in texture.channels and "text" not in texture.absent:
        dens = texture.channel("text_density") if "text_density" in texture.channels else 0.0
        maps.append(np.maximum(texture.channel("text"), dens))
    if not maps:
        return None
    return np.max(np.stack(maps), axis=0).astype(np.float32)


EMPHASIS = QueryTerm(
    "emphasis",
    emphasis_map,
    EMPHASIS_WEIGHT,
    "query-aware channel emphasis: colour words -> RGB, reading words -> text channels",
    uses_text=True,
)
