"""``FoveatePredictor``: encode once, query many -- in the style of SAM 2's ``SAM2ImagePredictor``.

predictor = FoveatePredictor(preset="default")
predictor.set_image("page.png")                  # heavy: builds the texture once
for q in ["what is the total?", "who signed it?"]:
    sel = predictor.select(q, budget=273)        # light: milliseconds per query
predictor.reset()
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from .core.config import EncodeConfig, SelectConfig
from .core.device import resolve_device
from .core.errors import ConfigError, NoImageSetError
from .core.io import ImageLike
from .core.texture import Texture
from .document.select import DocumentSelection, select_document
from .document.texture import DocumentTexture, encode
from .query.scorer import Scorer
from .selection import Selection, select
from .weights.weights import WeightsSpec, load_weights


class FoveatePredictor:
    """Holds one encoded image and answers queries against it.

    Args:
        config: encode configuration (``preset``, ``patch_size``, ...); keyword overrides replace its fields.
        select_config: default selection configuration (budget, mode, ...).
        device: where features and scoring live (``None`` = CUDA if available, else CPU).
        scorer: a custom :class:`Scorer` (overrides ``weights``).
        weights: relevance weights: ``None``/``"default"`` (the trained weights the package ships), ``"handset"``
            (the documented hand-set constants), or a weights file written by ``foveate train``.
    """

    def __init__(
        self,
        config: EncodeConfig | None = None,
        select_config: SelectConfig | None = None,
        device: str | torch.device | None = None,
        scorer: Scorer | None = None,
        weights: WeightsSpec = None,
        **overrides: Any,
    ) -> None:
        config = config or EncodeConfig()
        if overrides:
            try:
                config = dataclasses.replace(config, **overrides)
            except TypeError as exc:
                raise ConfigError(str(exc)) from exc
        self.config = config
        self.select_config = select_config or SelectConfig()
        self.device = resolve_device(device)
        self.scorer = scorer.to(self.device) if scorer is not None else None
        self.weights = load_weights(weights)  # a bad weights file fails here, before any encode
        self._texture: Texture | None = None
        self._document: DocumentTexture | None = None

    @property
    def document(self) -> DocumentTexture | None:
        """The document set with ``set_image("doc.pdf")`` (``None`` when the current input is a single image)."""
        return self._document

    @property
    def texture(self) -> Texture:
        if self._texture is None:
            raise NoImageSetError("no image is set: call set_image(image) (or set_texture) before select()")
        return self._texture

    @property
    def is_image_set(self) -> bool:
        return self._texture is not None or self._document is not None

    @torch.inference_mode()
    def set_image(self, image: ImageLike) -> Texture | DocumentTexture:
        """Encode ``image`` (path, bytes, array, PIL image or tensor; a PDF or multi-page TIFF encodes every page
        into a :class:`DocumentTexture`) and keep its texture."""
        out = encode(image, self.config, device=self.device)
        if isinstance(out, DocumentTexture):
            self._texture, self._document = None, out
        else:
            self._texture, self._document = out, None
        return out

    def set_texture(self, texture: Texture | DocumentTexture) -> Texture | DocumentTexture:
        """Use an already encoded (e.g. loaded) texture or document texture; encodes nothing."""
        if texture.device != self.device:
            texture = texture.to(self.device)
        if isinstance(texture, DocumentTexture):
            self._texture, self._document = None, texture
        else:
            self._texture, self._document = texture, None
        return texture

    def select(self, query: Any = None, budget: int | None = None, **kwargs: Any) -> Selection | DocumentSelection:
        """Pick tokens for ``query`` from the current image (see :func:`foveate.select`), or across the current
        document's pages with one budget (:func:`foveate.select_document`)."""
        kwargs.setdefault("config", self.select_config)
        kwargs.setdefault("scorer", self.scorer)
        kwargs.setdefault("weights", self.weights)
        if self._document is not None:
            return select_document(self._document, query, budget, **kwargs)
        return select(self.texture, query, budget, **kwargs)

    def reset(self) -> None:
        """Forget the current image or document."""
        self._texture = self._document = None
