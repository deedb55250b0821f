"""Outputs of a run: the tables (rich on a terminal, markdown for EVAL.md), ``eval.json`` with every record and
``eval.md`` (:func:`write_outputs`; with ``plots``, the figures of ``plots``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._tables import plural
from .answers import OCR_METHODS
from .baselines import METHOD_LABELS
from .config import SELECT_KNOBS
from .plots import plot_curves, plot_gallery
from .summary import aggregate
from .vlm import vlm_rows

if TYPE_CHECKING:
    from .runner import EvalResult


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def _ocr_cell(g: dict, m: str, result: EvalResult) -> str:
    if m not in OCR_METHODS:
        return ""
    if result.ocr["status"] != "ok":
        return result.ocr["status"]
    o = g.get("ocr", {}).get(m)
    return f"{_pct(o['exact'])} / {_pct(o['fuzzy'])} (n={o['n']})" if o else "-"


def summary_rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the main table: per budget and method, tokens and the metrics in %, and for a foveated
    row (foveate, a variant, query-blind) how often the uniform floor answered instead (fall-back %)."""
    summ = aggregate(result.records, result.config.methods)
    show_ocr = result.ocr["status"] != "not applicable"
    header = ["budget", "method", "tokens", "coverage %", "legible cov. %", "hit %", "fall-back %"]
    if show_ocr:
        header.append("OCR answer exact / fuzzy %")
    rows = []
    for budget, groups in summ.items():
        g = groups["all"]
        for m in result.config.methods:
            if m not in g:
                continue
            s = g[m]
            label = METHOD_LABELS.get(m, m)
            if m == "random":
                label += f" ({result.config.random_seeds} seeds)"
            row = [
                budget,
                label,
                f"{s['tokens']:.0f}",
                _pct(s["coverage"]),
                _pct(s["legible_coverage"]),
                _pct(s["hit"]),
                _pct(s.get("fell_back")),  # the uniform floor's share of a foveated row; "-" for the others
            ]
            if show_ocr:
                row.append(_ocr_cell(g, m, result))
            rows.append(row)
    return header, rows


def group_rows(result: EvalResult, key: str = "bucket") -> tuple[list[str], list[list[str]]]:
    """Legible coverage / hit (%) per budget and group (box-size bucket, answer boxes or a metadata key), one column
    a method; where the OCR check ran, a last column: answers read exactly (%) in the mosaic / the full image."""
    agg = aggregate(result.records, result.config.methods, key=key)
    methods = result.config.methods
    show_ocr = any("ocr" in g for groups in agg.values() for g in groups.values())
    header = ["budget", "bucket" if key == "bucket" else key, "n"] + [METHOD_LABELS.get(m, m) for m in methods]
    header += ["OCR exact mosaic / full (n)"] if show_ocr else []
    rows = []
    for budget, groups in agg.items():
        for name, g in groups.items():
            rows.append(
                [budget, name, str(g["n"])]
                + [f"{_pct(g[m]['legible_coverage'])} / {_pct(g[m]['hit'])}" if m in g else "-" for m in methods]
            )
            if show_ocr:
                o = g.get("ocr", {})
                rows[-1].append(
                    f"{_pct(o['foveate']['exact'])} / {_pct(o['full']['exact'])} ({o['foveate']['n']})"
                    if "foveate" in o and "full" in o
                    else "-"
                )
    return header, rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    right = {i for i, h in enumerate(header) if h not in ("method", "bucket", "rule") and not h.startswith("OCR")}
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def describe_run(result: EvalResult) -> str:
    """One paragraph: the set, the sizes, the settings, the time."""
    c, cfg = result.counts, result.config
    sel = cfg.select
    quad = f"area_exponent {sel.area_exponent:g}, min_level {sel.min_level}"
    topk = f"levels {','.join(map(str, sel.topk_levels))}, gist {'on' if sel.gist else 'off'}"
    mode = sel.mode + {
        "quadtree": f" ({quad})",
        "topk": f" ({topk})",
        "auto": f" (quadtree: {quad}; topk: {topk})",
    }.get(sel.mode, "")
    text = (
        f"{plural(c.get('evaluated_queries', 0), 'query', 'queries')} on {plural(c.get('encodes', 0), 'image')} "
        f"({plural(c.get('encodes', 0), 'encode')} for {plural(c.get('records', 0), 'query x budget evaluation')}); "
        f"preset {cfg.encode.preset}, patch "
        f"{cfg.encode.patch_size}, mode {mode}; legible when text height / scale >= {cfg.min_px:g} px, hit when "
        f"every box is >= {100 * cfg.hit_threshold:g} % legibly covered; seed {cfg.seed}"
        + (f", random sample of {plural(cfg.limit, 'query', 'queries')}" if cfg.limit else "")
        + f". Wall time {result.timings_s.get('wall', 0):.0f} s."
    )
    if cfg.variants:
        text += (
            " Variants: "
            + "; ".join(
                f"{n} = " + ", ".join(f"{k}={getattr(v, k)}" for k in SELECT_KNOBS if getattr(v, k) != getattr(sel, k))
                for n, v in cfg.variants
            )
            + "."
        )
    return text


