"""``foveate train``: learn relevance from annotated data, validate it honestly, write a weights file.

1. **data** -- every source encoded once (cached), split by image into train / validation / test (seeded).
2. **ranker** -- the text term's answer ranker, fitted on the training split (:mod:`.ranker`).
3. **scorer** -- channel weights, query-term weights and the per-level prior, by Poisson regression on the oracle's
   per-tile split priority (:mod:`.tiles`).  The query maps it sees on a training page come from a ranker fitted
   on the *other* half of the training pages (cross-fitting), so the text term's weight is fitted on maps as
   sharp as on unseen pages, not on the ranker's memory of its own training pages.  Then the print's height per
   OCR box height on the training questions' answer lines (the ``auto`` mode's legibility estimate,
   :func:`.ranker.text_height_ratio`).  Then the answer's extent: which neighbours of an answer line hold the rest
   of its answer (:mod:`.extent`), before the text term's painting constants are searched with it, on the
   cross-fitted rankers' maps too (:mod:`.text_term`).
4. **floor** -- the uniform-floor gate, on the training split's (question, budget) pairs (:mod:`.floor`).
5. **report** -- validation hit at every budget for the hand-set weights, the learned ones and the uniform
   layout, from the same textures in the same run; the test split is evaluated once, at the end.

Every selection the run makes (the text-term search, the gate's records, validation, test) uses ``select``'s default
mode, ``auto``.

``TrainConfig.start`` (``foveate train --from WEIGHTS``) skips steps 2-3: the given file's ranker, channel weights,
need and level prior are kept; the print's height and the extent model are fitted again, and the text term's
constants (the grid search closing step 3, on the kept ranker's own maps: the file has no cross-fitted rankers)
and the floor gate are fitted again on the training split -- a new painting constant fitted without refitting a
ranker whose answers depend on its seed (EVAL.md, "Validation and test").  The file must have been trained with the
same sources and seed, so that its validation and test images are this run's too; the run checks the recorded ones.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..core.config import EncodeConfig, SelectConfig
from ..core.device import train_workers
from ..core.errors import BudgetError, ConfigError, DatasetError, FoveateError, WeightsError
from ..core.fork import fork_map
from ..eval.data import SPLIT_SHARES
from ..query.terms import QUERY_TERMS
from ..weights.weights import FloorGate, TextTerm, Weights
from .data import Page, by_split, load_pages, resolve_sources
from .evaluate import format_table, hit_table, ready_query_encoder, records
from .extent import fit_extent
from .floor import choose_gate
from .ranker import Ranker, build_groups, check_rankable, fit_rankers, text_height_ratio, top_k_accuracy
from .text_term import (
    _cross_fit_halves,
    _cross_fit_weights,
    calibrate_text_term,
)
from .tiles import fit_poisson, scorer_fields, tile_rows

OBJECTIVE = (
    "ranker: listwise cross-entropy over a page's OCR lines (uniform target over the answer lines), Adam "
    "with the step size decayed along a cosine to 0 over the epochs, the best held-out epoch kept, the "
    "probabilities of --rankers seeds averaged; scorer: Poisson regression of the oracle's per-tile split "
    "priority (area of not-yet-legible answer boxes) on [mean | max] channels, query maps (cross-fitted "
    "ranker) and a per-level prior; extent: logistic regression of 'this neighbour holds part of the same "
    "answer box' on (answer line, layout neighbour) pairs; floor: weighted logistic regression of "
    "'foveated beats uniform' on (question, budget) pairs, ties labelled uniform (the weights of ties and "
    "of legible coverage by cross-validation over the training images)"
)


@dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Attributes:
        sources: data set folders (``queries.jsonl`` format) and/or ``synth:N``.
        output: the weights file to write.
        cache: where encoded textures and generated synthetic sets are kept between runs.
        seed: the split, the ranker's initialisation and order, the samples -- the whole run is a function of it.
        preset: the encode preset of the training textures (the scorer's channels).
        budgets: where hit is reported (and the floor gate is fitted).
        epochs: ranker epochs (the step size decays to 0 over them; the epoch kept is chosen on a tenth of the
            training pages).
        rankers: answer rankers fitted from consecutive seeds and averaged (one ranker's answers depend on its
            seed: :class:`~foveate.query.text.ranker.RankerEnsemble`; docs/lab/journal.md, "A cold rerun of the
            recipe, and one seed or three").
        prompts: share of questions also asked with a point prompt on the answer (trains the prompt term).
        evaluate_test: evaluate the test split at the end (once).
        start: a weights file (or ``"default"``) whose ranker and scorer are kept; only the text term's constants and
            the floor gate are fitted (see the module docstring).
        workers: processes that fit the rankers side by side and evaluate selections (the text term's search, the
            gate's records, validation, test); ``None``: :func:`foveate.core.device.train_workers`.  The figures and
            the file do not depend on it.
    """

    sources: tuple[str, ...]
    output: Path
    cache: Path = Path("out/train-cache")
    seed: int = 0
    preset: str = "default"
    budgets: tuple[int, ...] = (64, 144, 273, 576)
    epochs: int = 12
    rankers: int = 1
    prompts: float = 0.1
    evaluate_test: bool = True
    start: str | None = None
    workers: int | None = None

    def __post_init__(self) -> None:
        if not self.sources:
            raise ConfigError("give at least one source: a data set folder or synth:N")
        if not self.budgets:
            raise BudgetError("give at least one budget")
        # what select accepts, here and not after minutes of training (a budget is an integer >= 1 token)
        object.__setattr__(self, "budgets", tuple(SelectConfig(budget=b).budget for b in self.budgets))
        if self.epochs < 1:
            raise ConfigError(f"epochs must be at least 1, got {self.epochs}")
        if self.rankers < 1:
            raise ConfigError(f"rankers must be at least 1, got {self.rankers}")
        if self.workers is not None and self.workers < 1:
            raise ConfigError(f"workers must be at least 1, got {self.workers}")
        if not 0.0 <= self.prompts <= 1.0:
            raise ConfigError(f"prompts is a share of the questions, in [0, 1], got {self.prompts}")


