"""``foveate encode``, ``select`` and ``info``: one image (or a folder) in, textures, selections and their files
out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .._tables import print_table
from ..core.config import DEFAULT_MAX_SIDE, EncodeConfig, SelectConfig
from ..core.errors import FoveateError
from ..vlm.rules.registry import rules_help
from .common import (
    BudgetOpt,
    DatasetRef,
    DeviceOpt,
    LevelsOpt,
    MaxPixOpt,
    ModelOpt,
    ModeOpt,
    OcrOpt,
    PatchOpt,
    PresetOpt,
    RecogniserOpt,
    SemanticOpt,
    Source,
    StoredRef,
    WeightsOpt,
    _check_cover_early,
    _encode_config,
    _prompt_query,
    _resolve_input,
    _say_absent_once,
    _texture_for,
    app,
    err,
    out,
    plural,
)

if TYPE_CHECKING:
    from ..core.fvt import TextureHeader
    from ..core.texture import Texture


@app.command()
def encode(
    images: list[str] = typer.Argument(
        ...,
        help="Image files, folders of them and globs ('scans/*.jpg'); example:page / example:photo for the "
        "bundled ones; with --ray also URIs.",
    ),
    output: str | None = typer.Option(
        None,
        "--output",
        "-o",
        help="Output .fvt file (one image) or folder (several images); --ray: the dataset folder or URI.",
    ),
    store: Path | None = typer.Option(
        None,
        "--store",
        "-s",
        help="Encode into this texture store instead (images and folders; resumable: what is stored is skipped).",
    ),
    workers: int = typer.Option(
        0,
        "--workers",
        "-w",
        min=0,
        help="--store: parallel decode + encode threads "
        "(0 = one per CPU core); --ray: Ray workers (0 = one "
        "per CPU of the cluster).",
    ),
    ray: str | None = typer.Option(
        None,
        "--ray",
        metavar="[ADDRESS]",
        help="Encode on a Ray cluster into the texture dataset -o OUT/ (resumable; "
        "pip install 'foveate\\[ray]').  ADDRESS: the cluster to join (auto, "
        "ray://HOST:10001, HOST:6379; default $RAY_ADDRESS, else a new local "
        "one).",
    ),
    batch_size: int = typer.Option(16, "--batch-size", help="--ray: images per batch (one part file each)."),
    preset: str = PresetOpt,
    patch_size: int = PatchOpt,
    max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt,
    device: str = DeviceOpt,
    semantic_model: str | None = SemanticOpt,
    weights: str = WeightsOpt,
    ocr: str = OcrOpt,
    recogniser: str = RecogniserOpt,
) -> None:
    """Encode image(s) once into texture file(s) (.fvt), into a texture store (--store), or on a Ray cluster into a
    texture dataset (--ray), that `foveate select` and `foveate serve` answer queries from.  Textures do not depend
    on the relevance weights (they are read at select time); --weights only checks that the file later selects will
    use loads."""
    from ..core.texture import encode as encode_image
    from ..weights import load_weights

    load_weights(weights)

    config = _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model, ocr, recogniser)
    if ray is not None:
        if store is not None:
            raise FoveateError(
                "pass either --store DIR or --ray, not both (foveate store import DATASET copies a "
                "dataset into a store)"
            )
        from .ray import encode_with_ray

        encode_with_ray(ray, images, output, config, workers, batch_size)
        return
    if output is not None and not output.strip():
        raise typer.BadParameter("give a file or folder name", param_hint="-o/--output")
    out_path = Path(output) if output is not None else None
    from .document import encode_document_cli, is_document_source

    doc_src = Path(images[0])
    if len(images) == 1 and doc_src.suffix != ".fvt" and is_document_source(doc_src):  # one texture, pages inside
        return encode_document_cli(doc_src, config, device, out_path, store)
    if store is not None:
        if out_path is not None:
            raise FoveateError("pass either --store DIR or -o/--output, not both")
        _encode_into_store(store, images, config, workers)
        return
    from .batch import expand_sources

    paths, many = expand_sources(images)
    if many and out_path is not None and out_path.suffix == ".fvt":
        raise FoveateError("several images need an output folder (-o DIR), not a .fvt file")
    failed = 0
    from rich.progress import Progress

    with Progress(console=err, disable=not many or not err.is_terminal, transient=True) as progress:
        task = progress.add_task("encoding", total=len(paths))
        for path in paths:
            if many:
                dest = (out_path or Path(".")) / _fvt_name(path)
            else:
                dest = out_path or Path(_fvt_name(path))
            try:
                tex = encode_image(path, config, device=device) if many else _texture_for(path, config, device)
            except FoveateError as exc:
                if not many:
                    raise
                err.print(f"[yellow]skipped[/] {exc}", markup=True, highlight=False)
                failed += 1
                progress.advance(task)
                continue
            _say_absent_once(tex)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tex.save(dest)
            out.print(
                f"{path} -> {dest}  ({tex.timings_ms['total']:.0f} ms, {len(tex.channels)} channels, "
                f"{tex.num_levels} levels, {tex.feature_bytes() / 1024:.0f} KiB features)",
                highlight=False,
            )
            progress.advance(task)
    if many:
        out.print(f"{plural(len(paths), 'image')}: {len(paths) - failed} encoded, {failed} failed", highlight=False)
    if failed:
        raise FoveateError(f"{failed} of {plural(len(paths), 'image')} could not be encoded")


def _fvt_name(path: Source) -> str:
    """The file name of an input's texture: its stem and ``.fvt`` (a stored texture has none: -o names it)."""
    if isinstance(path, DatasetRef):
        raise FoveateError(f"{path.dataset}/#{path.id} is a texture in a dataset: name the .fvt to write with -o")
    if isinstance(path, StoredRef):
        raise FoveateError(f"{path.store}/#{path.id} is a texture in a store: name the .fvt to write with -o")
    return f"{path.stem}.fvt"


