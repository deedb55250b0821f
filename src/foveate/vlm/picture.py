"""One picture of a plan (:class:`Picture`): a region of the source image, the size it is sent at, the size the model
sees it at, its tokens and option -- or a composite of several regions packed into one picture (:class:`Part`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Part:
    """A region of the source image placed in a composite picture: ``box`` (x0, y0, x1, y1) of the source, drawn at
    ``at`` (x, y) in the composite at ``size`` (w, h) sent pixels."""

    box: tuple[int, int, int, int]
    at: tuple[int, int]
    size: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {"box": list(self.box), "at": list(self.at), "size": list(self.size)}


@dataclass
class Picture:
    """One picture of a plan: ``box`` (x0, y0, x1, y1) of the source image, sent at ``sent`` (w, h) pixels; the
    model sees ``seen`` (w, h) after the provider's own resize, i.e. ``scale`` source pixels per pixel, and the
    provider bills ``tokens`` (sent with ``option``: OpenAI's ``detail``)."""

    kind: str  # "context" (the page, coarse), "crop", "composite", "image" (the whole image, as the provider takes it)
    box: tuple[int, int, int, int]
    sent: tuple[int, int]
    seen: tuple[int, int]
    tokens: int
    option: str | None
    keeps: int = 0  # selected tokens this picture shows at their selected scale or finer
    #: a composite's regions, each placed in the picture (empty for a plain picture of ``box``)
    parts: tuple[Part, ...] = ()

    @property
    def scale(self) -> float:
        """Source pixels per pixel the model sees (a composite: its coarsest part's)."""
        if self.parts:
            return max(v.scale for v in self.views())
        x0, y0, x1, y1 = self.box
        return max((x1 - x0) / self.seen[0], (y1 - y0) / self.seen[1])

    def views(self) -> list[Picture]:
        """What the model sees of each source region: the picture itself, or a composite's parts as pictures of their
        own (their size in the composite, shrunk as the provider shrinks the composite; no tokens of their own)."""
        if not self.parts:
            return [self]
        fx, fy = self.seen[0] / self.sent[0], self.seen[1] / self.sent[1]
        return [
            Picture(
                "crop",
                part.box,
                part.size,
                (max(1, int(part.size[0] * fx)), max(1, int(part.size[1] * fy))),
                0,
                self.option,
            )
            for part in self.parts
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "box": list(self.box),
            "sent": list(self.sent),
            "seen": list(self.seen),
            "scale": round(self.scale, 4),
            "option": self.option,
            "tokens": self.tokens,
            "keeps": self.keeps,
            **({"parts": [part.to_dict() for part in self.parts]} if self.parts else {}),
        }
