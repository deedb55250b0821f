"""What a VLM input rule is (:class:`VlmRule`) and how it describes one way of sending a picture (:class:`Sending`).

A rule answers, for a picture sent at ``w x h`` pixels: which ways there are to send it (:attr:`VlmRule.options`,
e.g. OpenAI's ``detail: high`` / ``low``), and for each the tokens billed and the size the model actually sees after
the provider's own resize (:meth:`VlmRule.price`, vectorised over NumPy arrays), and it owns its provider's request
format (:meth:`VlmRule.body`).  Each rule cites the document it follows; where a document is ambiguous the docstring
says which reading the code takes and why.  The built-in rules live beside this module, one per provider, and
:mod:`.registry` registers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.types import I64, U8, Array
from ..formats import OPENAI_CHAT, RequestFormat, SentPictures

if TYPE_CHECKING:
    pass

Arr = Array


@dataclass(frozen=True)
class Sending:
    """One way to send a picture: the tokens billed and the size ``(w, h)`` the model sees after the provider's
    own resize; ``option`` is the rule's name for it (OpenAI's ``detail``), ``None`` where a rule has one way."""

    tokens: int
    seen: tuple[int, int]
    option: str | None = None


class VlmRule:
    """A VLM's input rule.  Subclasses set the class attributes and implement :meth:`price`."""

    name: str = ""
    #: the request body the provider takes (:mod:`foveate.vlm.formats`)
    format: RequestFormat = OPENAI_CHAT
    default_model: str = ""
    #: the ways to send a picture; ``options[0]`` is how the provider takes a picture sent plainly (the whole-image
    #: reference of every plan)
    options: tuple[str | None, ...] = (None,)
    #: most pictures one request may carry (``None``: no documented limit)
    max_pictures: int | None = None
    #: largest picture side the provider accepts at all (bigger ones are rejected, not resized)
    max_side: int | None = None
    #: the document the rule follows
    source: str = ""

    @property
    def api(self) -> str:
        """The request format's name: ``openai``, ``anthropic``, ``gemini`` or ``qwen2-vl``."""
        return self.format.api

    def price(self, w: Arr, h: Arr, option: str | None = None) -> tuple[I64, I64, I64]:
        """``(tokens, seen_w, seen_h)`` for pictures sent at ``w x h`` (int arrays of one shape) with ``option``."""
        raise NotImplementedError

    def body(self, model: str, sent: SentPictures, question: str) -> dict[str, Any]:
        """The request body of this rule's provider (:attr:`format`) for pictures already encoded as base64."""
        return self.format.body(model, sent, question)

    def inputs(self, pictures: list[U8]) -> dict[str, Any] | None:
        """Model inputs a local model's processor makes of the pictures (Qwen2-VL: ``pixel_values`` and
        ``image_grid_thw``); ``None`` for a provider that takes the pictures in the body."""
        return None

    def fit(self, bw: Arr, bh: Arr, scale: Arr) -> tuple[Arr, Arr]:
        """The size to send a ``bw x bh`` source region at so that the model sees it at ``scale`` source pixels per
        pixel or finer: ``ceil(b / scale)`` (a rule whose own resize would round that down sends more)."""
        s = np.asarray(scale, np.float64)
        return (
            np.maximum(1, np.ceil(np.asarray(bw) / s - 1e-9)).astype(np.int64),
            np.maximum(1, np.ceil(np.asarray(bh) / s - 1e-9)).astype(np.int64),
        )

    # -- conveniences over price ---------------------------------------------------------------------------

    def sendings(self, w: int, h: int) -> list[Sending]:
        """Every way to send one ``w x h`` picture, ``options`` order."""
        out = []
        for opt in self.options:
            t, sw, sh = self.price(np.array([w]), np.array([h]), opt)
            out.append(Sending(int(t[0]), (int(sw[0]), int(sh[0])), opt))
        return out

    def tokens(self, w: int, h: int, option: str | None = None) -> int:
        """Tokens billed for one ``w x h`` picture sent with ``option`` (default: ``options[0]``)."""
        opt = self.options[0] if option is None else option
        return int(self.price(np.array([w]), np.array([h]), opt)[0][0])

    def whole(self, w: int, h: int) -> tuple[tuple[int, int], Sending]:
        """The whole image as the provider takes it: the size to send (the image itself, shrunk only where the
        provider would refuse it: ``max_side``) and its default :class:`Sending`."""
        s = 1.0 if self.max_side is None else min(1.0, self.max_side / max(w, h))
        sent = (max(1, int(w * s)), max(1, int(h * s)))
        return sent, self.sendings(*sent)[0]

    def describe(self) -> dict[str, Any]:
        return {
            "rule": self.name,
            "api": self.api,
            "model": self.default_model,
            "options": list(self.options),
            "max_pictures": self.max_pictures,
            "max_side": self.max_side,
            "source": self.source,
        }


def _fit_inside(w: Arr, h: Arr, max_w: float, max_h: float) -> tuple[Arr, Arr]:
    """Scale down (never up), keeping the aspect ratio, to fit ``max_w x max_h``; sides rounded down, >= 1."""
    w, h = np.asarray(w, np.float64), np.asarray(h, np.float64)
    s = np.minimum(1.0, np.minimum(max_w / w, max_h / h))
    return np.maximum(1, np.floor(w * s + 1e-6)).astype(np.int64), np.maximum(1, np.floor(h * s + 1e-6)).astype(
        np.int64
    )
