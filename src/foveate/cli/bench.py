"""The benchmark commands: ``foveate bench`` (encode and select), ``bench-prompt`` (a VLM request: plan and body),
``bench-serve`` (a real server under load), ``bench-ray`` (the Ray dataset pipeline against the local encode) and
``bench-video`` (incremental video updates against encoding every frame)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import DeviceOpt, WeightsOpt, _numbers, _resolve_image, app, out


@app.command("bench-serve")
def bench_serve(
    clients: int = typer.Option(16, "--clients", "-c", help="Concurrent clients."),
    requests: int = typer.Option(2000, "--requests", "-n", help="Select requests in all."),
    images: int = typer.Option(20, "--images", help="Images uploaded first (generated pages and photos)."),
    size: int = typer.Option(512, "--size", help="Image side in pixels."),
    preset: str = typer.Option("fast", "--preset", "-p", help="Server encode preset."),
    pools: str = typer.Option(
        "",
        "--pools",
        help="Also compare encode pools, e.g. thread,process: uploads/s of --images fresh images per pool.",
    ),
    workers: int = typer.Option(2, "--workers", help="Encode workers for the pool comparison."),
    torch_threads: int = typer.Option(1, "--torch-threads", help="The server's torch threads (FOVEATE_TORCH_THREADS)."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Load-test a real `foveate serve` subprocess: upload images, then many concurrent selects; latency
    percentiles, throughput, errors, server memory before and after."""
    from ..core.extras import require

    require("serve", "foveate bench-serve")
    from ..bench.service import run_service_bench

    run_service_bench(
        clients=clients,
        requests=requests,
        images=images,
        size=size,
        preset=preset,
        pools=[p for p in pools.split(",") if p],
        workers=workers,
        torch_threads=torch_threads,
        json_path=json_path,
        console=out,
    )


