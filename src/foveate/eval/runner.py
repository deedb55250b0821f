"""The runner (:func:`run_eval`): each image is decoded and encoded once and serves all its queries, budgets,
variants and baselines; one record per (query, budget).  :class:`EvalConfig` says what a run measures."""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.config import EncodeConfig, SelectConfig, replace_config
from ..core.errors import BudgetError, ConfigError, FoveateError
from ..selection import Selection
from .answers import _Ocr, load_ocr, query_answer_found
from .baselines import BASELINES, METHOD_HELP, Tokens, random_tiles, uniform_tokens, uniform_view
from .data import PROBLEM_KINDS, SPLITS, EvalQuery, Problem, check_boxes, read_queries, size_bucket, split_of
from .metrics import DEFAULT_HIT_THRESHOLD, DEFAULT_MIN_PX, query_metrics
from .oracle import oracle_tiles
from .summary import aggregate, mean_scores
from .vlm import aggregate_vlm, vlm_record


# ----------------------------------------------------------------------------------------------------------
# Configuration


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
    raise ConfigError(f"unknown selection setting {key!r}; use one of {', '.join(SELECT_KNOBS)} "
                      "(budgets are set for the whole run)")


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
        if self.min_px <= 0 or not 0 < self.hit_threshold <= 1:
            raise ConfigError("min_px must be > 0 and hit_threshold in (0, 1]")
        if self.random_seeds < 1:
            raise ConfigError("random_seeds must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise ConfigError("limit must be at least 1")
        if self.split is not None and self.split not in SPLITS:
            raise ConfigError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        from ..vlm import get_rule

        object.__setattr__(self, "vlm", tuple(dict.fromkeys(get_rule(r).name for r in self.vlm)))
        labels = [weights_label(w) for w in self.compare_weights]
        if len(set(labels)) != len(labels) or set(labels) & {n for n, _ in self.variants}:
            raise ConfigError(f"compared weights need distinct names (file stems), got {labels}")

    @property
    def rows(self) -> list[tuple[str, SelectConfig, str | None]]:
        """Every foveate row: ``(name, select config, weights)``."""
        return ([("foveate", self.select, self.weights)] + [(f"foveate:{n}", c, self.weights) for n, c in self.variants]
                + [(f"foveate:{weights_label(w)}", self.select, w) for w in self.compare_weights])

    @property
    def methods(self) -> list[str]:
        return [name for name, _, _ in self.rows] + [b for b in BASELINES if b in self.baselines]

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("budgets", "baselines", "min_px", "hit_threshold", "random_seeds", "seed",
                                           "limit", "ocr", "ocr_budgets", "max_error_rate", "weights",
                                           "compare_weights", "split", "split_seed", "vlm", "mosaic_ocr")}
        d["encode"] = self.encode.to_dict()
        d["select"] = {k: getattr(self.select, k) for k in SELECT_KNOBS}
        d["variants"] = {n: {k: getattr(c, k) for k in SELECT_KNOBS} for n, c in self.variants}
        return d


# ----------------------------------------------------------------------------------------------------------
# The runner


@dataclass
class EvalResult:
    """Everything a run produced.  ``records``: one dict per (query, budget)."""

    data_dir: str
    config: EvalConfig
    records: list[dict]
    problems: list[Problem]
    counts: dict[str, int]
    timings_s: dict[str, float]
    ocr: dict[str, str]

    def to_dict(self) -> dict:
        return {
            "data_dir": self.data_dir, "config": self.config.to_dict(), "counts": self.counts,
            "vlm": aggregate_vlm(self.records),
            "timings_s": {k: round(v, 3) for k, v in self.timings_s.items()}, "ocr": self.ocr,
            "methods": {m: METHOD_HELP.get(m.split(":")[0], "") for m in self.config.methods},
            "summary": aggregate(self.records, self.config.methods),
            "by_size": aggregate(self.records, self.config.methods, key="bucket"),
            "problem_kinds": {k: v for k, v in PROBLEM_KINDS.items() if any(p.kind == k for p in self.problems)},
            "problems": [p.to_dict() for p in self.problems],
            "records": self.records,
        }


def _score(tokens: Tokens, q: EvalQuery, image_size: tuple[int, int], cfg: EvalConfig) -> dict:
    m = query_metrics(tokens.boxes, None, q.boxes, image_size, q.text_heights, cfg.min_px, cfg.hit_threshold,
                      token_scales=tokens.scales, any_box=bool(q.meta.get("repeated_value")))
    return {"coverage": m.coverage, "legible_coverage": m.legible_coverage, "hit": m.hit, "tokens": len(tokens)}


