"""Frozen configuration dataclasses.  Change them with ``dataclasses.replace``; the encode config's hash is
part of every cache key (saved textures, the store), so two textures are interchangeable iff their
``EncodeConfig.hash()`` and image content hash agree.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import BudgetError, ConfigError

#: Bump when a change to the channel generators changes the numbers they produce.  2: the text group reads only
#: where its gate finds text by default (``ocr="auto"``); 3: and gradient magnitude and edge distance are computed
#: independent of the thread count (last-bit changes); 4: the OCR pads short lines less
#: (:data:`foveate.channels.text.ocr.REC_MIN_WIDTH`), so a few lines read differently; 5: the OCR runs on OpenVINO with
#: an int8 recogniser, and the angle classifier only on a page turned over (:mod:`foveate.channels.text.backend`);
#: 6: the gate reads its blobs' windows before the whole image, so a photo whose blobs hold no line is not read
#: (:mod:`foveate.channels.text.gate`, step 4); 7: the recogniser that reads the lines is an option
#: (``recogniser``: the float model by default, ``int8`` on request), so that a texture names the model that read it,
#: a gate window's lone glyph no longer counts as text, and a page (mostly paper, some ink) is read whole at once.
ENCODER_VERSION = "7"

#: Values of the ``ocr`` option of the text group: ``auto`` (the default: OCR where a detector pass on a small copy
#: finds text, :mod:`foveate.channels.text.gate`) or ``always`` (the whole image, as before 0.2.0).
OCR_MODES = ("auto", "always")
#: Values of the ``recogniser`` option of the text group: ``float`` (the default: the model in the rapidocr wheel) or
#: ``int8`` (that model quantized once per machine by ``foveate prepare --int8``, ~1.7x as fast on OpenVINO; it reads
#: some lines differently, and the shipped weights were fit on the float model's lines: EVAL.md, BENCHMARKS.md).
RECOGNISERS = ("float", "int8")
#: Options of the built-in groups that have a default and a fixed set of values: ``name -> (default, values)``.  A
#: config is checked against them when built, and an option at its default is dropped, so that ``EncodeConfig()``
#: and ``EncodeConfig(options={"ocr": "auto"})`` are the same config (one hash).
CHOICE_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ocr": ("auto", OCR_MODES),
    "recogniser": ("float", RECOGNISERS),
}

DEFAULT_BUDGET = 273
#: the long side, in pixels, above which the overlay and mosaic a selection's files hold are written shrunk
DEFAULT_MAX_SIDE = 1024
MODES = ("auto", "quadtree", "topk", "uniform")
#: Text of height h stays readable in a token of scale s (source pixels per token pixel) when h / s >= LEGIBLE_PX:
#: the evaluation's legible coverage and the ``auto`` mode's choice use the same rule.
LEGIBLE_PX = 8.0
FLOORS = ("auto", "off")


@dataclass(frozen=True)
class EncodeConfig:
    """What ``encode`` computes.

    Attributes:
        preset: named set of channel groups: ``fast``, ``default`` or ``full`` (see
            ``foveate.channels.registry.PRESETS``).
        groups: explicit group names; overrides ``preset`` when given.
        patch_size: P, the side in pixels of a level-0 tile (and of every token).
        max_levels: number of pyramid levels (0..max_levels-1); small images get fewer, down to a 1x1 grid.
        max_pixels: decompression-bomb guard: larger images raise ``ImageTooLargeError`` before decoding.
        n_segments: target number of superpixels for the ``clusters`` and ``boundaries`` groups.
        options: per-group options as sorted ``(key, value)`` pairs (e.g. a semantic model path, ``ocr``: ``auto``
            or ``always``, ``recogniser``: ``float`` or ``int8``, see :data:`CHOICE_OPTIONS`); part of the hash.
    """

    preset: str = "default"
    groups: tuple[str, ...] | None = None
    patch_size: int = 16
    max_levels: int = 5
    max_pixels: int = 64_000_000
    n_segments: int = 50
    options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.patch_size, int) or not 2 <= self.patch_size <= 512:
            raise ConfigError(f"patch_size must be an integer in [2, 512], got {self.patch_size!r}")
        if not isinstance(self.max_levels, int) or not 1 <= self.max_levels <= 10:
            raise ConfigError(f"max_levels must be an integer in [1, 10], got {self.max_levels!r}")
        if not isinstance(self.max_pixels, int) or self.max_pixels < 1:
            raise ConfigError(f"max_pixels must be a positive integer, got {self.max_pixels!r}")
        if not isinstance(self.n_segments, int) or not 1 <= self.n_segments <= 10_000:
            raise ConfigError(f"n_segments must be an integer in [1, 10000], got {self.n_segments!r}")
        if self.groups is not None:
            object.__setattr__(self, "groups", tuple(self.groups))
        options = {str(k): str(v) for k, v in dict(self.options).items()}
        for key, (default, values) in CHOICE_OPTIONS.items():
            if key in options and options[key] not in values:
                raise ConfigError(f"option {key}={options[key]!r} is not one of {', '.join(values)}")
            if options.get(key) == default:
                del options[key]
        object.__setattr__(self, "options", tuple(sorted(options.items())))

    def option(self, key: str, default: str | None = None) -> str | None:
        """An option's value: as set, else ``default``, else its :data:`CHOICE_OPTIONS` default."""
        if default is None and key in CHOICE_OPTIONS:
            default = CHOICE_OPTIONS[key][0]
        return dict(self.options).get(key, default)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["groups"] = list(self.groups) if self.groups is not None else None
        d["options"] = dict(self.options)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EncodeConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        if d.get("groups") is not None:
            d["groups"] = tuple(d["groups"])
        d["options"] = tuple(dict(d.get("options") or {}).items())
        return cls(**d)

    def hash(self) -> str:
        """Stable hash of everything that changes the texture's numbers (16 hex digits).

        ``max_pixels`` is a guard, not a parameter of the result, so it is left out.  Computed once per (frozen)
        config: every ``select`` names its texture by it.
        """
        known = self.__dict__.get("_hash")
        if known is None:
            d = self.to_dict()
            d.pop("max_pixels")
            d["encoder_version"] = ENCODER_VERSION
            blob = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
            known = self.__dict__["_hash"] = hashlib.sha256(blob).hexdigest()[:16]
        return known