@app.command()
def bench(
    image: list[str] = typer.Option(
        [], "--image", "-i", help="Images to benchmark (default: the bundled photo and page, resized to 1024x1024)."
    ),
    repeats: int = typer.Option(20, "--repeats", "-n", help="Repetitions per measurement (median reported)."),
    presets: str = typer.Option("fast,default,full", "--presets", help="Comma-separated presets."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON here."),
    device: str = DeviceOpt,
    weights: str = WeightsOpt,
    folder: Path | None = typer.Option(
        None,
        "--folder",
        help="Instead: encode every image of this folder (or of "
        "its images/) once per --ocr mode, distinct images, "
        "no cache: per-image encode and OCR line recall.",
    ),
    ocr: str = typer.Option("auto,always", "--ocr", help="--folder: OCR modes to compare (auto, always)."),
    limit: int | None = typer.Option(None, "--limit", help="--folder: the first N images (after one warm-up)."),
    recogniser: str = typer.Option("float", "--recogniser", help="--folder: the text recogniser, float or int8."),
) -> None:
    """Benchmark encode (per channel group), select (scoring + cascade, and with the token cut) and memory; or,
    with --folder, the per-image encode of a folder with gated and full-page OCR."""
    if folder is not None:
        from ..bench.corpus import bench_corpus
        from ..core.config import OCR_MODES

        modes = tuple(m.strip() for m in ocr.split(",") if m.strip())
        if not modes or any(m not in OCR_MODES for m in modes):
            raise typer.BadParameter(f"--ocr takes {' and/or '.join(OCR_MODES)}, got {ocr!r}")
        if not folder.is_dir():
            raise typer.BadParameter(f"{folder} is not a folder", param_hint="--folder")
        bench_corpus(
            folder,
            modes=modes,
            preset=presets.split(",")[0] if presets != "fast,default,full" else "default",
            limit=limit,
            recogniser=recogniser,
            console=out,
            json_path=json_path,
        )
        return
    from ..bench.encode import run_bench

    run_bench(
        [_resolve_image(p) for p in image],
        repeats=repeats,
        presets=[p for p in presets.split(",") if p],
        json_path=json_path,
        device=device,
        console=out,
        weights=weights,
    )


@app.command("bench-ray")
def bench_ray(
    sources: list[str] = typer.Argument(..., help="Image folders, globs or files (the same images for every run)."),
    preset: str = typer.Option("fast", "--preset", "-p", help="Encode preset."),
    workers: str = typer.Option("1,2", "--workers", help="Ray worker counts to compare, comma-separated."),
    batch_size: int = typer.Option(16, "--batch-size", help="Images per batch (one part file)."),
    repeats: int = typer.Option(3, "--repeats", "-n", help="Repeats of the no-Ray and Ray runs (medians reported)."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Measure `encode --ray` on a local Ray cluster: images/s for each worker count against `encode --store` and
    the worker's code without Ray, Ray's per-image overhead, output bytes per image, reading a texture by id."""
    from ..bench.ray import run_dist_bench

    run_dist_bench(
        sources,
        preset=preset,
        workers=_numbers(workers, "--workers", kind=int),
        batch_size=batch_size,
        repeats=repeats,
        json_path=json_path,
        console=out,
    )


@app.command("bench-prompt")
def bench_prompt(
    image: list[str] = typer.Option(
        [], "--image", "-i", help="Images (default: the bundled photo and page, resized to 1024x1024)."
    ),
    rules: str = typer.Option(
        "", "--rules", help="Comma-separated VLM rules or model names (foveate models); default: one per rule."
    ),
    budget: str = typer.Option("273", "--budget", "-b", help="Selection budget(s), comma-separated."),
    repeats: int = typer.Option(20, "--repeats", "-n", help="Repetitions per measurement (median reported)."),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Time a VLM request: planning the pictures under each rule plus cutting them and building the body ("plan +
    payload"), and, separately, encoding the pictures as PNG and JPEG."""
    from ..bench.vlm import bench_prompt as run
    from ..vlm.rules.registry import rule_examples

    run(
        [_resolve_image(p) for p in image] or None,
        rules=tuple(r for r in rules.split(",") if r) or tuple(rule_examples()),
        budgets=tuple(int(b) for b in _numbers(budget, "--budget", kind=int)),
        repeats=repeats,
        console=out,
        json_path=json_path,
    )


@app.command("bench-video")
def bench_video(
    source: Path | None = typer.Argument(
        None, help="A video file or folder of frames (default: a generated static-camera clip)."
    ),
    frames: int = typer.Option(200, "--frames", "-n", help="Frames to stream."),
    thresholds: str = typer.Option(
        "0,8",
        "--thresholds",
        help="Change thresholds to compare, comma-separated (0: the exact update; others: motion-compensated).",
    ),
    approximate: str = typer.Option(
        "",
        "--approximate",
        help="Thresholds of extra exact-update sessions that re-encode only the changed "
        "tiles, neighbours and full-frame fallback skipped (comma-separated).",
    ),
    reencode_budgets: str = typer.Option(
        "",
        "--reencode-budgets",
        help="Extra motion-compensated sessions (threshold 8) with these re-encode "
        "budgets, shares of the frame's pixels (comma-separated).",
    ),
    stream: int | None = typer.Option(
        None, "--stream", help="Instead: resident memory over this many generated frames."
    ),
    preset: str = typer.Option("fast", "--preset", "-p", help="Channel preset."),
    cv_threads: int | None = typer.Option(
        None, "--cv-threads", min=1, help="OpenCV threads for the run (default: OpenCV's, one per core)."
    ),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON here."),
    device: str = DeviceOpt,
) -> None:
    """Video benchmark: per-frame cost of incremental updates vs encoding every frame from scratch (same run), or
    resident memory over a long generated stream (--stream N)."""
    from ..bench.video import bench_clip, bench_memory, generated_frame

    if cv_threads is not None:
        import cv2

        cv2.setNumThreads(cv_threads)

    if stream is not None:
        bench_memory(stream, preset=preset, device=device, console=out, json_path=json_path)
        return
    ts, approx = _numbers(thresholds, "--thresholds"), _numbers(approximate, "--approximate")
    budgets = _numbers(reencode_budgets, "--reencode-budgets")
    if source is None:
        clip = (generated_frame(i, (540, 960), drift=False) for i in range(frames))
        bench_clip(
            clip,
            preset=preset,
            thresholds=ts,
            approximate=approx,
            reencode_budgets=budgets,
            max_frames=frames,
            device=device,
            console=out,
            json_path=json_path,
            label="generated static-camera clip (3 moving boxes), 960x540",
        )
    else:
        bench_clip(
            source,
            preset=preset,
            thresholds=ts,
            approximate=approx,
            reencode_budgets=budgets,
            max_frames=frames,
            device=device,
            console=out,
            json_path=json_path,
        )