def _tile_set(sel: Selection) -> frozenset:
    return frozenset(zip(sel.levels.tolist(), sel.rows.tolist(), sel.cols.tolist()))


def sample_queries(queries: list[EvalQuery], limit: int | None, seed: int) -> list[EvalQuery]:
    """``limit`` queries drawn at random with ``seed`` (all when ``limit`` is None), kept in file order."""
    if limit is None or limit >= len(queries):
        return queries
    idx = np.random.default_rng(seed).choice(len(queries), size=limit, replace=False)
    return [queries[i] for i in sorted(idx)]


def _ocr_setup(cfg: EvalConfig, has_answers: bool) -> tuple[_Ocr | None, dict[str, str]]:
    """The OCR reader (or None) and the column's status: ok, off, not applicable or unavailable (with why)."""
    if cfg.ocr == "off":
        return None, {"status": "off", "reason": "OCR check switched off (--ocr off)"}
    fn, why = load_ocr()
    if cfg.ocr == "on" and fn is None:
        raise FoveateError(why + "; install the OCR extra or run with --ocr off")
    if not has_answers:
        return None, {"status": "not applicable", "reason": "the set provides no answer_text"}
    if fn is None:
        return None, {"status": "unavailable", "reason": why}
    return _Ocr(fn), {"status": "ok", "reason": ""}


@dataclass
class _Run:
    """State shared by the images of one run."""

    cfg: EvalConfig
    data_dir: Path
    device: Any
    ocr: _Ocr | None
    problems: list[Problem] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    t: Counter = field(default_factory=Counter)


def run_eval(data_dir: str | Path, config: EvalConfig | None = None,
             progress: Callable[[int, int], None] | None = None, workers: int | None = None) -> EvalResult:
    """Evaluate foveate and the baselines on a data set folder.

    Each image is decoded and encoded once; all its queries, budgets, variants and baselines reuse the texture.
    ``progress(done, total)`` is called as (query, budget) pairs complete.  ``workers`` > 1 shares the images among
    that many forked processes on the CPU (:func:`~foveate.core.fork.fork_map`); every image is evaluated as one
    process would, so the records are the same, in the same order.  ``None``: one process when the run reads text
    (the OCR already runs on every core, :func:`foveate.core.device.ocr_threads`: more processes only contend), else
    :func:`foveate.core.device.eval_workers`.
    """
    from ..core.device import eval_workers, resolve_device
    from ..core.fork import fork_map

    cfg = config or EvalConfig()
    t_start = time.perf_counter()
    data_dir = Path(data_dir)
    queries, problems, n_lines = read_queries(data_dir)
    if cfg.split is not None:
        queries = [q for q in queries if split_of(data_dir.resolve().name, q.image, cfg.split_seed) == cfg.split]
    queries = sample_queries(queries, cfg.limit, cfg.seed)
    ocr, ocr_status = _ocr_setup(cfg, any(q.answers for q in queries))
    run = _Run(cfg, data_dir, resolve_device(cfg.device), ocr, problems)
    by_image: dict[str, list[EvalQuery]] = defaultdict(list)
    for q in queries:
        by_image[q.image].append(q)
    run.counts.update(lines=n_lines, queries_read=n_lines - sum(p.skipped for p in problems), queries=len(queries),
                      images=len(by_image), encodes=0)
    done, total = 0, len(queries) * len(cfg.budgets)
    if workers is None:
        workers = 1 if ocr is not None or _reads_text(cfg) else eval_workers()
    workers = max(1, int(workers))
    if run.device.type != "cpu" or len(by_image) < 2:
        workers = 1  # a forked child cannot use the parent's CUDA context
    if workers > 1:
        _ready_query_encoder(cfg, queries)
    calls = [(run, image_rel, qs) for image_rel, qs in by_image.items()]
    for (_, _, qs), part in zip(calls, fork_map(_image_part, calls, workers)):
        run.records += part.records
        run.problems += part.problems
        run.counts.update(part.counts)
        run.t.update(part.t)
        if ocr is not None:
            ocr.calls += part.ocr.calls
            ocr.seconds += part.ocr.seconds
        done += len(qs) * len(cfg.budgets)
        if progress:
            progress(done, total)
    counts, t = run.counts, run.t
    if ocr is not None:
        t["ocr"] = ocr.seconds
        counts["ocr_reads"] = ocr.calls
    counts["records"] = len(run.records)
    counts["evaluated_queries"] = len({r["line"] for r in run.records})
    counts["problems"] = len(problems)
    for p in problems:
        counts[f"problem:{p.kind}"] += 1
    counts["skipped_lines"] = len({p.line for p in problems if p.skipped and p.kind != "budget"})
    t["wall"] = time.perf_counter() - t_start
    problems.sort(key=lambda p: (p.line or 0))
    return EvalResult(str(data_dir), cfg, run.records, problems, dict(counts), dict(t), ocr_status)


