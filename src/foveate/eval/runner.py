"""The runner (:func:`run_eval`): each image is decoded and encoded once and serves all its queries, budgets,
variants and baselines; one record per (query, budget).  :class:`EvalConfig` says what a run measures."""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import BudgetError, FoveateError
from ..selection import Selection
from .answers import _Ocr, load_ocr, query_answer_found
from .baselines import METHOD_HELP, Tokens, random_tiles, uniform_tokens, uniform_view
from .config import EvalConfig
from .data import PROBLEM_KINDS, EvalQuery, Problem, check_boxes, read_queries, size_bucket, split_of
from .metrics import query_metrics
from .oracle import oracle_tiles
from .summary import aggregate, mean_scores
from .vlm import aggregate_vlm, vlm_record, vlm_targets

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
            "data_dir": self.data_dir,
            "config": self.config.to_dict(),
            "counts": self.counts,
            "vlm": aggregate_vlm(self.records),
            "timings_s": {k: round(v, 3) for k, v in self.timings_s.items()},
            "ocr": self.ocr,
            "methods": {m: METHOD_HELP.get(m.split(":")[0], "") for m in self.config.methods},
            "summary": aggregate(self.records, self.config.methods),
            "by_size": aggregate(self.records, self.config.methods, key="bucket"),
            "problem_kinds": {k: v for k, v in PROBLEM_KINDS.items() if any(p.kind == k for p in self.problems)},
            "problems": [p.to_dict() for p in self.problems],
            "records": self.records,
        }


def _score(tokens: Tokens, q: EvalQuery, image_size: tuple[int, int], cfg: EvalConfig) -> dict:
    m = query_metrics(
        tokens.boxes,
        None,
        q.boxes,
        image_size,
        q.text_heights,
        cfg.min_px,
        cfg.hit_threshold,
        token_scales=tokens.scales,
        any_box=bool(q.meta.get("repeated_value")),
    )
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
    t: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))


def run_eval(
    data_dir: str | Path,
    config: EvalConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> EvalResult:
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
    run.counts.update(
        lines=n_lines,
        queries_read=n_lines - sum(p.skipped for p in problems),
        queries=len(queries),
        images=len(by_image),
        encodes=0,
    )
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
        for k, v in part.t.items():  # seconds summed, as Counter.update did
            run.t[k] += v
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
    problems.sort(key=lambda p: p.line or 0)
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
    targets = vlm_targets(cfg.vlm, cfg.models)  # (label, rule) per --vlm rule and --model name
    path = run.data_dir / image_rel
    if not path.is_file():
        problems += [
            Problem(q.line, "image_missing", f"image {image_rel} not found in {run.data_dir}", True, image_rel)
            for q in qs
        ]
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
    full = Tokens.from_tiles(
        [(0, r, c) for r in range(shapes[0][0]) for c in range(shapes[0][1])], size, patch, shapes[0]
    )
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
        baselines: dict[str, Tokens] = {
            "uniform": uniform_tokens(size, patch, budget),
            "query_blind": Tokens.from_selection(blind),
            "full": full,
        }
        rnd = [
            Tokens.from_tiles(
                random_tiles(shapes, budget, cfg.select.gist, np.random.default_rng([cfg.seed, k, seed_key])),
                size,
                patch,
                shapes[0],
            )
            for k in range(cfg.random_seeds)
        ]
        t["baselines"] += time.perf_counter() - t2
        ocr_here = want_ocr and (cfg.ocr_budgets is None or budget in cfg.ocr_budgets)
        uni_scale = float(baselines["uniform"].scales[0])
        uni_lines = _read(run, uniform_view(rgb, uni_scale), checked[0], "uniform image") if ocr_here else None
        blind_set = _tile_set(blind)
        for q in checked:
            bucket, frac = size_bucket(q, size)
            rec: dict[str, Any] = {
                "line": q.line,
                "image": image_rel,
                "query": q.text,
                "budget": budget,
                "bucket": bucket,
                "box_area_frac": round(frac, 6),
                "n_boxes": len(q.boxes),
                "meta": q.meta,
                "methods": {},
            }
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
                if c.mode != "uniform":  # did the uniform floor answer instead of a foveated selection?
                    rec["methods"][name]["fell_back"] = sels[name].layout == "uniform"
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
            if "query_blind" in rec["methods"] and cfg_b["foveate"].mode != "uniform":
                rec["methods"]["query_blind"]["fell_back"] = blind.layout == "uniform"
            if "uniform" in rec["methods"]:
                rec["methods"]["uniform"]["scale"] = round(uni_scale, 4)
            t["baselines"] += time.perf_counter() - t5
            if ocr_here and q.answers:
                rec["ocr"] = _ocr_record(run, tex, q, sels["foveate"], uni_lines, full_lines)
            if targets:
                t6 = time.perf_counter()
                read = (lambda img, q=q: _read(run, img, q, "VLM picture")) if ocr_here else None
                rec["vlm"] = {
                    label: vlm_record(rgb, sels["foveate"], q, rule, read, full_lines, cfg.max_error_rate)
                    for label, rule in targets
                }
                t["vlm"] += time.perf_counter() - t6
            run.records.append(rec)


def _ocr_record(
    run: _Run, tex, q: EvalQuery, sel: Selection | None, uni_lines: list | None, full_lines: list | None
) -> dict:
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
    assert run.ocr is not None  # called only where the run reads text (want_ocr)
    try:
        return run.ocr(image)
    except Exception as exc:  # noqa: BLE001 -- any OCR failure is reported, never fatal
        run.problems.append(Problem(q.line, "ocr", f"OCR of the {what} of {q.image} failed: {exc}", False, q.image))
        return None