@app.command()
def select(
    sources: list[str] = typer.Argument(
        ...,
        metavar="SOURCE...",
        help="Images, saved .fvt textures, folders of them, globs ('scans/*.jpg'), a texture in a dataset "
        "(DATASET/#ID), or example:page / example:photo.  Several: one output folder each, and a summary.",
    ),
    query: list[str] = typer.Option([], "--query", "-q", help="Query text; repeat for several queries."),
    point: list[str] = typer.Option([], "--point", help="Positive point prompt 'x,y' (pixels); repeatable."),
    neg_point: list[str] = typer.Option([], "--neg-point", help="Negative point prompt 'x,y'; repeatable."),
    box: list[str] = typer.Option([], "--box", help="Box prompt 'x0,y0,x1,y1' (pixels); repeatable."),
    budget: int = BudgetOpt,
    mode: str = ModeOpt,
    gist: bool = typer.Option(True, "--gist/--no-gist", help="topk: add the whole image at the coarsest level."),
    floor: str = typer.Option(
        "auto",
        "--floor",
        help="quadtree and auto modes: auto (the learned gate may send the "
        "uniform layout where foveating would lose to it) or off.",
    ),
    weights: str = WeightsOpt,
    output: Path = typer.Option(
        Path("out"), "--output", "-o", help="Output folder: q01-<query>/ per query (OUT/<image>/q01-... for several)."
    ),
    max_side: int = typer.Option(
        DEFAULT_MAX_SIDE,
        "--max-side",
        help="Overlay and mosaic written with their long side at most this (0: full size).",
    ),
    image_format: str = typer.Option("png", "--format", help="Overlay and mosaic format: png, jpeg or webp."),
    heat: bool = typer.Option(True, "--heat/--outlines-only", help="Overlay: the heat map, or the outlines only."),
    vlm: str | None = typer.Option(
        None, "--vlm", help=f"VLM rule crops/ is planned under (default: the --model's, else openai): {rules_help()}."
    ),
    model: str | None = ModelOpt,
    max_crops: int | None = typer.Option(
        None,
        "--max-crops",
        help="At most this many crops besides the context picture (default: the rule's picture limit).",
    ),
    explain: bool = typer.Option(False, "--explain", help="Show which signals drove the chosen tokens."),
    json_out: bool = typer.Option(False, "--json", help="Print the selection JSON to stdout instead of a table."),
    preset: str = PresetOpt,
    patch_size: int = PatchOpt,
    max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt,
    device: str = DeviceOpt,
    semantic_model: str | None = SemanticOpt,
    ocr: str = OcrOpt,
    recogniser: str = RecogniserOpt,
) -> None:
    """Select tokens for one or more queries and write selection.json, overlay.png, mosaic.png,
    tokens.safetensors and crops/ per query, into OUT/q01-<query>/, ...  A saved .fvt is not encoded again.
    Folders and globs: every image in turn, into OUT/<image>/q01-.../; failures are listed and skipped."""
    from ..render import FORMATS
    from ..weights import load_weights
    from .batch import SaveOptions, expand_sources, run_queries, select_many

    cfg = SelectConfig(budget=budget, mode=mode, gist=gist, floor=floor)  # validate before the heavy encode
    relevance = load_weights(weights)
    if max_crops is not None and max_crops < 1:
        raise FoveateError("--max-crops must be at least 1")
    from ..vlm import resolve

    rule, _ = resolve(vlm, model)  # an unknown rule or model fails before the encode
    if image_format not in FORMATS:
        raise FoveateError(f"--format takes {', '.join(FORMATS)}, got {image_format!r}")
    if max_side and max_side < 64:
        raise FoveateError(f"--max-side must be 0 (full size) or at least 64, got {max_side}")
    opts = SaveOptions(rule, max_crops, max_side or None, image_format, heat)
    texts: list[str | None] = list(query) or [None]
    queries = [_prompt_query(t, point, neg_point, box) for t in texts]
    srcs, many = expand_sources(sources, textures=True)
    enc = _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model, ocr, recogniser)
    if many:
        select_many(srcs, output, queries, cfg, relevance, enc, device, opts, json_out)
        return
    src = srcs[0]
    from .document import is_document_source, select_document_cli

    if is_document_source(src):  # a PDF, a multi-page TIFF or a saved document: one budget across its pages
        return select_document_cli(src, queries, cfg, relevance, enc, device, output, rule, json_out, max_crops)
    _check_cover_early(src, enc, cfg)  # what the budget can cover, from the header alone
    tex = _texture_for(src, enc, device, quiet=json_out)
    if not json_out:
        _say_absent_once(tex)
    rows: list[list[str]] = []
    docs = []
    for a in run_queries(tex, queries, cfg, relevance, output, opts, explain):
        q, sel, doc = a.query, a.selection, a.doc
        docs.append(doc)
        levels = " ".join(f"L{k}:{v}" for k, v in sorted(sel.level_counts().items()))
        crops = doc.get("crops", {})
        crop_txt = (
            f"{plural(len(crops.get('pictures', [])), 'picture')}: {crops.get('plan_tokens')} of "
            f"{crops.get('image_tokens')}"
        )
        label = q.text or ("prompt" if q.has_prompt else "(no query: saliency)")
        rows.append(
            [label[:50], f"{len(sel)}/{sel.budget}", levels, f"{sel.timings_ms['total']:.1f}", crop_txt, str(a.folder)]
        )
        if not json_out:
            for note in sel.notes:
                err.print(f"note: {note}", highlight=False)
            if explain and sel.explain:
                top = ", ".join(f"{k} {v:+.2f}" for k, v in list(sel.explain.items())[:8])
                out.print(f"[bold]{label[:50]}[/] driven by: {top}", highlight=False)
                for ev in sel.evidence[:8]:
                    lv = ev.get("levels")
                    where = (
                        f" -> tokens at level {lv[0]}" + (f"-{lv[1]}" if lv and lv[1] != lv[0] else "") if lv else ""
                    )
                    sig = ", ".join(f"{k} {ev[k]:.2f}" for k in ("lexical", "semantic", "probability") if k in ev)
                    out.print(
                        f"  {ev.get('term', '?')}: {ev.get('relation', '')} {ev.get('text', '')!r} "
                        f"{ev.get('box')} ({sig}){where}",
                        highlight=False,
                        markup=False,
                    )
    if json_out:
        out.print_json(json.dumps(docs[0] if len(docs) == 1 else docs))
    else:
        header = ["query", "tokens", "levels", "ms", f"crops ({model or rule.name} tokens)", "written to"]
        if print_table(out, header, rows, optional=("ms", "levels", "written to"), right=("tokens", "ms")) == "compact":
            out.print(f"written to {output}/: " + ", ".join(Path(r[-1]).name for r in rows), highlight=False)


