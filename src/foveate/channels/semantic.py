"""Semantic channels (DESIGN.md channels 18-33): a dense image-text embedding per tile, PCA-compressed to 16
dimensions (the ``semantic`` query term, :mod:`foveate.query.semantic`, compares them with the query's text
embedding).

Optional: it needs an image-text model, and no weights are ever downloaded.  Configure one with

* ``EncodeConfig(options={"semantic_model": DIR_OR_ID})`` (CLI: ``--semantic-model``), or
* the environment variable ``FOVEATE_SEMANTIC_MODEL``,

where the value is a local directory holding a ``transformers`` CLIP checkpoint (``config.json``, weights,
tokenizer files) or the id of one already in the user's Hugging Face model cache (loaded with
``local_files_only``).  ``semantic_encoder`` picks the backend from :data:`ENCODERS` (default ``clip``).
With nothing configured the ``semantic`` group is absent (zeros, listed in ``Texture.absent``) and the query
term does nothing; a configured model that cannot be loaded is a :class:`ConfigError`.

Encode (once per image): the vision tower runs once on the whole image (resized so its longer side is
``semantic_size`` pixels, default twice the model's training size, position embeddings interpolated); each
output patch token goes through the final layer norm and the visual projection (the dense-CLIP reading of
the patch tokens), the patch map is resampled to the level-0 tile grid, and PCA keeps 16 components.
Stored with the texture: the basis (D, 16), the mean (D,), per-component scales (the channels hold
``0.5 + 0.5 * coef / scale`` in [0, 1]) and the fraction of variance the 16 components keep.

Semantic encoders are a registry of their own (:data:`ENCODERS`, :func:`register_encoder`); ``clip`` is built in.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..core.errors import ConfigError
from .base import ChannelGroup, EncodeContext

if TYPE_CHECKING:
    from ..core.config import EncodeConfig
    from ..core.texture import Texture

ENV_MODEL = "FOVEATE_SEMANTIC_MODEL"
N_COMPONENTS = 16
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ImageTextEncoder(Protocol):
    """What a semantic backend provides."""

    name: str

    def encode_image_dense(self, image: np.ndarray) -> np.ndarray:
        """(H, W, 3) uint8 RGB -> (h', w', D) float32 per-patch embeddings (one pass of the image tower)."""

    def encode_text(self, texts: Sequence[str]) -> np.ndarray:
        """Texts -> (N, D) float32 L2-normalised embeddings in the same space."""


@dataclass(frozen=True)
class EncoderSpec:
    name: str
    load: Callable[[str, dict[str, Any]], ImageTextEncoder]  # (model dir or cached id, options) -> encoder
    description: str


ENCODERS: dict[str, EncoderSpec] = {}


def register_encoder(spec: EncoderSpec) -> EncoderSpec:
    ENCODERS[spec.name] = spec
    return spec


# ----------------------------------------------------------------------------------------------------------
# CLIP through transformers


class ClipEncoder:
    """A ``transformers`` ``CLIPModel`` as a dense image-text encoder.

    Args:
        model: a ``CLIPModel`` (eval mode).  tokenizer: its tokenizer.
        size: the longer side, in pixels, the image is resized to before the image tower (rounded to whole
            patches); default twice the model's ``image_size``.
        mean, std: pixel normalisation (the checkpoint's ``preprocessor_config.json`` when present).
    """

    name = "clip"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        size: int | None = None,
        mean: Sequence[float] = CLIP_MEAN,
        std: Sequence[float] = CLIP_STD,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        vc = model.config.vision_config
        self.patch = int(vc.patch_size)
        self.size = int(size or 2 * vc.image_size)
        self.mean = np.asarray(mean, np.float32)
        self.std = np.asarray(std, np.float32)
        vm = model.vision_model
        self._vision = getattr(vm, "vision_model", vm)  # transformers 5 wraps the transformer once more
        self.max_text_tokens = int(model.config.text_config.max_position_embeddings)

    def _pixels(self, image: np.ndarray) -> tuple[Any, tuple[int, int]]:
        import cv2
        import torch

        h, w = image.shape[:2]
        scale = self.size / max(h, w)
        nh = max(self.patch, int(round(h * scale / self.patch)) * self.patch)
        nw = max(self.patch, int(round(w * scale / self.patch)) * self.patch)
        interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
        x = cv2.resize(image, (nw, nh), interpolation=interp).astype(np.float32) / 255.0
        x = (x - self.mean) / self.std
        return torch.from_numpy(x.transpose(2, 0, 1)[None].copy()), (nh // self.patch, nw // self.patch)

    def encode_image_dense(self, image: np.ndarray) -> np.ndarray:
        import torch

        pixels, (gh, gw) = self._pixels(image)
        with torch.inference_mode():
            vision = self.model.vision_model(pixel_values=pixels, interpolate_pos_encoding=True)
            tokens = self._vision.post_layernorm(vision.last_hidden_state[:, 1:, :])  # drop the class token
            dense = self.model.visual_projection(tokens)  # (1, gh*gw, D)
        out: np.ndarray = dense[0].reshape(gh, gw, -1).float().numpy()
        return out

    def encode_text(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        batch = self.tokenizer(
            list(texts), padding=True, truncation=True, max_length=self.max_text_tokens, return_tensors="pt"
        )
        with torch.inference_mode():
            out = self.model.get_text_features(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            feats = getattr(out, "pooler_output", out)
        return torch.nn.functional.normalize(feats.float(), dim=-1).numpy()


def load_clip(source: str, options: dict[str, Any]) -> ClipEncoder:
    """A CLIP checkpoint from a local directory or the local model cache (never downloads)."""
    import json

    from transformers import AutoTokenizer, CLIPModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model = CLIPModel.from_pretrained(source, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"semantic model {source!r} could not be loaded: it must be a local directory with a transformers "
            f"CLIP checkpoint or a model already in the local cache (nothing is downloaded): {exc}"
        ) from None
    mean, std = CLIP_MEAN, CLIP_STD
    pre = Path(source) / "preprocessor_config.json"
    if pre.is_file():
        cfg = json.loads(pre.read_text())
        mean, std = cfg.get("image_mean", mean), cfg.get("image_std", std)
    size = int(options["semantic_size"]) if options.get("semantic_size") else None
    return ClipEncoder(model, tokenizer, size=size, mean=mean, std=std)


register_encoder(
    EncoderSpec(
        "clip", load_clip, "transformers CLIPModel: projected patch tokens of the image tower, pooled text tower"
    )
)


@functools.lru_cache(maxsize=4)
def _load_encoder_cached(encoder: str, source: str, options: tuple[Any, ...]) -> ImageTextEncoder:
    return ENCODERS[encoder].load(source, dict(options))


def load_encoder(encoder: str, source: str, options: dict[str, Any] | None = None) -> ImageTextEncoder:
    """The encoder ``encoder`` (a key of :data:`ENCODERS`) loaded from ``source``, once per process."""
    if encoder not in ENCODERS:
        raise ConfigError(f"unknown semantic encoder {encoder!r}; known: {', '.join(ENCODERS)}")
    opts = tuple(sorted((k, str(v)) for k, v in (options or {}).items() if k == "semantic_size"))
    return _load_encoder_cached(encoder, str(source), opts)


def configured_model(config: EncodeConfig) -> str | None:
    """The semantic model a config asks for: its ``semantic_model`` option, else ``$FOVEATE_SEMANTIC_MODEL``."""
    return config.option("semantic_model") or os.environ.get(ENV_MODEL) or None


# ----------------------------------------------------------------------------------------------------------
# PCA (pure)


@dataclass(frozen=True)
class Pca:
    """A PCA basis: ``coef = (x - mean) @ basis``; ``explained`` is the fraction of the total variance kept."""

    mean: np.ndarray  # (D,)
    basis: np.ndarray  # (D, k), orthonormal columns
    explained: float


def fit_pca(x: np.ndarray, k: int = N_COMPONENTS) -> Pca:
    """PCA of the rows of ``x`` (N, D) by SVD; fewer than k rows or dimensions keep what there is (the basis is
    padded with zero columns to k).  Returns a :class:`Pca`."""
    x = np.asarray(x, np.float64)
    mean = x.mean(0)
    xc = x - mean
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    total = float((s**2).sum())
    r = min(k, vt.shape[0])
    basis = np.zeros((x.shape[1], k))
    basis[:, :r] = vt[:r].T
    explained = float((s[:r] ** 2).sum() / total) if total > 0 else 1.0
    return Pca(mean.astype(np.float32), basis.astype(np.float32), explained)


# ----------------------------------------------------------------------------------------------------------
# The semantic channel group


def _semantic_group(ctx: EncodeContext) -> np.ndarray | None:
    import cv2

    source = configured_model(ctx.config)
    if source is None:
        return None  # no model configured: the group is absent
    name = ctx.config.option("semantic_encoder") or "clip"
    opts = dict(ctx.config.options)
    t0 = time.perf_counter()
    enc = load_encoder(name, source, opts)
    t1 = time.perf_counter()
    dense = enc.encode_image_dense(ctx.image)  # (h', w', D): the image tower, once
    t2 = time.perf_counter()
    gh, gw = ctx.grid
    d = dense.shape[-1]
    # bilinear resampling of the patch map onto the tile grid, 4 channels per call (OpenCV's fast path)
    grid = np.concatenate(
        [
            cv2.resize(np.ascontiguousarray(dense[..., i : i + 4]), (gw, gh), interpolation=cv2.INTER_LINEAR).reshape(
                gh, gw, -1
            )
            for i in range(0, d, 4)
        ],
        axis=-1,
    )  # (gh, gw, D)
    pca = fit_pca(grid.reshape(-1, d))
    coef = (grid.reshape(-1, d) - pca.mean) @ pca.basis  # (gh*gw, 16)
    scale = np.maximum(np.abs(coef).max(0), 1e-6).astype(np.float32)
    ctx.tensors["semantic_mean"] = pca.mean
    ctx.tensors["semantic_basis"] = pca.basis
    ctx.tensors["semantic_scale"] = scale
    ctx.extras["semantic"] = {
        "encoder": name,
        "model": str(source),
        "dim": int(d),
        "patch_grid": list(dense.shape[:2]),
        "components": N_COMPONENTS,
        "explained_variance": pca.explained,
        "timings_ms": {
            "load": (t1 - t0) * 1000.0,
            "image_tower": (t2 - t1) * 1000.0,
            "pca": (time.perf_counter() - t2) * 1000.0,
        },
    }
    out: np.ndarray | None = (0.5 + 0.5 * coef / scale).reshape(gh, gw, N_COMPONENTS).astype(np.float32)
    return out


def semantic_coefficients(texture: Texture) -> np.ndarray:
    """(gh, gw, 16) PCA coefficients of each level-0 tile, read back from the channels."""
    a, b = texture.groups["semantic"]
    ch = texture.mean[0][..., a:b].float().cpu().numpy()
    out: np.ndarray = (ch - 0.5) * 2.0 * texture.tensors["semantic_scale"].float().numpy()
    return out


SEMANTIC = ChannelGroup(
    "semantic",
    tuple(f"sem{i:02d}" for i in range(N_COMPONENTS)),
    _semantic_group,
    "high",
    "dense image-text embedding per tile (CLIP patch tokens), PCA to 16 dims "
    f"(needs a local model: semantic_model option or ${ENV_MODEL})",
)
