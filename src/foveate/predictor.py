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
from .core.texture import Texture, encode
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

    @property
    def texture(self) -> Texture:
        if self._texture is None:
            raise NoImageSetError("no image is set: call set_image(image) (or set_texture) before select()")
        return self._texture

    @property
    def is_image_set(self) -> bool:
        return self._texture is not None

    @torch.inference_mode()
    def set_image(self, image: ImageLike) -> Texture:
        """Encode ``image`` (path, bytes, array, PIL image or tensor) and keep its texture."""
        self._texture = encode(image, self.config, device=self.device)
        return self._texture

    def set_texture(self, texture: Texture) -> Texture:
        """Use an already encoded (e.g. loaded) texture; encodes nothing."""
        self._texture = texture.to(self.device) if texture.device != self.device else texture
        return self._texture

    def select(self, query: Any = None, budget: int | None = None, **kwargs: Any) -> Selection:
        """Pick tokens for ``query`` from the current image (see :func:`foveate.select`)."""
        kwargs.setdefault("config", self.select_config)
        kwargs.setdefault("scorer", self.scorer)
        kwargs.setdefault("weights", self.weights)
        return select(self.texture, query, budget, **kwargs)

    def reset(self) -> None:
        """Forget the current image."""
        self._texture = None