@app.command()
def info(
    source: str = typer.Argument(..., help="A saved .fvt texture, DATASET/#ID, or an image (encoded first)."),
    preset: str = PresetOpt,
    patch_size: int = PatchOpt,
    max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt,
    device: str = DeviceOpt,
    semantic_model: str | None = SemanticOpt,
    ocr: str = OcrOpt,
    recogniser: str = RecogniserOpt,
    json_out: bool = typer.Option(False, "--json", help="Print the texture's description as JSON instead of tables."),
) -> None:
    """Show a texture's channels, levels, memory and encode timings."""
    path = _resolve_input(source)
    tex: TextureHeader | Texture
    from .document import document_info_cli, is_document_source

    if is_document_source(path):
        if isinstance(path, Path) and path.suffix != ".fvt":
            raise FoveateError(f"{source} is a document: encode it first (foveate encode {source} -o DOC.fvt)")
        return document_info_cli(path, json_out)
    if isinstance(path, Path) and path.suffix == ".fvt":  # the header says it all: no tensors read, no torch imported
        from ..core.fvt import read_header

        tex = read_header(path)
    else:
        tex = _texture_for(
            path,
            _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model, ocr, recogniser),
            device,
            quiet=json_out,
        )
    doc = _describe(source, tex)
    if json_out:
        out.print_json(json.dumps(doc))
        return
    out.print(
        f"[bold]{source}[/]  {doc['width']}x{doc['height']} px, patch {tex.patch_size}, id {tex.id}", highlight=False
    )
    rows = [
        [
            g["group"],
            ", ".join(g["channels"]),
            "-".join(map(str, g["slice"])),
            f"{g['encode_ms']:.1f}",
            g["status"],
            g["description"],
        ]
        for g in doc["groups"]
    ]
    header = ["group", "channels", "slice", "encode ms", "status", "description"]
    print_table(out, header, rows, optional=("description", "slice", "channels"), right=("encode ms",))
    rows = [[str(v["level"]), "{} x {}".format(*v["grid"]), str(v["tiles"]), str(v["tile_px"])] for v in doc["levels"]]
    print_table(out, ["level", "grid (w x h)", "tiles", "tile px"], rows, right=("tiles", "tile px"))
    out.print(
        "memory: " + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in doc["memory_bytes"].items()), highlight=False
    )
    out.print(f"encode: {doc['encode_ms']:.0f} ms total", highlight=False)
    if "text" in doc:
        t = doc["text"]
        gate = t["gate"]
        mode = (
            f"ocr={t['mode']}" + (f", gate: {gate['detector']} ({gate['ms']:.0f} ms)" if gate else "")
            if t["mode"]
            else ""
        )
        out.print(
            f"text: {plural(t['lines'], 'OCR line')} ({t['engine']}{'; ' + mode if mode else ''}), OCR "
            f"{t['ocr_ms']:.0f} ms, line embeddings {t['embed_ms']:.0f} ms ({t['embedder']})",
            highlight=False,
            markup=False,
        )
    if "semantic" in doc:
        m = doc["semantic"]
        out.print(
            f"semantic: {m['encoder']} {m['model']}, {m['dim']}-d patch embeddings on a {m['patch_grid']} grid, "
            f"PCA to {m['components']} keeps {100 * m['explained_variance']:.1f}% of the variance",
            highlight=False,
            markup=False,
        )
    _say_absent_once(tex)