def _image_part(run: _Run, image_rel: str, qs: list[EvalQuery]) -> _Run:
    """One image's records, problems, counts, timings and OCR reads, in a run of their own (what a worker sends
    back)."""
    part = _Run(run.cfg, run.data_dir, run.device, _Ocr(run.ocr.fn) if run.ocr is not None else None)
    _eval_image(part, image_rel, qs)
    if part.ocr is not None:
        part.ocr.cache.clear()  # the pixels' reads stay here: only the counts travel back
    return part


def _reads_text(cfg: EvalConfig) -> bool:
    """Whether the run's textures have the text group (OCR at encode, MiniLM for the questions)."""
    from ..channels.registry import resolve_groups

    return "text" in resolve_groups(cfg.encode)


def _ready_query_encoder(cfg: EvalConfig, queries: list[EvalQuery]) -> None:
    """Prepare the question encoder (``foveate prepare``: the onnxruntime export, once per machine) and set it up
    before forking when the textures will read text: the workers inherit it, and the figures do not depend on whether
    ``foveate prepare`` ran before."""
    text = next((q.text for q in queries if q.text), None)
    if text and _reads_text(cfg):
        from ..query.text import embed_query
        from ..query.text.query_onnx import prepare_query_encoder

        prepare_query_encoder()
        embed_query(text)


