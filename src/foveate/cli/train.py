"""``foveate train`` (learn relevance weights from annotated data) and ``foveate synth`` (write a synthetic
document data set to train or evaluate on)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import _budgets, app, counting_bar, err, out


@app.command()
def train(
    sources: list[str] = typer.Argument(
        ...,
        help="Data set folders (queries.jsonl + images) and/or synth:N "
        "(N synthetic documents, generated once into the cache; "
        "synth:N:form,letter for other kinds).",
    ),
    output: Path = typer.Option(..., "--output", "-o", help="The weights file to write (.safetensors)."),
    cache: Path = typer.Option(
        Path("out/train-cache"), "--cache", help="Encoded textures and generated sets, kept between runs."
    ),
    seed: int = typer.Option(0, "--seed", help="Split, initialisation and sampling seed."),
    preset: str = typer.Option("default", "--preset", "-p", help="Encode preset of the training textures."),
    budget: list[str] = typer.Option(
        ["64,144,273,576"], "--budget", "-b", help="Budgets reported (and the floor gate is fitted at)."
    ),
    epochs: int = typer.Option(
        12, "--epochs", help="Ranker epochs (the step size decays to 0 over them; the best held-out epoch is kept)."
    ),
    rankers: int = typer.Option(
        1,
        "--rankers",
        help="Answer rankers fitted from consecutive seeds and averaged (the shipped weights average 3).",
    ),
    no_test: bool = typer.Option(False, "--no-test", help="Do not evaluate the test split."),
    start: str | None = typer.Option(
        None,
        "--from",
        help="Keep this weights file's ranker and scorer (default, or a "
        "file trained on the same sources and seed) and refit only "
        "the text term's constants and the floor gate.",
    ),
    report: Path | None = typer.Option(None, "--report", help="Also write the report (JSON) here."),
    workers: int | None = typer.Option(
        None, "--workers", help="Worker processes (default: every core; the result does not depend on it)."
    ),
) -> None:
    """Learn relevance from annotated data: the text term's answer ranker, the scorer's channel and query weights
    and per-level prior, and the uniform-floor gate.  Split by image (train / validation / test); prints
    validation hit for the hand-set and the learned weights from the same run, then the test split once."""

    from ..core.errors import FoveateError
    from ..train import TrainConfig
    from ..train import train as run_train
    from ..train.run import check_config, check_output, summary_json

    if epochs < 1:
        raise FoveateError("--epochs must be at least 1")
    if not 1 <= rankers <= 9:
        raise FoveateError("--rankers must be between 1 and 9")
    if workers is not None and workers < 1:
        raise FoveateError("--workers must be at least 1")
    cfg = TrainConfig(
        tuple(sources),
        output,
        cache,
        seed,
        preset,
        _budgets(budget),
        epochs,
        rankers,
        evaluate_test=not no_test,
        start=start,
        workers=workers,
    )
    if report is not None:
        check_output(report, "--report")
    check_config(cfg)  # the output, the preset, --from, the cache: before the data are read (train checks again)
    with counting_bar() as bar:
        task = bar.add_task("reading", total=None)
        result = run_train(
            cfg,
            log=lambda m: err.print(m, highlight=False, markup=False),
            progress=lambda name, i, n: bar.update(task, description=f"encoding {name}", completed=i + 1, total=n),
        )
    out.print(result.markdown, highlight=False, markup=False)
    rv = result.report["ranker_validation"]
    out.print(
        f"\nranker, validation: top-1 {100 * rv['top1']:.1f} %, top-3 {100 * rv['top3']:.1f} % of "
        f"{rv['questions']} questions; {result.report['timings_s']['total']:.0f} s in all",
        highlight=False,
    )
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(summary_json(result))
    out.print(f"wrote {result.path}", highlight=False)


@app.command()
def synth(
    output: Path = typer.Argument(..., help="Folder to write images/ and queries.jsonl into."),
    n: int = typer.Option(300, "--count", "-n", help="Documents to draw (kinds in turn)."),
    kinds: str = typer.Option(
        "",
        "--kinds",
        show_default=False,
        help="Comma-separated kinds: receipt, invoice, letter, form (default: the first three, "
        "foveate.synth.documents.DEFAULT_KINDS).",
    ),
    seed: int = typer.Option(0, "--seed", help="Everything drawn is a function of the seed."),
) -> None:
    """Write synthetic documents with natural questions and their answer boxes, as a data set that `foveate
    eval` and `foveate train` read."""
    from ..core.errors import FoveateError
    from ..synth import make_dataset
    from ..synth.documents import DEFAULT_KINDS, parse_kinds

    if n < 1:
        raise FoveateError("--count must be at least 1")
    folder = make_dataset(output, n, parse_kinds(kinds) if kinds.strip() else DEFAULT_KINDS, seed)
    lines = sum(1 for _ in open(folder / "queries.jsonl", encoding="utf-8"))
    out.print(f"wrote {n} documents, {lines} questions to {folder}", highlight=False)