def _describe(source: str, tex: TextureHeader | Texture) -> dict[str, Any]:
    """What ``info`` shows, as JSON-able data."""
    from ..channels.registry import get_group

    h, w = tex.image_size
    doc: dict[str, Any] = {
        "source": source,
        "id": tex.id,
        "width": w,
        "height": h,
        "patch_size": tex.patch_size,
        "groups": [
            {
                "group": name,
                "channels": list(tex.channels[a:b]),
                "slice": [a, b - 1],
                "encode_ms": round(float(tex.timings_ms.get(name, 0)), 3),
                "status": "absent (zeros)" if name in tex.absent else "ok",
                "description": get_group(name).description if name != "user" else "caller-attached maps",
            }
            for name, (a, b) in tex.groups.items()
        ],
        "levels": [
            {"level": lvl, "grid": [gw, gh], "tiles": gh * gw, "tile_px": tex.patch_size << lvl}
            for lvl, (gh, gw) in enumerate(tex.level_shapes)
        ],
        "memory_bytes": dict(tex.nbytes()),
        "encode_ms": round(float(tex.timings_ms.get("total", 0)), 3),
    }
    if "text" in tex.extras:
        t = tex.extras["text"]
        how = t.get("ocr", {})
        doc["text"] = {
            "lines": len(t["lines"]),
            "engine": t["engine"],
            "embedder": t["embedder"],
            "mode": how.get("mode"),
            "gate": how.get("gate"),
            "ocr_ms": t.get("timings_ms", {}).get("ocr", 0),
            "embed_ms": t.get("timings_ms", {}).get("embed", 0),
        }
    if "semantic" in tex.extras:
        doc["semantic"] = dict(tex.extras["semantic"])
    return doc