def problem_summary(result: EvalResult) -> str:
    c = result.counts
    kinds = {k.split(":", 1)[1]: v for k, v in c.items() if k.startswith("problem:")}
    if not kinds:
        return "No problems in the data."
    parts = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
    return (
        f"{plural(c.get('problems', 0), 'problem')} ({parts}); {c.get('skipped_lines', 0)} of "
        f"{plural(c.get('lines', 0), 'line')} skipped."
    )


def render_markdown(result: EvalResult, title: str | None = None, group_by: Sequence[str] = ()) -> str:
    """The tables as markdown, ready to paste into EVAL.md."""
    title = title or Path(result.data_dir).name
    out = [f"### {title}", "", describe_run(result), ""]
    out += [_md_table(*summary_rows(result)), ""]
    if result.ocr["status"] == "ok":
        out += [
            "OCR: share of queries whose answer_text is read at its box (exact / fuzzy match, see EVAL.md); "
            "foveate = OCR of the mosaic, uniform = of the resized image, full image = of the original.",
            "",
        ]
    elif result.ocr["status"] != "not applicable":
        out += [f"OCR column: {result.ocr['status']} -- {result.ocr['reason']}.", ""]
    same = [r["same_as_query_blind"] for r in result.records if "same_as_query_blind" in r]
    if same:
        out += [f"foveate's selection equals the query-blind one for {100 * np.mean(same):.1f} % of the queries.", ""]
    if any("vlm" in r for r in result.records):
        out += [
            "VLM plans (`--vlm`): provider tokens of foveate's crop plan, of the whole image as the provider takes "
            "it and of a uniform resize with at most the plan's tokens (means per query; plan / image = sum of plan "
            "tokens over sum of image tokens), and the OCR answer check exact / fuzzy % on the pictures as the "
            "model sees them (over the queries read in all three).",
            "",
        ]
        out += [_md_table(*vlm_rows(result.records)), ""]
    out += ["Legible coverage / hit (%) by box size (a query's mean box area as a share of the image):", ""]
    out += [_md_table(*group_rows(result, "bucket")), ""]
    for key in group_by:
        out += [f"Legible coverage / hit (%) by `{key}`:", "", _md_table(*group_rows(result, key)), ""]
    out += [problem_summary(result), ""]
    return "\n".join(out)


def print_tables(result: EvalResult, console, group_by: Sequence[str] = ()) -> None:
    """The same tables with rich, each in the widest layout the console's width takes (:func:`print_table`)."""
    from .._tables import print_table

    def show(title: str, header: list[str], rows: list[list[str]]) -> None:
        right = [h for h in header if not (h in ("method", "bucket", "rule") or h.startswith("OCR"))]
        optional = [h for h in header if h.startswith("OCR")]
        print_table(console, header, rows, title=title, right=right, optional=optional)

    console.print(describe_run(result), highlight=False)
    show("metrics (mean over queries, %)", *summary_rows(result))
    if any("vlm" in r for r in result.records):
        show("VLM plans: provider tokens and OCR answer exact / fuzzy %", *vlm_rows(result.records))
    show("legible coverage / hit % by box size", *group_rows(result, "bucket"))
    for key in group_by:
        show(f"legible coverage / hit % by {key}", *group_rows(result, key))
    if result.ocr["status"] not in ("ok", "not applicable"):
        console.print(f"OCR column: {result.ocr['status']} -- {result.ocr['reason']}", highlight=False)
    for p in result.problems[:20]:
        console.print(str(p), style="yellow", markup=False, highlight=False)
    if len(result.problems) > 20:
        console.print(f"... {len(result.problems) - 20} more problems in the JSON file", highlight=False)
    console.print(problem_summary(result), highlight=False)


def check_output_folder(outdir: str | Path, what: str = "output folder") -> None:
    """Refuse, before the run, an output folder :func:`write_outputs` could not create or write in: a file of that
    name, or a file where a folder above it should be (a :class:`~foveate.core.errors.ConfigError`; nothing is
    created)."""
    from ..core.errors import ConfigError

    out = Path(outdir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{what} {out} exists and is not a folder; give a folder to write eval.json and eval.md in")
    parent = out.absolute()
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{what} {out}: {parent} is not a folder, so no folder can be made below it")


def write_outputs(
    result: EvalResult, outdir: str | Path, *, plots: bool = False, gallery: int = 12, group_by: Sequence[str] = ()
) -> dict[str, Path]:
    """Write ``eval.json`` (config, counts, timings, aggregates, problems, every record) and ``eval.md``; with
    ``plots``, ``curves.png`` (metric vs budget per method) and ``gallery.png`` (the worst queries)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written = {"json": out / "eval.json", "markdown": out / "eval.md"}
    doc = result.to_dict()
    for key in group_by:
        doc[f"by_{key}"] = aggregate(result.records, result.config.methods, key=key)
    written["json"].write_text(json.dumps(doc, separators=(",", ":"), default=_json_default))
    written["markdown"].write_text(render_markdown(result, group_by=group_by))
    if plots:
        written["curves"] = plot_curves(result, out / "curves.png")
        if gallery > 0 and result.records:
            written["gallery"] = plot_gallery(result, out / "gallery.png", gallery)
    return written


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer, np.floating, np.bool_)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