@dataclass(frozen=True)
class SelectConfig:
    """How ``select`` spends the budget.

    Attributes:
        budget: tokens to select (a token is one P x P patch at some level).
        mode: ``auto`` (the default: whichever of ``quadtree`` and ``topk`` leaves the answer a learned text term
            expects more legible, :mod:`foveate.selection.auto`; the quadtree when there is no such term),
            ``quadtree`` (cover the whole image, split where relevance x detail is highest), ``topk`` (the
            coarse-to-fine cascade, plus a gist) or ``uniform`` (the whole image resized to fit the budget, as a
            standard VLM takes it).
        area_exponent: quadtree split priority = relevance x need x (2**level) ** area_exponent; 0 splits purely
            by relevance x need, 2 weighs the area a split refines (breadth-first).
        min_level: the quadtree never splits below this level (1 = never cut level-0 tokens).
        topk_levels: cascade stage levels, coarse to fine; clamped to the texture's levels; must end at 0.
        topk_candidates: per stage transition, how many candidates the survivors of a stage should yield at
            the next stage's level (an entry ``None`` = keep every tile, no pruning).  ``None`` (default): 500
            candidates into every intermediate level (the seeds' figure) and 4 x k into level 0.  The last
            stage (level 0) keeps exactly the k tokens left after the gist.
        gist: topk (and auto's top-k candidate): also spend tokens on the whole image at the coarsest level.
        cut: cut the P x P pixel patches (the "token cut"); ``False`` returns boxes and scores only.
        floor: quadtree and auto: ``"auto"`` lets a learned scorer's gate send the uniform layout (mode ``uniform``:
            the whole image resized to fit the budget) where it expects the foveated selection to lose to it;
            ``"off"`` always foveates.
    """

    budget: int = DEFAULT_BUDGET
    mode: str = "auto"
    area_exponent: float = 1.0
    min_level: int = 0
    topk_levels: tuple[int, ...] = (4, 2, 0)
    topk_candidates: tuple[int | None, ...] | None = None
    gist: bool = True
    cut: bool = True
    floor: str = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.budget, numbers.Integral) and not isinstance(self.budget, bool):
            object.__setattr__(self, "budget", int(self.budget))  # NumPy / torch integers are integers too
        if isinstance(self.budget, bool) or not isinstance(self.budget, int):
            raise BudgetError(f"budget must be an integer number of tokens, got {self.budget!r}")
        if self.budget < 1:
            raise BudgetError(f"budget must be at least 1 token, got {self.budget}")
        if self.mode not in MODES:
            raise ConfigError(f"unknown selection mode {self.mode!r}; choose one of {', '.join(MODES)}")
        if self.floor not in FLOORS:
            raise ConfigError(f"unknown floor {self.floor!r}; choose one of {', '.join(FLOORS)}")
        if not 0 <= self.min_level <= 9:
            raise ConfigError(f"min_level must be in [0, 9], got {self.min_level}")
        if not math.isfinite(self.area_exponent):
            raise ConfigError(f"area_exponent must be a finite number, got {self.area_exponent}")
        levels = tuple(int(v) for v in self.topk_levels)
        if not levels or levels[-1] != 0 or any(a <= b for a, b in zip(levels, levels[1:])):
            raise ConfigError(f"topk_levels must be strictly decreasing and end at 0, got {self.topk_levels}")
        object.__setattr__(self, "topk_levels", levels)
        if self.topk_candidates is None:
            return
        cands = tuple(None if c is None else int(c) for c in self.topk_candidates)
        if len(cands) != len(levels) - 1 or any(c is not None and c < 1 for c in cands):
            raise ConfigError(
                f"topk_candidates takes {len(levels) - 1} entries (one per stage transition, positive or None) "
                f"for topk_levels={levels}, got {self.topk_candidates}"
            )
        object.__setattr__(self, "topk_candidates", cands)

    def replace(self, **changes: Any) -> SelectConfig:
        return replace_config(self, changes)


C = TypeVar("C", EncodeConfig, SelectConfig)


def replace_config(config: C, changes: dict[str, Any], context: str = "") -> C:
    """``dataclasses.replace(config, **changes)``, an unknown field a :class:`ConfigError` naming the valid ones."""
    if not changes:
        return config
    unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(config)})
    if unknown:
        valid = ", ".join(f.name for f in dataclasses.fields(config))
        raise ConfigError(f"{context}{type(config).__name__} has no field {', '.join(unknown)}; valid: {valid}")
    return dataclasses.replace(config, **changes)
