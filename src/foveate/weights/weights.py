"""The :class:`Weights` artifact: save, load, and build scorers from it (see the package docstring)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from ..core.errors import WeightsError
from ..query.scorer import (DEFAULT_NEED, DEFAULT_WEIGHTS, NEED_FLOOR, TEXT_FILL, TEXT_HEIGHT, TEXT_PAD, TEXT_SHARPNESS,
                            Scorer, handset_scorer)
from ..query.terms import QUERY_TERMS

FORMAT = "foveate-weights"
#: Bump when the meaning of a stored tensor changes; a file of another version is refused (WeightsError).
FORMAT_VERSION = 1
DEFAULT_PATH = Path(__file__).resolve().parent / "default.safetensors"
_META_KEY = "foveate"


@dataclass
class Weights:
    """Everything relevance needs, independent of a texture's channel layout.

    Attributes:
        name: ``"handset"``, ``"default"`` or the file it was read from.
        channel: channel -> (mean-mip weight, max-mip weight) of the score.  A channel not listed here keeps its
            hand-set weight (``DEFAULT_WEIGHTS``): training learns nothing about a channel it never saw vary (the
            video's ``motion``, ``prev_relevance`` and ``fixations``, caller attention maps).
        need: channel -> (mean-mip weight, max-mip weight) of the need for detail.
        query, query_need: query term -> weight in the score / in the need.
        bias, need_floor: constants of the score and the need.
        level_prior: per level, added to the quadtree's log-priority.
        ranker: the ``text`` term's learned answer ranker (``None``: hand-set matching).
        extent: which neighbours of a likely line continue its answer (``foveate.query.text.extent``; ``None``, as in
            files written before it: the ranker's lines alone are painted).
        text_sharpness, text_pad, text_fill: how the ranker's probabilities are painted (a file without a fill:
            ``TEXT_FILL``, every tile a line touches at full value).
        text_height: the print's height per OCR box height, measured on the training pages (a file without it:
            ``TEXT_HEIGHT``); the ``auto`` mode's legibility estimate.
        floor: the uniform-floor gate's weights by feature (``None``: no floor).
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
    ranker: Any = None
    text_sharpness: float = TEXT_SHARPNESS
    text_pad: float = TEXT_PAD
    text_fill: float = TEXT_FILL
    floor: dict[str, float] | None = None
    meta: dict = field(default_factory=dict)
    text_height: float = TEXT_HEIGHT
    extent: Any = None
    _scorers: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_handset(self) -> bool:
        return self.name == "handset"

    @classmethod
    def handset(cls) -> Weights:
        """The hand-set constants of :mod:`foveate.query.scorer` and the query terms."""
        return cls("handset", {k: tuple(v) for k, v in DEFAULT_WEIGHTS.items()},
                   {k: (0.0, float(v)) for k, v in DEFAULT_NEED.items()},
                   {n: t.weight for n, t in QUERY_TERMS.items()}, {n: t.need_weight for n, t in QUERY_TERMS.items()})

    def scorer(self, channels: Sequence[str], device: torch.device | str = "cpu") -> Scorer:
        """A :class:`Scorer` for this channel layout (cached per layout, query-term set and device)."""
        if self.is_handset:
            return handset_scorer(channels, torch.device(device))
        key = (tuple(channels), tuple(QUERY_TERMS), str(device))
        if key not in self._scorers:
            unseen = {k: v for k, v in DEFAULT_WEIGHTS.items() if k not in self.channel}  # see the class docstring
            sc = Scorer(channels, weights={**unseen, **self.channel}, need={k: v[1] for k, v in self.need.items()},
                        need_mean={k: v[0] for k, v in self.need.items()}, query_weights=self.query,
                        query_need=self.query_need, bias=self.bias, need_floor=self.need_floor,
                        level_prior=self.level_prior, text_ranker=self.ranker, text_sharpness=self.text_sharpness,
                        text_pad=self.text_pad, text_fill=self.text_fill, floor=self.floor,
                        text_height=self.text_height, text_extent=self.extent)
            self._scorers[key] = sc.to(torch.device(device)).eval()
        return self._scorers[key]

    # -- file format -----------------------------------------------------------------------------------------
    def to_tensors(self) -> tuple[dict[str, torch.Tensor], dict]:
        channels = sorted(set(self.channel) | set(self.need))
        terms = sorted(set(self.query) | set(self.query_need))
        t = {
            "channel_weight": torch.tensor([self.channel.get(c, (0.0, 0.0)) for c in channels], dtype=torch.float32),
            "channel_need": torch.tensor([self.need.get(c, (0.0, 0.0)) for c in channels], dtype=torch.float32),
            "query_weight": torch.tensor([self.query.get(q, 0.0) for q in terms], dtype=torch.float32),
            "query_need": torch.tensor([self.query_need.get(q, 0.0) for q in terms], dtype=torch.float32),
            "level_prior": torch.tensor(list(self.level_prior) or [0.0], dtype=torch.float32),
        }
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "channels": channels, "query_terms": terms,
                "bias": self.bias, "need_floor": self.need_floor, "level_prior_levels": len(self.level_prior),
                "text": {"sharpness": self.text_sharpness, "pad": self.text_pad, "fill": self.text_fill,
                         "height": self.text_height,
                         "ranker": self.ranker.config() if self.ranker is not None else None,
                         "extent": self.extent.config() if self.extent is not None else None},
                "floor": self.floor, "meta": self.meta}
        if self.ranker is not None:  # one ranker: ranker.<param>; an ensemble: ranker.<member>.<param>
            members = getattr(self.ranker, "members", None)
            parts = {"ranker": self.ranker} if members is None else {f"ranker.{i}": m for i, m in enumerate(members)}
            for prefix, m in parts.items():
                t.update({f"{prefix}.{k}": v.detach().cpu().float().contiguous().clone()
                          for k, v in m.state_dict().items()})
        if self.extent is not None:
            t.update({f"extent.{k}": v.detach().cpu().float().contiguous().clone()
                      for k, v in self.extent.state_dict().items()})
        return t, meta

    def save(self, path: str | Path) -> Path:
        """Write the weights file (safetensors; the description above is its metadata)."""
        from safetensors.torch import save_file

        tensors, meta = self.to_tensors()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        save_file(tensors, str(tmp), metadata={_META_KEY: json.dumps(meta, sort_keys=True)})
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Weights:
        """Read a weights file; a missing, corrupt or other-version file is a :class:`WeightsError`."""
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = Path(path)
        if not path.is_file():
            raise WeightsError(f"no weights file at {path}; pass 'default', 'handset' or a file written by "
                               "'foveate train'")
        try:
            with open(path, "rb") as f:
                head = _header(f.read(8 + 1_000_000))
            tensors = load_file(str(path))
        except (SafetensorError, OSError, ValueError, json.JSONDecodeError) as exc:
            raise WeightsError(f"{path} is not a readable weights file ({str(exc).splitlines()[0][:120]})") from None
        meta = head.get(_META_KEY)
        try:
            meta = json.loads(meta) if isinstance(meta, str) else None
        except json.JSONDecodeError:
            meta = None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise WeightsError(f"{path} is a safetensors file but not foveate weights (no '{FORMAT}' metadata)")
        if meta.get("format_version") != FORMAT_VERSION:
            raise WeightsError(f"{path} has weights format version {meta.get('format_version')}; this foveate reads "
                               f"version {FORMAT_VERSION}: retrain with 'foveate train' or use the matching foveate")
        try:
            return cls._from_parts(str(path), tensors, meta)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise WeightsError(f"{path}: inconsistent weights file ({exc})") from None

    @classmethod
    def _from_parts(cls, name: str, t: dict[str, torch.Tensor], meta: dict) -> Weights:
        channels, terms = meta["channels"], meta["query_terms"]
        cw, cn = t["channel_weight"].tolist(), t["channel_need"].tolist()
        qw, qn = t["query_weight"].tolist(), t["query_need"].tolist()
        if len(cw) != len(channels) or len(cn) != len(channels) or len(qw) != len(terms) or len(qn) != len(terms):
            raise ValueError("tensor rows do not match the named channels / query terms")
        ranker = None
        text = meta.get("text") or {}
        if text.get("ranker"):
            from ..query.text.ranker import AnswerRanker, RankerEnsemble

            config = dict(text["ranker"])
            n = int(config.pop("members", 1))
            members = []
            for prefix in ["ranker."] if n == 1 else [f"ranker.{i}." for i in range(n)]:
                state = {k[len(prefix):]: v for k, v in t.items() if k.startswith(prefix)}
                m = AnswerRanker(kind_embeddings=state["kind_embeddings"].numpy(), **config)
                m.load_state_dict(state)
                members.append(m.eval())
            ranker = members[0] if n == 1 else RankerEnsemble(members).eval()
        extent = None
        if text.get("extent"):
            from ..query.text.extent import AnswerExtent

            extent = AnswerExtent(**text["extent"])
            extent.load_state_dict({k[len("extent."):]: v for k, v in t.items() if k.startswith("extent.")})
            extent.eval()
        prior = tuple(t["level_prior"].tolist()[: int(meta.get("level_prior_levels", 0))])
        # a channel training dropped (constant on every training tile) keeps its hand-set weight; the file lists it
        # only for its need, so its zero weight row is not read as a learned weight
        dropped = set(((meta.get("meta") or {}).get("scorer") or {}).get("constant_channels") or ())
        fill = float(text.get("fill", TEXT_FILL))
        if not 0.0 <= fill <= 1.0:  # NaN fails too
            raise ValueError(f"text fill {fill} is outside [0, 1]")
        height = float(text.get("height", TEXT_HEIGHT))
        if not 0.0 < height <= 2.0:
            raise ValueError(f"text height {height} is outside (0, 2]")
        return cls(name, {c: tuple(v) for c, v in zip(channels, cw) if c not in dropped},
                   {c: tuple(v) for c, v in zip(channels, cn)},
                   dict(zip(terms, qw)), dict(zip(terms, qn)), float(meta.get("bias", 0.0)),
                   float(meta.get("need_floor", NEED_FLOOR)), prior, ranker,
                   float(text.get("sharpness", TEXT_SHARPNESS)), float(text.get("pad", TEXT_PAD)),
                   fill, meta.get("floor"), meta.get("meta") or {}, height, extent)

    def describe(self) -> dict:
        """A short summary for ``foveate info`` and logs."""
        return {"name": self.name, "ranker": self.ranker is not None, "extent": self.extent is not None,
                "floor": self.floor is not None,
                "level_prior": [round(v, 3) for v in self.level_prior], **{k: self.meta[k] for k in
                ("created", "foveate_version", "datasets", "seed") if k in self.meta}}


def _header(head: bytes) -> dict:
    """The safetensors header's ``__metadata__`` (the first 8 bytes give the header's length)."""
    if len(head) < 8:
        raise ValueError("file too short")
    n = int.from_bytes(head[:8], "little")
    if n <= 0 or n > len(head) - 8:
        raise ValueError("bad header length")
    return json.loads(head[8 : 8 + n]).get("__metadata__") or {}


_CACHE: dict[str, Weights] = {}
_LOCK = threading.Lock()


def load_weights(spec: str | Path | Weights | None = None) -> Weights:
    """Resolve ``spec`` (see the package docstring) to :class:`Weights`; files are read once per process."""
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


def resolve_scorer(weights: str | Path | Weights | None, scorer: Scorer | None, channels: Sequence[str],
                   device: torch.device | str) -> Scorer:
    """The scorer ``select`` uses: an explicit ``scorer`` wins, else one built from ``weights`` (default: the
    package's default weights)."""
    if scorer is not None:
        return scorer
    return load_weights(weights).scorer(channels, device)