def _eval_image(run: _Run, image_rel: str, qs: list[EvalQuery]) -> None:
    """Decode and encode one image once, then evaluate all its queries at every budget."""
    from ..core.io import load_image
    from ..core.texture import encode_array
    from ..selection import select

    cfg, problems, t = run.cfg, run.problems, run.t
    path = run.data_dir / image_rel
    if not path.is_file():
        problems += [Problem(q.line, "image_missing", f"image {image_rel} not found in {run.data_dir}", True,
                             image_rel) for q in qs]
        return
    t0 = time.perf_counter()
    try:
        rgb = load_image(path, max_pixels=cfg.encode.max_pixels)
    except FoveateError as exc:
        problems += [Problem(q.line, "image_unreadable", f"image {image_rel}: {exc}", True, image_rel) for q in qs]
        return
    size = (int(rgb.shape[0]), int(rgb.shape[1]))
    checked = []
    for q in qs:
        cq, probs = check_boxes(q, size)
        problems += probs
        if cq is not None:
            checked.append(cq)
    if not checked:
        return
    t1 = time.perf_counter()
    tex = encode_array(rgb, cfg.encode, run.device)
    run.counts["encodes"] += 1
    t["decode"] += t1 - t0
    t["encode"] += time.perf_counter() - t1
    shapes, patch = tex.level_shapes, tex.patch_size
    full = Tokens.from_tiles([(0, r, c) for r in range(shapes[0][0]) for c in range(shapes[0][1])], size, patch,
                             shapes[0])
    want_ocr = run.ocr is not None and any(q.answers for q in checked)
    full_lines = _full_image_lines(run, tex, rgb, checked[0]) if want_ocr else None
    seed_key = zlib.crc32(image_rel.encode())
    row_weights = {name: w for name, _, w in cfg.rows}
    for budget in cfg.budgets:
        cfg_b = {name: dataclasses.replace(c, budget=budget, cut=False) for name, c, _ in cfg.rows}
        t2 = time.perf_counter()
        try:
            blind = select(tex, None, config=cfg_b["foveate"], weights=cfg.weights)
        except BudgetError as exc:
            problems += [Problem(q.line, "budget", f"budget {budget}: {exc}", True, image_rel) for q in checked]
            continue
        baselines: dict[str, Tokens] = {"uniform": uniform_tokens(size, patch, budget),
                                        "query_blind": Tokens.from_selection(blind), "full": full}
        rnd = [Tokens.from_tiles(random_tiles(shapes, budget, cfg.select.gist,
                                              np.random.default_rng([cfg.seed, k, seed_key])), size, patch, shapes[0])
               for k in range(cfg.random_seeds)]
        t["baselines"] += time.perf_counter() - t2
        ocr_here = want_ocr and (cfg.ocr_budgets is None or budget in cfg.ocr_budgets)
        uni_scale = float(baselines["uniform"].scales[0])
        uni_lines = _read(run, uniform_view(rgb, uni_scale), checked[0], "uniform image") if ocr_here else None
        blind_set = _tile_set(blind)
        for q in checked:
            bucket, frac = size_bucket(q, size)
            rec: dict[str, Any] = {"line": q.line, "image": image_rel, "query": q.text, "budget": budget,
                                   "bucket": bucket, "box_area_frac": round(frac, 6), "n_boxes": len(q.boxes),
                                   "meta": q.meta, "methods": {}}
            sels = {}
            for name, c in cfg_b.items():
                t3 = time.perf_counter()
                try:
                    sels[name] = select(tex, q.text, config=c, weights=row_weights[name])
                except BudgetError as exc:
                    problems.append(Problem(q.line, "budget", f"budget {budget}, {name}: {exc}", True, image_rel))
                    break
                t4 = time.perf_counter()
                rec["methods"][name] = _score(Tokens.from_selection(sels[name]), q, size, cfg)
                t["select"] += t4 - t3
                t["metrics"] += time.perf_counter() - t4
            if len(sels) < len(cfg_b):  # every row on the same queries: a row that cannot select drops the record
                continue
            rec["same_as_query_blind"] = _tile_set(sels["foveate"]) == blind_set
            t5 = time.perf_counter()
            for name in cfg.baselines:
                if name == "random":
                    rec["methods"][name] = mean_scores([_score(r, q, size, cfg) for r in rnd])
                elif name == "oracle":
                    tiles = oracle_tiles(shapes, patch, q.boxes, q.text_heights, cfg_b["foveate"], cfg.min_px)
                    rec["methods"][name] = _score(Tokens.from_tiles(tiles, size, patch, shapes[0]), q, size, cfg)
                else:
                    rec["methods"][name] = _score(baselines[name], q, size, cfg)
            if "uniform" in rec["methods"]:
                rec["methods"]["uniform"]["scale"] = round(uni_scale, 4)
            t["baselines"] += time.perf_counter() - t5
            if ocr_here and q.answers:
                rec["ocr"] = _ocr_record(run, tex, q, sels["foveate"], uni_lines, full_lines)
            if cfg.vlm:
                t6 = time.perf_counter()
                read = (lambda img, q=q: _read(run, img, q, "VLM picture")) if ocr_here else None
                rec["vlm"] = {rule: vlm_record(rgb, sels["foveate"], q, rule, read, full_lines, cfg.max_error_rate)
                              for rule in cfg.vlm}
                t["vlm"] += time.perf_counter() - t6
            run.records.append(rec)


def _ocr_record(run: _Run, tex, q: EvalQuery, sel: Selection | None, uni_lines: list | None,
                full_lines: list | None) -> dict:
    """Is ``q``'s answer read in foveate's mosaic, the uniform image, the full image?  ``{method: {exact, fuzzy}}``."""
    from ..render import render_mosaic

    mosaic_lines = _read(run, render_mosaic(tex, sel), q, "mosaic") if sel is not None and run.cfg.mosaic_ocr else None
    out = {}
    for name, lines in (("foveate", mosaic_lines), ("uniform", uni_lines), ("full", full_lines)):
        if lines is not None:
            found = query_answer_found(q, lines, run.cfg.max_error_rate)
            if found is not None:
                out[name] = found
    return out


def _full_image_lines(run: _Run, tex, rgb: np.ndarray, q: EvalQuery) -> list | None:
    """OCR of the full image: the lines the texture's text group already read from these pixels when it has one
    (the same OCR of the same image: not run twice), else a read."""
    from ..query.text import has_text_group, text_index

    if has_text_group(tex):
        return list(text_index(tex).lines)
    return _read(run, rgb, q, "full image")


def _read(run: _Run, image: np.ndarray, q: EvalQuery, what: str) -> list | None:
    """OCR one picture; a failure is a Problem (the OCR cells of the queries concerned stay empty)."""
    try:
        return run.ocr(image)
    except Exception as exc:  # noqa: BLE001 -- any OCR failure is reported, never fatal
        run.problems.append(Problem(q.line, "ocr", f"OCR of the {what} of {q.image} failed: {exc}", False, q.image))
        return None
