"""``select`` and ``encode`` over many inputs: folders (searched for images, recursively), globs and several paths;
one output folder per input, a progress bar, a summary, failures listed and skipped.

One layout for one query or many, one image or many: each query writes into its own folder ``q01-<query>/``, under
``OUT/`` for one input and under ``OUT/<image>/`` for several, where ``OUT/summary.json`` lists every input with its
status, tokens and the bytes written."""

from __future__ import annotations

import glob
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import FoveateError
from .common import Source, _resolve_input, _slug, _texture_for, counting_bar, err, plural

if TYPE_CHECKING:
    from ..core.config import EncodeConfig, SelectConfig
    from ..core.texture import Texture
    from ..query.query import Query
    from ..selection import Selection
    from ..vlm import VlmRule

_GLOB = set("*?[")


def expand_sources(args: list[str], textures: bool = False) -> tuple[list[Source], bool]:
    """The inputs the command line names, and whether they are several: a folder stands for its image files (with
    ``textures``, also its saved ``.fvt`` textures), searched recursively and sorted; a pattern with ``*``, ``?`` or
    ``[`` for its matches, sorted; anything else for itself (:func:`_resolve_input`: a path, a bundled example, a
    stored texture).  A folder or pattern that names nothing is an error; duplicates are dropped."""
    from ..store.ingest import IMAGE_SUFFIXES

    suffixes = IMAGE_SUFFIXES + ((".fvt",) if textures else ())
    found: list[Source] = []
    many = len(args) > 1
    for arg in args:
        path = Path(arg)
        if _GLOB & set(arg) and not path.exists():
            matches = [Path(m) for m in sorted(glob.glob(arg, recursive=True)) if Path(m).is_file()]
            if not matches:
                raise FoveateError(f"no file matches {arg}")
            found += matches
            many = True
        elif path.is_dir():
            files = sorted(f for f in path.rglob("*") if f.is_file() and f.suffix.lower() in suffixes)
            if not files:
                raise FoveateError(f"no image files in the folder {arg} ({', '.join(suffixes)})")
            found += files
            many = True
        else:
            found.append(_resolve_input(arg))
    seen: set[Any] = set()
    unique = []
    for src in found:
        key = src.resolve() if isinstance(src, Path) else src
        if key not in seen:
            seen.add(key)
            unique.append(src)
    return unique, many


def folder_names(sources: list[Source]) -> list[str]:
    """One output folder name per input: its file stem, ``-2``, ``-3``, ... where stems repeat."""
    names: list[str] = []
    used: set[str] = set()
    for src in sources:
        base = src.stem if isinstance(src, Path) else f"texture-{src.id}"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        names.append(name)
    return names


@dataclass
class SaveOptions:
    """What ``select`` writes per query (:func:`foveate.render.save`'s options)."""

    rule: VlmRule
    max_crops: int | None = None
    max_side: int | None = None
    image_format: str = "png"
    heat: bool = True


@dataclass
class Answered:
    """One query's selection and where its files went."""

    query: Query
    selection: Selection
    folder: Path
    doc: dict[str, Any] = field(repr=False)


def run_queries(
    tex: Texture,
    queries: list[Query],
    cfg: SelectConfig,
    relevance: Any,
    out: Path,
    opts: SaveOptions,
    explain: bool = False,
) -> list[Answered]:
    """Select every query on ``tex`` and save each into ``out/q01-<query>/``, ``out/q02-...``."""
    from ..render import save
    from ..selection import select as select_tokens

    for q in queries:
        q.validate(tex.image_size)
    done = []
    for i, q in enumerate(queries, 1):
        sel = select_tokens(tex, q, config=cfg, explain=explain, weights=relevance)
        dest = out / _slug(q.text, i)
        written = save(
            tex,
            sel,
            dest,
            max_crops=opts.max_crops,
            vlm=opts.rule,
            max_side=opts.max_side,
            image_format=opts.image_format,
            heat=opts.heat,
        )
        done.append(Answered(q, sel, dest, json.loads(written["selection"].read_text())))
    return done


def select_many(
    sources: list[Source],
    out: Path,
    queries: list[Query],
    cfg: SelectConfig,
    relevance: Any,
    enc: EncodeConfig,
    device: str,
    opts: SaveOptions,
    json_out: bool = False,
) -> None:
    """``select`` over several inputs: each into ``out/<image>/q01-.../``, one at a time (encoded, selected,
    written, dropped); an input that fails is reported and skipped; ``out/summary.json`` and a summary at the end
    (raises :class:`FoveateError` naming the failures, after writing everything else)."""
    from .common import out as console

    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    out.mkdir(parents=True, exist_ok=True)
    with counting_bar() as progress:
        task = progress.add_task("selecting", total=len(sources))
        for src, name in zip(sources, folder_names(sources)):
            row: dict[str, Any] = {"input": str(src if isinstance(src, Path) else f"{src[0]}/#{src[1]}")}
            start = time.perf_counter()
            try:
                tex = _texture_for(src, enc, device, quiet=True)
                done = run_queries(tex, queries, cfg, relevance, out / name, opts)
            except (FoveateError, OSError) as exc:  # a bad file: said, skipped, listed at the end
                said = str(exc) if str(exc).startswith(row["input"]) else f"{row['input']}: {exc}"
                err.print(f"[yellow]skipped[/] {said}", markup=True, highlight=False)
                row.update(status="failed", error=said)
            else:
                row.update(
                    status="ok",
                    folder=name,
                    image_size=list(tex.image_size[::-1]),
                    queries=[
                        {
                            "query": a.query.text,
                            "folder": str(a.folder.relative_to(out)),
                            "tokens": len(a.selection),
                            "bytes": sum(a.doc.get("files", {}).values()),
                        }
                        for a in done
                    ],
                )
            row["seconds"] = round(time.perf_counter() - start, 3)
            rows.append(row)
            progress.update(task, advance=1, description=f"{sum(r['status'] == 'failed' for r in rows)} failed")
    failed = [r for r in rows if r["status"] == "failed"]
    summary = {
        "inputs": len(rows),
        "selected": len(rows) - len(failed),
        "failed": len(failed),
        "queries": [q.text for q in queries],
        "seconds": round(time.perf_counter() - t0, 3),
        "bytes": sum(q["bytes"] for r in rows for q in r.get("queries", [])),
        "results": rows,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if json_out:
        console.print_json(json.dumps(summary))
    else:
        console.print(
            f"{plural(len(rows), 'input')} in {summary['seconds']:.1f} s: {summary['selected']} selected, "
            f"{len(failed)} failed; {summary['bytes'] / 2**20:.1f} MiB written to {out}/ (summary.json)",
            highlight=False,
        )
        for r in failed:
            console.print(f"  failed: {r['error']}", highlight=False, markup=False)
    if failed:
        raise FoveateError(f"{len(failed)} of {plural(len(rows), 'input')} failed (listed in {out / 'summary.json'})")
