"""The channel-group registry: every group a texture can hold, the presets, and the run of a preset's generators.

The built-in groups are registered here, in the ``full`` preset's order (the 40-channel layout of DESIGN.md, with the
text density beside the text mask: 41 channels)::

    0-2 rgb | 3-4 edges | 5-6 frequency | 7 motion | 8 saliency | 9-11 position | 12-14 clusters |
    15-17 temporal | 18-33 semantic | 34 distance | 35-37 attention | 38 boundaries | 39-40 text

A new group is one module defining a :class:`~.base.ChannelGroup` and one :func:`register_group` line (here for a
built-in, anywhere for a caller's own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.config import EncodeConfig, replace_config
from ..core.device import encode_overlap
from ..core.errors import ConfigError, FoveateError
from . import image
from .base import ChannelGroup, EncodeContext, Generator
from .semantic import SEMANTIC
from .text.group import TEXT

_REGISTRY: dict[str, ChannelGroup] = {}

#: Group order of the ``full`` preset (the DESIGN.md layout); other presets keep this relative order, and a group
#: registered later goes last.
LAYOUT_ORDER: list[str] = []

PRESETS: dict[str, tuple[str, ...]] = {}


def register_group(group: ChannelGroup, presets: tuple[str, ...] = ()) -> ChannelGroup:
    """Add (or replace) a group in the registry and, optionally, to named presets (kept in layout order)."""
    _REGISTRY[group.name] = group
    if group.name not in LAYOUT_ORDER:
        LAYOUT_ORDER.append(group.name)
    for p in presets:
        if p not in PRESETS:
            raise ConfigError(f"unknown preset {p!r}; choose one of {', '.join(PRESETS)}")
        if group.name not in PRESETS[p]:
            PRESETS[p] = tuple(g for g in LAYOUT_ORDER if g in PRESETS[p] or g == group.name)
    return group


def get_group(name: str) -> ChannelGroup:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown channel group {name!r}; known: {', '.join(list_groups())}") from None


def list_groups() -> list[str]:
    """The registered groups, in layout order."""
    return [g for g in LAYOUT_ORDER if g in _REGISTRY]


def resolve_groups(config: EncodeConfig) -> tuple[str, ...]:
    """The groups a config asks for, in layout order."""
    if config.groups is not None:
        names = tuple(config.groups)
        if not names:
            raise ConfigError("groups is empty; name at least one channel group or use a preset")
    else:
        if config.preset not in PRESETS:
            raise ConfigError(f"unknown preset {config.preset!r}; choose one of {', '.join(PRESETS)}")
        names = PRESETS[config.preset]
    for n in names:
        get_group(n)
    if len(set(names)) != len(names):
        raise ConfigError(f"a channel group is named twice in {names}")
    order = {g: i for i, g in enumerate(LAYOUT_ORDER)}
    return tuple(sorted(names, key=order.__getitem__))


def with_semantic_model(config: EncodeConfig, model: str | None) -> EncodeConfig:
    """``config`` with the semantic group on and its image-text model set to ``model`` (a local checkpoint
    directory or a cached model id); ``config`` itself when ``model`` is empty."""
    if not model:
        return config
    groups = resolve_groups(config)
    out: EncodeConfig = replace_config(
        config,
        {
            "groups": groups + ("semantic",) * ("semantic" not in groups),
            "options": {**dict(config.options), "semantic_model": str(model)},
        },
    )
    return out


# ----------------------------------------------------------------------------------------------------------
# The built-in groups, in layout order, and the presets

for _group in (
    image.RGB,
    image.EDGES,
    image.FREQUENCY,
    image.MOTION,
    image.SALIENCY,
    image.POSITION,
    image.CLUSTERS,
    image.TEMPORAL,
    SEMANTIC,
    image.DISTANCE,
    image.ATTENTION,
    image.BOUNDARIES,
    TEXT,
):
    register_group(_group)
PRESETS.update(
    {
        "fast": ("rgb", "edges", "frequency", "motion", "saliency", "position", "distance"),
        "default": (
            "rgb",
            "edges",
            "frequency",
            "motion",
            "saliency",
            "position",
            "clusters",
            "distance",
            "boundaries",
            "text",
        ),
        "full": tuple(LAYOUT_ORDER),
    }
)


# ----------------------------------------------------------------------------------------------------------
# Running a preset's generators


class _Background(threading.Thread):
    """A generator run on its own thread; :meth:`result` joins it and returns (or raises) what it did."""

    def __init__(self, fn: Callable[[EncodeContext], Any], ctx: EncodeContext, name: str) -> None:
        super().__init__(name=f"foveate-{name}", daemon=True)
        self.fn, self.ctx, self.ms = fn, ctx, 0.0
        self.out: Any = None
        self.exc: BaseException | None = None
        self.start()

    def run(self) -> None:
        t0 = time.perf_counter()
        try:
            self.out = self.fn(self.ctx)
        except BaseException as exc:  # noqa: BLE001  (re-raised in the encoding thread)
            self.exc = exc
        self.ms = (time.perf_counter() - t0) * 1000.0

    def result(self) -> tuple[Any, float]:
        self.join()
        if self.exc is not None:
            raise self.exc
        return self.out, self.ms


def run_groups(
    ctx: EncodeContext, names: tuple[str, ...], generators: dict[str, Generator] | None = None
) -> tuple[np.ndarray, list[str], dict[str, float], tuple[str, ...]]:
    """Run the generators of ``names`` in order (``generators`` replaces some by name: same contract).  Background
    groups (:attr:`ChannelGroup.background`) start first, on worker threads, when
    :func:`foveate.core.device.encode_overlap` says so and other groups run meanwhile.

    Returns:
        ``(x0, channel_names, timings_ms, absent)``: the level-0 texture (gh, gw, C) float32, the channel
        names, milliseconds per group (a background group's: on its own thread), and the groups present as zeros
        because their source is missing.
    """
    gh, gw = ctx.grid
    gens = {name: (generators or {}).get(name, get_group(name).generator) for name in names}
    background = [n for n in names if get_group(n).background and n not in (generators or {})]
    started: dict[str, _Background] = {}
    if background and len(background) < len(names) and encode_overlap():
        started = {n: _Background(gens[n], ctx, n) for n in background}
    blocks: list[np.ndarray] = []
    channels: list[str] = []
    timings: dict[str, float] = {}
    absent: list[str] = []
    for name in names:
        group = get_group(name)
        t0 = time.perf_counter()
        try:
            if name in started:
                out, timings[name] = started.pop(name).result()
            else:
                out = gens[name](ctx)
        except FoveateError:
            raise
        except Exception as exc:
            if not group.fallible:
                raise
            out = None  # degrade: the group is absent and the texture says why
            reason = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
            ctx.extras.setdefault("notes", []).append(
                f"the {name} group is absent: its generator failed on this image ({type(exc).__name__}: {reason})"
            )
        if name not in timings:
            timings[name] = (time.perf_counter() - t0) * 1000.0
        if out is None:
            out = np.zeros((gh, gw, len(group.channels)), np.float32)
            absent.append(name)
        out = np.asarray(out, np.float32)
        if out.shape != (gh, gw, len(group.channels)):
            raise RuntimeError(
                f"channel group {name!r} returned shape {out.shape}, expected {(gh, gw, len(group.channels))}"
            )
        blocks.append(out)
        channels.extend(group.channels)
    x0 = np.concatenate(blocks, axis=-1) if blocks else np.zeros((gh, gw, 0), np.float32)
    return np.clip(np.nan_to_num(x0), 0.0, 1.0), channels, timings, tuple(absent)
