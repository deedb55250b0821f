"""The relevance model as one typed object (:class:`Weights`), its file format, and :func:`load_weights`.

A :class:`Weights` is made of typed parts: the channel weights of the score and of the need for detail, the query
terms' weights, the ``text`` term's learned parts (:class:`TextTerm`: its answer ranker, its extent model, how its
answers are painted) and the uniform-floor gate (:class:`FloorGate`).  Anything a file does not name keeps its
hand-set value (:mod:`.defaults`).  :meth:`foveate.query.scorer.Scorer.from_weights` builds the scorer of a channel
layout from it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..core.errors import WeightsError
from ..query.text.extent import AnswerExtent
from ..query.text.ranker import AnswerRanker, RankerEnsemble
from .defaults import (
    DEFAULT_NEED,
    DEFAULT_WEIGHTS,
    MAX_LEVELS,
    NEED_FLOOR,
    QUERY_NEED,
    QUERY_WEIGHTS,
    TEXT_FILL,
    TEXT_HEIGHT,
    TEXT_PAD,
    TEXT_SHARPNESS,
)

if TYPE_CHECKING:
    from ..query.scorer import Scorer

FORMAT = "foveate-weights"
#: Bump when the meaning of a stored tensor changes; a file of another version is refused (WeightsError).
FORMAT_VERSION = 1
DEFAULT_PATH = Path(__file__).resolve().parent / "default.safetensors"
_META_KEY = "foveate"

#: bounds on the ranker a weights file may ask for (the shipped one: 5 members, hidden 32, intent 8)
MAX_MEMBERS = 64
MAX_WIDTH = 1024
#: the text term's answer ranker: one network, or several averaged
Ranker = AnswerRanker | RankerEnsemble


@dataclass(frozen=True)
class TextTerm:
    """The ``text`` query term's learned parts and how its answers are painted (``foveate.query.text.term``).

    Attributes:
        ranker: the answer ranker (``None``: the hand-set matching).
        extent: which neighbours of a likely line continue its answer (``None``, as in files written before it: the
            ranker's lines alone are painted).
        sharpness, pad, fill: a line of probability p is painted ``clip(1 + log(p) / sharpness, 0, 1)``, its box grown
            by ``pad`` line heights, a tile it covers a fraction f of at that value times ``1 - fill * (1 - f)``.
        height: the print's height per OCR box height, measured on the training pages: the ``auto`` mode's
            legibility estimate.
    """

    ranker: Ranker | None = None
    extent: AnswerExtent | None = None
    sharpness: float = TEXT_SHARPNESS
    pad: float = TEXT_PAD
    fill: float = TEXT_FILL
    height: float = TEXT_HEIGHT

    @property
    def paint(self) -> tuple[float, float, float]:
        """``(sharpness, pad, fill)``."""
        return self.sharpness, self.pad, self.fill


@dataclass(frozen=True)
class FloorGate:
    """The uniform-floor gate (``foveate.selection.floor``): a linear rule over the gate's features; a negative margin
    sends the whole image resized to fit the budget instead of a foveated selection."""

    weights: Mapping[str, float]

    def margin(self, features: Mapping[str, float]) -> float:
        """``w . f``: positive -> the foveated selection is expected to win, negative -> the uniform layout."""
        return float(sum(self.weights.get(k, 0.0) * v for k, v in features.items()))


@dataclass
class Weights:
    """Everything relevance needs, independent of a texture's channel layout.

    Attributes:
        name: ``"handset"``, ``"default"`` or the file it was read from.
        channel: channel -> (mean-mip weight, max-mip weight) of the score.  A channel not listed here keeps its
            hand-set weight (``DEFAULT_WEIGHTS``): training learns nothing about a channel it never saw vary (the
            video's ``motion``, ``prev_relevance`` and ``fixations``, caller attention maps).
        need: channel -> (mean-mip weight, max-mip weight) of the need for detail.
        query, query_need: query term -> weight in the score / in the need (a term not listed: its own weights).
        bias, need_floor: constants of the score and the need.
        level_prior: per level, added to the quadtree's log-priority.
        text: the ``text`` term's learned parts (:class:`TextTerm`).
        floor: the uniform-floor gate (``None``: no floor).
        meta: how the weights were made (data, split, seed, objective, figures, versions).
    """

    name: str
    channel: dict[str, tuple[float, float]]
    need: dict[str, tuple[float, float]]
    query: dict[str, float]
    query_need: dict[str, float]
    bias: float = 0.0
    need_floor: float = NEED_FLOOR
    level_prior: tuple[float, ...] = ()
    text: TextTerm = field(default_factory=TextTerm)
    floor: FloorGate | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: scorers built from these weights, per channel layout, query-term set and device (:meth:`Scorer.from_weights`)
    scorers: dict[tuple[Any, ...], Scorer] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def is_handset(self) -> bool:
        return self.name == "handset"

    @classmethod
    def handset(cls) -> Weights:
        """The hand-set constants of :mod:`.defaults`."""
        return cls(
            "handset",
            {k: (v[0], v[1]) for k, v in DEFAULT_WEIGHTS.items()},
            {k: (0.0, float(v)) for k, v in DEFAULT_NEED.items()},
            dict(QUERY_WEIGHTS),
            {n: QUERY_NEED.get(n, 0.0) for n in QUERY_WEIGHTS},
        )

    def replace(self, **changes: Any) -> Weights:
        """A copy with ``changes`` (fields of this class, or of its :class:`TextTerm` as ``text_<field>``); the copy
        builds its own scorers."""
        text = {k[len("text_") :]: changes.pop(k) for k in list(changes) if k.startswith("text_")}
        if text:
            changes["text"] = dataclasses.replace(changes.get("text", self.text), **text)
        return dataclasses.replace(self, **changes)

    # -- file format -----------------------------------------------------------------------------------------
    def to_tensors(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        channels = sorted(set(self.channel) | set(self.need))
        terms = sorted(set(self.query) | set(self.query_need))
        t = {
            "channel_weight": torch.tensor([self.channel.get(c, (0.0, 0.0)) for c in channels], dtype=torch.float32),
            "channel_need": torch.tensor([self.need.get(c, (0.0, 0.0)) for c in channels], dtype=torch.float32),
            "query_weight": torch.tensor([self.query.get(q, 0.0) for q in terms], dtype=torch.float32),
            "query_need": torch.tensor([self.query_need.get(q, 0.0) for q in terms], dtype=torch.float32),
            "level_prior": torch.tensor(list(self.level_prior) or [0.0], dtype=torch.float32),
        }
        text = self.text
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "channels": channels,
            "query_terms": terms,
            "bias": self.bias,
            "need_floor": self.need_floor,
            "level_prior_levels": len(self.level_prior),
            "text": {
                "sharpness": text.sharpness,
                "pad": text.pad,
                "fill": text.fill,
                "height": text.height,
                "ranker": text.ranker.config() if text.ranker is not None else None,
                "extent": text.extent.config() if text.extent is not None else None,
            },
            "floor": dict(self.floor.weights) if self.floor is not None else None,
            "meta": self.meta,
        }
        if text.ranker is not None:  # one ranker: ranker.<param>; an ensemble: ranker.<member>.<param>
            members = text.ranker.members if isinstance(text.ranker, RankerEnsemble) else None
            parts = {"ranker": text.ranker} if members is None else {f"ranker.{i}": m for i, m in enumerate(members)}
            for prefix, m in parts.items():
                t.update(
                    {f"{prefix}.{k}": v.detach().cpu().float().contiguous().clone() for k, v in m.state_dict().items()}
                )
        if text.extent is not None:
            t.update(
                {
                    f"extent.{k}": v.detach().cpu().float().contiguous().clone()
                    for k, v in text.extent.state_dict().items()
                }
            )
        return t, meta

    def save(self, path: str | Path) -> Path:
        """Write the weights file (safetensors; the description above is its metadata)."""
        from safetensors.torch import save_file

        tensors, meta = self.to_tensors()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        try:
            save_file(tensors, str(tmp), metadata={_META_KEY: json.dumps(meta, sort_keys=True)})
            tmp.replace(path)
        except BaseException:  # a failed write leaves no partial file behind
            tmp.unlink(missing_ok=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | Path) -> Weights:
        """Read a weights file; a missing, corrupt, other-version or inconsistent file is a :class:`WeightsError`."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = Path(path)
        if not path.is_file():
            raise WeightsError(
                f"no weights file at {path}; pass 'default', 'handset' or a file written by 'foveate train'"
            )
        try:
            with open(path, "rb") as f:
                head = _header(f.read(8 + 1_000_000))
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError, RecursionError) as exc:
            raise WeightsError(f"{path} is not a readable weights file ({str(exc).splitlines()[0][:120]})") from None
        raw = head.get(_META_KEY)
        try:
            meta = json.loads(raw) if isinstance(raw, str) else None
        except (ValueError, RecursionError):
            meta = None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise WeightsError(f"{path} is a safetensors file but not foveate weights (no '{FORMAT}' metadata)")
        if meta.get("format_version") != FORMAT_VERSION:
            raise WeightsError(
                f"{path} has weights format version {meta.get('format_version')}; this foveate reads "
                f"version {FORMAT_VERSION}: retrain with 'foveate train' or use the matching foveate"
            )
        try:
            return cls._from_parts(str(path), tensors, meta)
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as exc:
            raise WeightsError(f"{path}: inconsistent weights file ({exc})") from None

    @classmethod
    def _from_parts(cls, name: str, t: dict[str, torch.Tensor], meta: dict[str, Any]) -> Weights:
        channels, terms = _names(meta, "channels"), _names(meta, "query_terms")
        cw, cn = _rows(t, "channel_weight", len(channels), 2), _rows(t, "channel_need", len(channels), 2)
        qw, qn = _rows(t, "query_weight", len(terms)), _rows(t, "query_need", len(terms))
        for key, tensor in t.items():  # a learned parameter that is not finite would select from NaN scores
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise ValueError(f"tensor {key!r} holds a value that is not finite")
        text = _section(meta, "text")
        ranker: Ranker | None = None
        if text.get("ranker"):
            config = dict(_mapping(text["ranker"], "text.ranker"))
            n = int(config.pop("members", 1))
            if not 1 <= n <= MAX_MEMBERS:
                raise ValueError(f"the ranker ensemble has {n} members; a file may hold 1 to {MAX_MEMBERS}")
            for key in ("intent_dim", "hidden"):  # the network's sizes: bounded before anything is allocated
                size = config.get(key, 1)
                if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_WIDTH:
                    raise ValueError(f"text.ranker.{key} must be a whole number from 1 to {MAX_WIDTH}, got {size!r}")
            members = []
            for prefix in ["ranker."] if n == 1 else [f"ranker.{i}." for i in range(n)]:
                state = {k[len(prefix) :]: v for k, v in t.items() if k.startswith(prefix)}
                m = AnswerRanker(kind_embeddings=state["kind_embeddings"].numpy(), **config)
                m.load_state_dict(state)
                members.append(m.eval())
            ranker = members[0] if n == 1 else RankerEnsemble(members).eval()
        extent = None
        if text.get("extent"):
            extent = AnswerExtent(**_mapping(text["extent"], "text.extent"))
            extent.load_state_dict({k[len("extent.") :]: v for k, v in t.items() if k.startswith("extent.")})
            extent.eval()
        levels = int(_number(meta, "level_prior_levels", 0))
        if not 0 <= levels <= MAX_LEVELS:
            raise ValueError(f"level_prior_levels {levels} is outside [0, {MAX_LEVELS}]")
        prior = tuple(t["level_prior"].tolist()[:levels])
        if not all(math.isfinite(v) for v in prior):
            raise ValueError("the level prior holds a non-finite number")
        # a channel training dropped (constant on every training tile) keeps its hand-set weight; the file lists it
        # only for its need, so its zero weight row is not read as a learned weight
        scorer_meta = _section(_section(meta, "meta"), "scorer")
        dropped = set(_names(scorer_meta, "constant_channels") if scorer_meta.get("constant_channels") else ())
        fill, height = _number(text, "fill", TEXT_FILL), _number(text, "height", TEXT_HEIGHT)
        sharpness, pad = _number(text, "sharpness", TEXT_SHARPNESS), _number(text, "pad", TEXT_PAD)
        if not 0.0 <= fill <= 1.0:
            raise ValueError(f"text fill {fill} is outside [0, 1]")
        if not 0.0 < height <= 2.0:
            raise ValueError(f"text height {height} is outside (0, 2]")
        if not 0.0 < sharpness < math.inf or not 0.0 <= pad < math.inf:
            raise ValueError(f"text sharpness {sharpness} must be positive and pad {pad} not negative")
        return cls(
            name,
            {c: (v[0], v[1]) for c, v in zip(channels, cw) if c not in dropped},
            {c: (v[0], v[1]) for c, v in zip(channels, cn)},
            {q: v[0] for q, v in zip(terms, qw)},
            {q: v[0] for q, v in zip(terms, qn)},
            _number(meta, "bias", 0.0),
            _number(meta, "need_floor", NEED_FLOOR),
            prior,
            TextTerm(ranker, extent, sharpness, pad, fill, height),
            _gate(meta.get("floor")),
            dict(_section(meta, "meta")),
        )

    def describe(self) -> dict[str, Any]:
        """A short summary for ``foveate info`` and logs."""
        return {
            "name": self.name,
            "ranker": self.text.ranker is not None,
            "extent": self.text.extent is not None,
            "floor": self.floor is not None,
            "level_prior": [round(v, 3) for v in self.level_prior],
            **{k: self.meta[k] for k in ("created", "foveate_version", "datasets", "seed") if k in self.meta},
        }


#: what :func:`load_weights` resolves: a name (``"default"``, ``"handset"``), a file, or weights already loaded
WeightsSpec = str | Path | Weights | None


# ----------------------------------------------------------------------------------------------------------
# Checks of a file's metadata: every part has the type it is read as, and every number is finite


def _header(head: bytes) -> dict[str, Any]:
    """The safetensors header's ``__metadata__`` (the first 8 bytes give the header's length)."""
    if len(head) < 8:
        raise ValueError("file too short")
    n = int.from_bytes(head[:8], "little")
    if n <= 0 or n > len(head) - 8:
        raise ValueError("bad header length")
    header = json.loads(head[8 : 8 + n])
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else {}


def _mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"'{what}' must be a mapping, got {type(value).__name__}")
    return value