def check_output(path: Path, what: str = "output") -> None:
    """Refuse, before any work, a file path that cannot be written: a folder, something other than a file (a
    device), a parent that is a file or cannot be created, a folder that cannot be written to.  A
    :class:`~foveate.core.errors.ConfigError` naming ``what``; nothing is created."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a folder; give the path of the file to write in it")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{what} {path} exists and is not a regular file; give a file path")
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # the folders the writer creates hang below the nearest existing one
    if not parent.is_dir():
        raise ConfigError(f"{what} {path}: {parent} is not a folder, so no file can be written below it")
    try:  # os.access is not enough: root passes it on a read-only file system, or in /proc
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot write in {parent} ({exc.strerror or exc})") from None


def save_weights(weights: Weights, path: Path) -> Path:
    """``weights.save(path)``; a failure to write is a :class:`~foveate.core.errors.FoveateError` that leaves no
    partial file behind (``Weights.save`` writes ``<path>.tmp`` first, then renames it)."""
    try:
        return weights.save(path)
    except OSError as exc:
        tmp = path.with_name(path.name + ".tmp")
        with contextlib.suppress(OSError):
            if tmp.is_file():
                tmp.unlink()
        raise FoveateError(f"could not write the weights to {path}: {exc.strerror or exc}") from None


def check_config(cfg: TrainConfig) -> None:
    """What can be known wrong before the data are read and encoded: the output path, the cache folder, a preset
    without the text group (the answer ranker learns from OCR lines), a ``start`` file without a ranker."""
    from ..channels.registry import resolve_groups

    check_output(cfg.output)
    groups = resolve_groups(EncodeConfig(preset=cfg.preset))  # an unknown preset is a ConfigError
    if "text" not in groups:
        raise ConfigError(
            f"preset {cfg.preset!r} has no text group (no OCR): foveate train learns where answers are from the OCR "
            "lines of the training pages; train with a preset that reads text (default or full)"
        )
    if cfg.start is not None:
        from ..weights import load_weights

        if load_weights(cfg.start).text.ranker is None:
            raise WeightsError(f"--from {cfg.start}: these weights have no answer ranker to keep; train without --from")
    try:
        cfg.cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cache {cfg.cache}: cannot create the folder ({exc.strerror or exc})") from None


@dataclass
class TrainResult:
    weights: Weights
    report: dict
    markdown: str = ""
    path: Path | None = None
    timings_s: dict[str, float] = field(default_factory=dict)


def _sets_digest(folders: list[Path]) -> dict[str, str]:
    out = {}
    for f in folders:
        h = hashlib.sha256((f / "queries.jsonl").read_bytes()).hexdigest()[:16]
        out[f.resolve().name] = h
    return out


def _fit_rankers_cross_fitted(train_pages: list[Page], cfg: TrainConfig, log) -> tuple[Ranker, dict, list[Ranker]]:
    """The ranker on every training page, and the two cross-fitting rankers (each on one half), fitted side by side
    in ``cfg.workers`` processes: ``(ranker, report, [ranker for half 0's maps, ranker for half 1's maps])``."""
    halves = _cross_fit_halves(len(train_pages), cfg.seed)
    calls = [(train_pages, cfg.seed, cfg.rankers, cfg.epochs, log)]
    check_rankable(train_pages, cfg.seed, cfg.rankers)
    for k, half in enumerate(halves):
        other = [train_pages[i] for i in halves[1 - k]]
        log(f"cross-fitting: ranker on {len(other)} pages for the maps of {len(half)} others")
        calls.append((other, cfg.seed + 10 + k * cfg.rankers, cfg.rankers, cfg.epochs, None))
        check_rankable(
            other, cfg.seed + 10 + k * cfg.rankers, cfg.rankers, "half of the training split (cross-fitting)"
        )
    ready_query_encoder(train_pages)
    (ranker, report), *cross = fork_map(_fit_rankers, calls, cfg.workers or 1)
    return ranker, report, [r for r, _ in cross]


def _fit_rankers(pages: list[Page], seed: int, members: int, epochs: int, log) -> tuple[Ranker, dict]:
    return fit_rankers(pages, seed=seed, members=members, max_epochs=epochs, log=log or (lambda *_: None))


def drop_constant_channels(fields: dict, data) -> list[str]:
    """Leave out the channels that were constant on every training tile (``motion`` on still images): nothing was
    learned about them, so a scorer falls back to their hand-set weights (:class:`~foveate.query.scorer.Scorer`), as
    it does for the channels training never saw (the video's ``prev_relevance`` and ``fixations``, caller attention
    maps)."""
    dropped = []
    for name in list(fields["channel"]):
        cols = [data.columns.index(f"{s}:{name}") for s in ("mean", "max")]
        if not np.any(np.ptp(data.x[:, cols], axis=0)):
            del fields["channel"][name]
            dropped.append(name)
    return dropped


def source_name(spec) -> str:
    """A source as the weights file records it: ``synth:N`` as given, a folder by its name (no machine paths)."""
    spec = str(spec)
    return spec if spec.startswith("synth:") else Path(spec).name


PROMPT_RULE = "hand-set (a point is the caller's own instruction; the fitted weight is reported, not used)"


def keep_handset_prompt(learned: Weights, handset: Weights) -> float:
    """Give the prompt term its hand-set weight back; return the fitted one.  The training prompts are synthetic (a
    point drawn inside the answer box, half of them beside the question's text), and the Poisson fit shares their
    signal with the text term: it gave 1.8 where the clicked tiles need ~4 to lead a selection (tests/selection,
    tests/video).  Validation and test are scored without prompts, so their figures do not depend on this."""
    fitted = float(learned.query.get("prompt", 0.0))
    learned.query = {**learned.query, "prompt": handset.query["prompt"]}
    learned.query_need = {**learned.query_need, "prompt": handset.query_need["prompt"]}
    learned.scorers.clear()
    return fitted


def _fit_ranker_and_scorer(
    train_p: list[Page], cfg: TrainConfig, log, timings: dict[str, float]
) -> tuple[Weights, Ranker, dict, dict, list[Ranker]]:
    """Steps 2-3: the answer ranker(s), then the scorer by Poisson regression on cross-fitted query maps.
    Returns ``(weights, ranker, ranker report, scorer report, the two cross-fitting rankers)``; the text term's grid
    search comes next."""
    t0 = time.perf_counter()
    log("ranker: fitting on the training split")
    ranker, ranker_report, cross = _fit_rankers_cross_fitted(train_p, cfg, log)
    timings["ranker"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    handset = Weights.handset()
    base = handset.replace(name=cfg.output.stem, text_ranker=ranker)
    page_weights = _cross_fit_weights(train_p, base, cross, cfg.seed)
    terms = list(QUERY_TERMS)
    log("scorer: per-tile Poisson regression on the oracle's split priority")
    data = tile_rows(train_p, page_weights, terms, seed=cfg.seed)
    theta = fit_poisson(data)
    fields = scorer_fields(theta, data.columns)
    constant = drop_constant_channels(fields, data)
    for name in terms:  # a term that never fired in training keeps its hand-set weight
        if not np.any(data.x[:, data.columns.index(f"query:{name}")]):
            fields["query"][name] = handset.query[name]
            fields["query_need"][name] = handset.query_need[name]
    learned = Weights(cfg.output.stem, **fields, text=TextTerm(ranker))
    timings["scorer"] = time.perf_counter() - t0
    return (
        learned,
        ranker,
        ranker_report,
        {
            "poisson_rows": int(len(data.y)),
            "fitted_text_weight": round(learned.query.get("text", 0.0), 3),
            "prompt_weight": PROMPT_RULE,
            "constant_channels": constant,
        },
        cross,
    )


def _start_from(cfg: TrainConfig, n_train: int, log) -> tuple[Weights, dict, dict]:
    """The weights ``cfg.start`` names, to refit their text term and floor gate (see the module docstring):
    ``(weights without a gate, their ranker report, their scorer report)``.  A file without a ranker, or trained on
    other sources, another seed or another split, is a :class:`~foveate.core.errors.WeightsError`."""
    from ..weights import load_weights

    start = load_weights(cfg.start)
    meta = start.meta or {}
    if start.text.ranker is None:
        raise WeightsError(f"--from {cfg.start}: these weights have no answer ranker to keep; train without --from")
    ours = {"sources": [source_name(x) for x in cfg.sources], "seed": cfg.seed}
    theirs = {"sources": meta.get("sources"), "seed": meta.get("seed")}
    if ours != theirs or meta.get("split", {}).get("images", {}).get("train") != n_train:
        raise WeightsError(
            f"--from {cfg.start}: trained on {theirs} ({meta.get('split', {}).get('images')}), this "
            f"run is {ours} ({n_train} training images); its validation and test images would not be "
            "this run's"
        )
    log(f"from {cfg.start}: keeping its ranker, channel weights and level prior; refitting the text term and the gate")
    learned = start.replace(name=cfg.output.stem, floor=None, meta={})
    scorer = dict(meta.get("scorer") or {})
    scorer["refit_from"] = {
        "weights": Path(str(cfg.start)).name,
        "created": meta.get("created"),
        "validation_hit": meta.get("validation_hit"),
    }
    return learned, dict(meta.get("ranker") or {}), scorer


def train(
    cfg: TrainConfig, log: Callable[[str], None] = print, progress: Callable[[str, int, int], None] | None = None
) -> TrainResult:
    """Run the whole pipeline (see the module docstring) and write ``cfg.output``."""
    torch.manual_seed(cfg.seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: intra-op threads only add overhead (and contention on a busy machine)
    try:
        return _train(cfg, log, progress)
    finally:
        torch.set_num_threads(threads)


def _train(cfg: TrainConfig, log, progress) -> TrainResult:
    from .. import __version__

    start = time.perf_counter()
    check_config(cfg)
    workers = train_workers() if cfg.workers is None else cfg.workers
    cfg = dataclasses.replace(cfg, workers=workers)
    timings: dict[str, float] = {}
    folders = resolve_sources(list(cfg.sources), cfg.cache, cfg.seed)
    pages, counts = load_pages(folders, cfg.cache, EncodeConfig(preset=cfg.preset), cfg.seed, progress, cfg.prompts)
    timings["data"] = time.perf_counter() - start
    train_p, val_p, test_p = by_split(pages, "train"), by_split(pages, "val"), by_split(pages, "test")
    log(
        f"{len(pages)} images ({len(train_p)} train / {len(val_p)} validation / {len(test_p)} test), "
        f"{int(counts.get('questions', 0))} questions; {int(counts.get('cached', 0))} textures from the cache, "
        f"{counts.get('encode_s', 0.0):.0f} s encoding"
    )
    if not train_p or not val_p:
        raise DatasetError("the split left no training or no validation image: give more images")

    handset = Weights.handset()
    cross: list[Ranker] | None
    if cfg.start is None:
        learned, ranker, ranker_report, scorer_report, cross = _fit_ranker_and_scorer(train_p, cfg, log, timings)
    else:
        learned, ranker_report, scorer_report = _start_from(cfg, len(train_p), log)
        assert learned.text.ranker is not None  # _start_from refuses weights without a ranker
        ranker, cross = learned.text.ranker, None
    t0 = time.perf_counter()
    height, n_lines = text_height_ratio(train_p)
    learned = learned.replace(text_height=height)
    scorer_report["text_height"] = {"ratio": height, "lines": n_lines}
    log(f"text height: {height:g} of the OCR box height (median over {n_lines} answer lines)")
    timings["scorer"] = timings.get("scorer", 0.0) + time.perf_counter() - t0
    t0 = time.perf_counter()
    extent, extent_report = fit_extent(train_p)
    learned = learned.replace(text_extent=extent)
    log(
        f"extent: {extent_report['pairs']} (line, neighbour) pairs, {extent_report['positive']:.1%} of the same "
        f"answer; log-loss {extent_report.get('log_loss', float('nan')):.3f} (constant rate "
        f"{extent_report.get('log_loss_constant', float('nan')):.3f})"
    )
    timings["extent"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    learned, scorer_report["text_term_search"] = calibrate_text_term(learned, train_p, cfg, log, cross)
    timings["scorer"] += time.perf_counter() - t0

    if cfg.start is None:  # before the floor: the gate is calibrated on the weights it ships with
        scorer_report["fitted_prompt_weight"] = round(keep_handset_prompt(learned, handset), 3)

    t0 = time.perf_counter()
    log("floor: the uniform-floor gate on the training split's (question, budget) pairs")
    recs = records(train_p, {"learned": learned}, cfg.budgets, floor="off", gate_features=True, workers=workers)
    gate, gate_report = choose_gate(recs, "learned", seed=cfg.seed)
    learned = learned.replace(floor=FloorGate(gate))
    log(
        f"floor: legible {gate_report['chosen']['legible']}, tie {gate_report['chosen']['tie']}, margin "
        f"{gate_report['chosen']['margin']} by {gate_report['folds']}-fold cross-validation on the training images"
    )
    timings["floor"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    log("validation: hand-set vs learned vs uniform, same textures")
    compare = {"handset": handset, "learned": learned}
    val_recs = records(val_p, compare, cfg.budgets, prompts=False, workers=workers)
    val_table = hit_table(val_recs)
    val_groups = build_groups(val_p, ranker)
    report: dict[str, Any] = {
        "datasets": {name: {"queries_sha256": d} for name, d in _sets_digest(folders).items()},
        "counts": {k: (round(v, 1) if isinstance(v, float) else v) for k, v in counts.items()},
        "split": {
            "rule": f"sha256(seed:set:image) -> train < {SPLIT_SHARES[0]:.1f} <= val < "
            f"{SPLIT_SHARES[0] + SPLIT_SHARES[1]:.1f} <= test",
            "seed": cfg.seed,
            "images": {"train": len(train_p), "val": len(val_p), "test": len(test_p)},
        },
        "objective": OBJECTIVE,
        "ranker": ranker_report,
        "extent": extent_report,
        "scorer": scorer_report,
        "ranker_validation": {
            "top1": round(top_k_accuracy(ranker, val_groups, 1), 4),
            "top3": round(top_k_accuracy(ranker, val_groups, 3), 4),
            "questions": len(val_groups),
        },
        "floor": gate_report,
        "budgets": list(cfg.budgets),
        "validation_hit": val_table,
    }
    timings["validation"] = time.perf_counter() - t0
    md = [format_table(val_table, ["handset", "learned", "uniform"], "Validation hit % (mode auto)")]
    if cfg.evaluate_test and test_p:
        t0 = time.perf_counter()
        log("test: evaluated once, at the end")
        test_table = hit_table(records(test_p, compare, cfg.budgets, prompts=False, workers=workers))
        report["test_hit"] = test_table
        md.append(format_table(test_table, ["handset", "learned", "uniform"], "Test hit % (mode auto)"))
        timings["test"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - start
    report["timings_s"] = {k: round(v, 1) for k, v in timings.items()}
    learned.meta = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "foveate_version": __version__,
        "seed": cfg.seed,
        "preset": cfg.preset,
        "sources": [source_name(x) for x in cfg.sources],
        "datasets": list(report["datasets"]),
        **report,
    }
    path = save_weights(learned, cfg.output)
    return TrainResult(learned, report, "\n\n".join(md), path, timings)


def summary_json(result: TrainResult) -> str:
    return json.dumps(result.report, indent=1, default=lambda o: None if isinstance(o, float) and math.isnan(o) else o)
