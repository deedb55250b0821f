"""The evaluation commands: ``foveate eval`` (token coverage of annotated boxes, against the baselines) and
``eval-video`` (box coverage per frame, incremental updates against encoding every frame)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..core.config import DEFAULT_BUDGET, SelectConfig
from ..core.errors import FoveateError
from ..vlm.rules.registry import rules_help
from .common import (
    DeviceOpt,
    LevelsOpt,
    MaxPixOpt,
    PatchOpt,
    PresetOpt,
    RecogniserOpt,
    WeightsOpt,
    _budgets,
    _encode_config,
    _numbers,
    app,
    counting_bar,
    err,
    out,
)


@app.command("eval")
def eval_command(
    data_dir: Path = typer.Argument(..., help="A folder with queries.jsonl (image, query, boxes per line) and images."),
    budget: list[str] = typer.Option(["273"], "--budget", "-b", help="Budget(s): 273, or 64,144,273,576 for a curve."),
    mode: str = typer.Option("auto", "--mode", "-m", help="auto, quadtree, topk or uniform."),
    floor: str = typer.Option(
        "auto", "--floor", help="quadtree and auto modes: auto (the learned uniform floor) or off."
    ),
    weights: str = WeightsOpt,
    compare_weights: list[str] = typer.Option(
        [],
        "--compare-weights",
        help="Another foveate row with these weights (handset, default or a file), from the same textures; repeatable.",
    ),
    split: str | None = typer.Option(
        None,
        "--split",
        help="Evaluate one split of the images only: train, val or "
        "test (the split foveate train used with --split-seed).",
    ),
    split_seed: int = typer.Option(0, "--split-seed", help="The seed of --split (foveate train's --seed)."),
    area_exponent: float = typer.Option(1.0, "--area-exponent", help="quadtree: weight of the area a split refines."),
    min_level: int = typer.Option(0, "--min-level", help="quadtree: never split below this level."),
    topk_levels: str = typer.Option("4,2,0", "--topk-levels", help="topk: cascade stage levels, e.g. 4,3,2,1,0."),
    topk_candidates: str = typer.Option(
        "default", "--topk-candidates", help="topk: candidates per stage transition, e.g. 500,none (none = keep all)."
    ),
    gist: bool = typer.Option(True, "--gist/--no-gist", help="topk (and the random baseline): add the coarsest level."),
    variant: list[str] = typer.Option(
        [],
        "--variant",
        help="Another foveate row from the same textures: "
        "NAME:key=value[:key=value], e.g. cascade5:mode=topk:topk_levels=4,3,2,1,0.",
    ),
    baselines: str = typer.Option(
        "all",
        "--baselines",
        help="all, none, or a comma-separated subset of uniform, random, query_blind, oracle, full.",
    ),
    min_px: float = typer.Option(8.0, "--min-px", help="Text stays legible while height / scale >= this (px)."),
    hit_threshold: float = typer.Option(0.9, "--hit-threshold", help="A hit: every box legibly covered >= this."),
    limit: int | None = typer.Option(None, "--limit", "-n", help="Evaluate a random sample of N queries."),
    seed: int = typer.Option(0, "--seed", help="Seed for --limit and the random baseline."),
    random_seeds: int = typer.Option(5, "--random-seeds", help="Seeds averaged for the random baseline."),
    ocr: str = typer.Option("auto", "--ocr", help="OCR answer check: auto, on or off."),
    ocr_budget: list[str] = typer.Option([], "--ocr-budget", help="Run the (slow) OCR check at these budgets only."),
    group_by: list[str] = typer.Option(
        [],
        "--group-by",
        help="Also tabulate by this metadata key (e.g. isthing), or by boxes: answers in one box or in several.",
    ),
    vlm: list[str] = typer.Option(
        [],
        "--vlm",
        help=f"VLM rule(s) to plan crops under ({rules_help()}; repeatable "
        "or comma-separated): provider tokens of the plan, the whole image and a uniform resize, and the OCR "
        "answer check on each.",
    ),
    model: list[str] = typer.Option(
        [],
        "--model",
        help="Model name(s) (foveate models; repeatable or comma-separated): like --vlm, under the model's own rule.",
    ),
    mosaic_ocr: bool = typer.Option(
        True,
        "--mosaic-ocr/--no-mosaic-ocr",
        help="Also OCR foveate's mosaic (off: "
        "the OCR check reads the uniform and full images and the --vlm pictures only).",
    ),
    output: Path | None = typer.Option(None, "--output", "-o", help="Output folder (default out/eval/<set>)."),
    plots: bool = typer.Option(False, "--plots", help="Also write curves.png and gallery.png (needs matplotlib)."),
    gallery: int = typer.Option(12, "--gallery", help="Worst queries shown in gallery.png."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the markdown tables (as in eval.md) to stdout."),
    json_out: bool = typer.Option(
        False, "--json", help="Print eval.json without its per-query records to stdout instead of the tables."
    ),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="torch CPU threads (selection's small matmuls gain nothing from more than 1 on a loaded machine).",
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        help="Processes sharing the images (forked, CPU only; "
        "the records do not depend on it). Default: 1 when the textures or the "
        "check read text (the OCR uses every core already), else every core "
        "($FOVEATE_EVAL_WORKERS).",
    ),
    preset: str = PresetOpt,
    patch_size: int = PatchOpt,
    max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt,
    device: str = DeviceOpt,
    text_ocr: str = typer.Option(
        "auto",
        "--text-ocr",
        help="The texture's OCR (encode's --ocr): auto = only where "
        "a detector pass on a small copy finds text; always = "
        "the whole image.",
    ),
    recogniser: str = RecogniserOpt,
) -> None:
    """Measure on annotated data whether the selected tokens cover what each query asks about, next to the
    uniform, random, query-blind and oracle baselines at the same budget(s).  Writes eval.json (every
    per-query record) and eval.md."""

    from ..core.errors import DatasetError
    from ..eval.baselines import BASELINES
    from ..eval.config import EvalConfig, parse_select_value, parse_variant
    from ..eval.plots import load_pyplot
    from ..eval.report import check_output_folder, print_tables, write_outputs
    from ..eval.runner import run_eval

    budgets = _budgets(budget)  # before the weights are read: a bad value is one line, at once
    ocr_budgets = _budgets(ocr_budget, "--ocr-budget") if ocr_budget else None
    sel = SelectConfig(
        mode=parse_select_value("mode", mode),
        area_exponent=area_exponent,
        min_level=min_level,
        topk_levels=parse_select_value("topk_levels", topk_levels),
        topk_candidates=parse_select_value("topk_candidates", topk_candidates),
        gist=gist,
        floor=floor,
    )
    from ..weights import load_weights

    for w in [weights, *compare_weights]:
        load_weights(w)  # fail now, not after the encodes
    config = EvalConfig(
        budgets=budgets,
        encode=_encode_config(
            preset, patch_size, max_levels, max_pixels, ocr=text_ocr, recogniser=recogniser, ocr_flag="--text-ocr"
        ),
        select=sel,
        variants=tuple(parse_variant(v, sel) for v in variant),
        baselines=BASELINES
        if baselines == "all"
        else tuple(b.strip() for b in baselines.split(",") if b.strip() and baselines != "none"),
        min_px=min_px,
        hit_threshold=hit_threshold,
        random_seeds=random_seeds,
        seed=seed,
        limit=limit,
        ocr=ocr,
        ocr_budgets=ocr_budgets,
        device=device,
        weights=weights,
        compare_weights=tuple(compare_weights),
        split=split,
        split_seed=split_seed,
        vlm=tuple(r.strip() for v in vlm for r in v.split(",") if r.strip()),
        models=tuple(m.strip() for v in model for m in v.split(",") if m.strip()),
        mosaic_ocr=mosaic_ocr,
    )
    if threads is not None:
        import torch

        if threads < 1:
            raise FoveateError("--threads must be at least 1")
        torch.set_num_threads(threads)
    if workers is not None and workers < 1:
        raise FoveateError("--workers must be at least 1")
    if plots:
        load_pyplot()  # fail now, not after the run
    outdir = output or Path("out") / "eval" / data_dir.resolve().name
    check_output_folder(outdir, "-o")  # and this too
    with counting_bar("evaluating") as bar:
        task = bar.add_task("eval", total=None)
        result = run_eval(
            data_dir,
            config,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            workers=workers,
        )
    if not result.records:
        for p in result.problems[:20]:
            err.print(str(p), highlight=False, markup=False)
        raise DatasetError(
            f"nothing to evaluate in {data_dir}: {result.counts.get('problems', 0)} problems, "
            "no valid query (see above)"
        )
    if not json_out:
        print_tables(result, out, group_by)
    written = write_outputs(
        result,
        outdir,
        plots=plots,
        gallery=gallery,
        group_by=group_by,
    )
    if json_out:  # what eval.json holds but its records (those stay in the file)
        doc = json.loads(written["json"].read_text())
        doc.pop("records", None)
        print(json.dumps(doc))
        err.print("wrote " + ", ".join(str(p) for p in written.values()), highlight=False)
        return
    if markdown:
        print(written["markdown"].read_text())
    out.print("wrote " + ", ".join(str(p) for p in written.values()), highlight=False)


@app.command("eval-video")
def eval_video(
    root: Path = typer.Argument(
        ...,
        help="A folder with queries.jsonl (image, boxes, sequence, frame_index per line), e.g. a DAVIS 2016 export.",
    ),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", "-b", help="Level-0 tokens per frame (top-k, no gist)."),
    protocols: str = typer.Option(
        "prev-box,first-box,blind", "--protocols", help="prev-box, first-box and/or blind (comma-separated)."
    ),
    approximate: str = typer.Option(
        "8,16",
        "--approximate",
        help="Thresholds of extra exact-update sessions that re-encode only the changed "
        "tiles, neighbours and full-frame fallback skipped (comma-separated; '' for "
        "none).",
    ),
    preset: str = typer.Option("fast", "--preset", "-p", help="Channel preset."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON here."),
    device: str = DeviceOpt,
) -> None:
    """Per-frame coverage of an annotated box, incremental updates vs encoding every frame from scratch (one run)."""
    from ..eval.video import PROTOCOLS, eval_boxes

    chosen = tuple(p.strip() for p in protocols.split(",") if p.strip())
    bad = [p for p in chosen if p not in PROTOCOLS]
    if bad or not chosen:
        raise FoveateError(f"unknown protocol(s) {bad}; choose from {', '.join(PROTOCOLS)}")
    if not (root / "queries.jsonl").is_file():
        raise FoveateError(f"{root}: no queries.jsonl")
    eval_boxes(
        root,
        protocols=chosen,
        budget=budget,
        preset=preset,
        approximate=_numbers(approximate, "--approximate"),
        device=device,
        console=out,
        json_path=json_path,
    )