def _section(meta: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``meta[key]`` as a mapping (absent or null: empty)."""
    value = meta.get(key)
    return {} if value is None else _mapping(value, key)


def _names(meta: Mapping[str, Any], key: str) -> list[str]:
    value = meta[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"'{key}' must be a list of names")
    return value


def _number(meta: Mapping[str, Any], key: str, default: float) -> float:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"'{key}' must be a finite number, got {value!r}"[:120])
    return float(value)


def _rows(t: Mapping[str, torch.Tensor], key: str, n: int, width: int = 1) -> list[list[float]]:
    """Tensor ``key`` as ``n`` rows of ``width`` finite numbers."""
    rows = t[key].reshape(-1, width) if t[key].numel() == n * width else None
    if rows is None:
        raise ValueError(f"tensor {key!r} does not have one row per named channel / query term")
    if not bool(torch.isfinite(rows).all()):
        raise ValueError(f"tensor {key!r} holds a non-finite number")
    out: list[list[float]] = rows.tolist()
    return out


def _gate(value: object) -> FloorGate | None:
    if value is None:
        return None
    weights = {}
    for k, v in _mapping(value, "floor").items():
        weights[str(k)] = _number({k: v}, k, 0.0)
    return FloorGate(weights)


# ----------------------------------------------------------------------------------------------------------
# Resolving a spec once, at the edge (CLI, service, predictor)

_CACHE: dict[str, Weights] = {}
_LOCK = threading.Lock()


def load_weights(spec: WeightsSpec = None) -> Weights:
    """Resolve ``spec`` to :class:`Weights`: ``None`` or ``"default"`` (the weights the package ships, else the
    hand-set ones), ``"handset"``, a weights file, or :class:`Weights` (returned as is).  Files are read once per
    process."""
    if isinstance(spec, Weights):
        return spec
    key = "default" if spec is None else str(spec)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
        if key == "handset":
            w = Weights.handset()
        elif key == "default":
            w = Weights.load(DEFAULT_PATH) if DEFAULT_PATH.is_file() else Weights.handset()
            if w.name != "handset":
                w.name = "default"
        else:
            w = Weights.load(Path(key).expanduser())
        _CACHE[key] = w
        return w


def clear_weights_cache() -> None:
    """Forget loaded weights (a test that rewrites a file, or a long-lived process reloading)."""
    with _LOCK:
        _CACHE.clear()