def _encode_into_store(store_dir: Path, images: list[str], config: EncodeConfig, workers: int) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from ..store import TextureStore, encode_into_store, expand_images

    paths = expand_images([_resolve_input(p) for p in images])
    if not paths:
        raise FoveateError(f"no image files in {', '.join(images)}")
    counts = {"encoded": 0, "stored": 0, "failed": 0}
    with (
        TextureStore(store_dir) as st,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            disable=not err.is_terminal,
            transient=True,
        ) as progress,
    ):
        task = progress.add_task("encoding", total=len(paths))

        def on_result(r) -> None:
            counts[r.status] += 1
            if r.status == "failed":
                err.print(f"[yellow]skipped[/] {r.message}", markup=True, highlight=False)
            progress.update(
                task,
                advance=1,
                description=f"encoded {counts['encoded']}, stored already "
                f"{counts['stored']}, failed {counts['failed']}",
            )

        summary = encode_into_store(st, paths, config, workers=workers or None, on_result=on_result)
        stats = st.stats()
    d = summary.to_dict()
    rate = (
        f"{d['encoded_per_min']:.1f} pages/min encoded, median encode {d['encode_ms_median']:.0f} ms, "
        if d["encoded"]
        else ""
    )
    out.print(
        f"{plural(d['images'], 'image')} in {d['seconds']:.1f} s ({rate}{d['images_per_s']:.2f} images/s, "
        f"{d['encoded_megapixels_per_s']:.2f} encoded MP/s): {d['encoded']} encoded, {d['skipped']} already "
        f"stored (skipped), {d['failed']} failed.  Store {store_dir}: {plural(stats['entries'], 'texture')}, "
        f"{stats['bytes'] / 2**20:.1f} MiB",
        highlight=False,
    )
    if d["failed"]:
        raise FoveateError(f"{d['failed']} of {d['images']} images could not be encoded")
