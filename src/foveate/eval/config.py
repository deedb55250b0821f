"""What an evaluation run measures (:class:`EvalConfig`): the data set, the budgets, the selection and its variants,
the baselines, the weights compared, the split, the OCR check and the VLM rules; and the parsers of the command
line's ``--variant`` values.  The run itself is :mod:`.runner`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import EncodeConfig, SelectConfig, replace_config
from ..core.errors import BudgetError, ConfigError
from .baselines import BASELINES
from .data import SPLITS
from .metrics import DEFAULT_HIT_THRESHOLD, DEFAULT_MIN_PX

SELECT_KNOBS = ("mode", "area_exponent", "min_level", "topk_levels", "topk_candidates", "gist", "floor")


def parse_select_value(key: str, text: str) -> Any:
    """A ``SelectConfig`` field from its command-line spelling: ``topk_levels=4,2,0``,
    ``topk_candidates=500,none`` (or ``default``), ``gist=false``, ``area_exponent=0.5``, ``mode=topk``."""
    t = text.strip().lower()
    try:
        if key in ("mode", "floor"):
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
    raise ConfigError(
        f"unknown selection setting {key!r}; use one of {', '.join(SELECT_KNOBS)} (budgets are set for the whole run)"
    )


def parse_budgets(values: str | list[str], what: str = "--budget") -> tuple[int, ...]:
    """Budgets from the command line (``64,144 273``, one value or several) as ``select`` takes them: whole numbers of
    at least 1 token; anything else is a :class:`~foveate.core.errors.BudgetError` naming ``what``."""
    texts = [values] if isinstance(values, str) else list(values)
    parts = [t for text in texts for t in re.split(r"[,\s]+", text.strip()) if t]
    if not parts:
        raise BudgetError(f"{what}: give at least one budget, e.g. 273 or 64,144,273,576")
    out = []
    for t in parts:
        try:
            n = int(t)
        except ValueError:
            raise BudgetError(f"{what} takes whole numbers of tokens separated by commas, got {t[:40]!r}") from None
        try:
            out.append(SelectConfig(budget=n).budget)
        except BudgetError as exc:
            raise BudgetError(f"{what}: {exc}") from None
    return tuple(out)


def weights_label(spec: str) -> str:
    """A weights spec's row name: ``handset``, ``default``, or a file's stem."""
    return spec if spec in ("handset", "default") else Path(spec).stem


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
        min_px, hit_threshold: the legibility rule and the hit threshold (see ``foveate.eval.metrics``).
        random_seeds: seeds averaged for the random baseline.  seed: base seed (random baseline, ``limit``).
        limit: evaluate a random sample of this many queries (drawn with ``seed``), in file order.
        ocr: ``"auto"`` (when the set has ``answer_text`` and OCR is installed), ``"on"`` (error if missing), ``"off"``.
        ocr_budgets: run the OCR check at these budgets only (``None``: all); OCR is by far the slowest part.
        max_error_rate: fuzzy OCR match tolerance (edits per answer character).
        weights: relevance weights of the foveate rows (``None``: the package's default; ``"handset"``; a file).
        compare_weights: more foveate rows with other weights, each ``foveate:<name>`` (``handset`` or the file's
            stem), from the same textures.
        split, split_seed: evaluate only the images of this split (``train``, ``val``, ``test``; see
            :func:`foveate.eval.data.split_of`) -- the split ``foveate train`` used with the same seed.
        vlm: VLM rules (``foveate.vlm`` specs) to plan crops under: tokens of the plan, the whole image and a uniform
            resize, and the OCR check on each where the OCR check runs (``foveate.eval.vlm``).
        models: model names (``foveate models``) evaluated like ``vlm``, each under its provider's rule.
        mosaic_ocr: also read foveate's mosaic in the OCR check (off: only the uniform image, the full image and
            the VLM rows are read).
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
    weights: str | None = None
    compare_weights: tuple[str, ...] = ()
    split: str | None = None
    split_seed: int = 0
    vlm: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    mosaic_ocr: bool = True

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
        if not (0 < self.min_px < math.inf and 0 < self.hit_threshold <= 1):  # NaN fails both
            raise ConfigError(
                f"min_px must be a finite number > 0 and hit_threshold in (0, 1], got {self.min_px} and "
                f"{self.hit_threshold}"
            )
        if self.random_seeds < 1:
            raise ConfigError("random_seeds must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError("limit must be at least 1")
        if self.split is not None and self.split not in SPLITS:
            raise ConfigError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        from ..vlm import get_rule, model_row

        object.__setattr__(self, "vlm", tuple(dict.fromkeys(get_rule(r).name for r in self.vlm)))
        for name in self.models:
            model_row(name)  # an unknown model fails here, listing the families
        object.__setattr__(self, "models", tuple(dict.fromkeys(str(m).strip() for m in self.models)))
        labels = [weights_label(w) for w in self.compare_weights]
        if len(set(labels)) != len(labels) or set(labels) & {n for n, _ in self.variants}:
            raise ConfigError(f"compared weights need distinct names (file stems), got {labels}")

    @property
    def rows(self) -> list[tuple[str, SelectConfig, str | None]]:
        """Every foveate row: ``(name, select config, weights)``."""
        return (
            [("foveate", self.select, self.weights)]
            + [(f"foveate:{n}", c, self.weights) for n, c in self.variants]
            + [(f"foveate:{weights_label(w)}", self.select, w) for w in self.compare_weights]
        )

    @property
    def methods(self) -> list[str]:
        return [name for name, _, _ in self.rows] + [b for b in BASELINES if b in self.baselines]

    def to_dict(self) -> dict:
        d = {
            k: getattr(self, k)
            for k in (
                "budgets",
                "baselines",
                "min_px",
                "hit_threshold",
                "random_seeds",
                "seed",
                "limit",
                "ocr",
                "ocr_budgets",
                "max_error_rate",
                "weights",
                "compare_weights",
                "split",
                "split_seed",
                "vlm",
                "models",
                "mosaic_ocr",
            )
        }
        d["encode"] = self.encode.to_dict()
        d["select"] = {k: getattr(self.select, k) for k in SELECT_KNOBS}
        d["variants"] = {n: {k: getattr(c, k) for k in SELECT_KNOBS} for n, c in self.variants}
        return d
