"""``foveate encode``, ``select`` and ``info``: one image (or a folder) in, textures, selections and their files
out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from ..core.config import EncodeConfig, SelectConfig
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
    SemanticOpt,
    Source,
    StoredRef,
    WeightsOpt,
    _check_cover_early,
    _encode_config,
    _prompt_query,
    _resolve_input,
    _say_absent_once,
    _slug,
    _texture_for,
    app,
    err,
    out,
)

if TYPE_CHECKING:
    from ..core.fvt import TextureHeader
    from ..core.texture import Texture


@app.command()
def encode(
    images: list[str] = typer.Argument(
        ...,
        help="Image file(s); example:page / example:photo for the bundled ones; "
        "with --store or --ray also folders (and with --ray globs, URIs).",
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
) -> None:
    """Encode image(s) once into texture file(s) (.fvt), into a texture store (--store), or on a Ray cluster into a
    texture dataset (--ray), that `foveate select` and `foveate serve` answer queries from.  Textures do not depend
    on the relevance weights (they are read at select time); --weights only checks that the file later selects will
    use loads."""
    from ..core.texture import encode as encode_image
    from ..weights import load_weights

    load_weights(weights)

    config = _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model, ocr)
    if ray is not None:
        if store is not None:
            raise FoveateError(
                "pass either --store DIR or --ray, not both (foveate store import DATASET copies a "
                "dataset into a store)"
            )
        from .ray import encode_with_ray

        encode_with_ray(ray, images, output, config, workers, batch_size)
        return
    out_path = Path(output) if output is not None else None
    if store is not None:
        if out_path is not None:
            raise FoveateError("pass either --store DIR or -o/--output, not both")
        _encode_into_store(store, images, config, workers)
        return
    paths = [_resolve_input(p) for p in images]
    many = len(paths) > 1
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
    if failed:
        raise FoveateError(f"{failed} of {len(paths)} images could not be encoded")


def _fvt_name(path: Source) -> str:
    """The file name of an input's texture: its stem and ``.fvt`` (a stored texture has none: -o names it)."""
    if isinstance(path, DatasetRef):
        raise FoveateError(f"{path.dataset}/#{path.id} is a texture in a dataset: name the .fvt to write with -o")
    if isinstance(path, StoredRef):
        raise FoveateError(f"{path.store}/#{path.id} is a texture in a store: name the .fvt to write with -o")
    return f"{path.stem}.fvt"


@app.command()
def select(
    source: str = typer.Argument(
        ...,
        help="An image, a saved .fvt texture, a texture in a dataset (DATASET/#ID), or example:page / example:photo.",
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
    output: Path = typer.Option(Path("out"), "--output", "-o", help="Output folder."),
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
) -> None:
    """Select tokens for one or more queries and write selection.json, overlay.png, mosaic.png,
    tokens.safetensors and crops/ per query.  A saved .fvt is not encoded again."""
    from ..render import write_outputs
    from ..selection import select as select_tokens
    from ..weights import load_weights

    cfg = SelectConfig(budget=budget, mode=mode, gist=gist, floor=floor)  # validate before the heavy encode
    relevance = load_weights(weights)
    if max_crops is not None and max_crops < 1:
        raise FoveateError("--max-crops must be at least 1")
    from ..vlm import resolve

    rule, _ = resolve(vlm, model)  # an unknown rule or model fails before the encode
    texts: list[str | None] = list(query) or [None]
    queries = [_prompt_query(t, point, neg_point, box) for t in texts]
    src = _resolve_input(source)
    enc = _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model, ocr)
    from .document import is_document_source, select_document_cli

    if is_document_source(src):  # a PDF, a multi-page TIFF or a saved document: one budget across its pages
        return select_document_cli(src, queries, cfg, relevance, enc, device, output, rule, json_out, max_crops)
    _check_cover_early(src, enc, cfg)  # what the budget can cover, from the header alone
    tex = _texture_for(src, enc, device, quiet=json_out)
    for q in queries:
        q.validate(tex.image_size)
    if not json_out:
        _say_absent_once(tex)
    table = Table("query", "tokens", "levels", "ms", f"crops ({model or rule.name} tokens)", "written to", box=None)
    docs = []
    for i, q in enumerate(queries, 1):
        sel = select_tokens(tex, q, config=cfg, explain=explain, weights=relevance)
        dest = output if len(queries) == 1 else output / _slug(q.text, i)
        written = write_outputs(tex, sel, dest, max_crops=max_crops, vlm=rule)
        doc = json.loads(written["selection"].read_text())
        docs.append(doc)
        levels = " ".join(f"L{k}:{v}" for k, v in sorted(sel.level_counts().items()))
        crops = doc.get("crops", {})
        crop_txt = (
            f"{len(crops.get('pictures', []))} pictures: {crops.get('plan_tokens')} vs "
            f"{crops.get('image_tokens')} for the image"
        )
        label = q.text or ("prompt" if q.has_prompt else "(no query: saliency)")
        table.add_row(
            label[:50], f"{len(sel)}/{sel.budget}", levels, f"{sel.timings_ms['total']:.1f}", crop_txt, str(dest)
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
        out.print(table)


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
) -> None:
    """Show a texture's channels, levels, memory and encode timings."""
    from ..channels.registry import get_group

    path = _resolve_input(source)
    tex: TextureHeader | Texture
    if isinstance(path, Path) and path.suffix == ".fvt":  # the header says it all: no tensors read, no torch imported
        from ..core.fvt import read_header

        tex = read_header(path)
    else:
        tex = _texture_for(
            path, _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model, ocr), device
        )
    h, w = tex.image_size
    out.print(f"[bold]{source}[/]  {w}x{h} px, patch {tex.patch_size}, id {tex.id}", highlight=False)
    groups = Table("group", "channels", "slice", "encode ms", "status", "description", box=None)
    for name, (a, b) in tex.groups.items():
        desc = get_group(name).description if name != "user" else "caller-attached maps"
        status = "[yellow]absent (zeros)[/]" if name in tex.absent else "ok"
        groups.add_row(
            name, ", ".join(tex.channels[a:b]), f"{a}-{b - 1}", f"{tex.timings_ms.get(name, 0):.1f}", status, desc
        )
    out.print(groups)
    levels = Table("level", "grid (w x h)", "tiles", "tile px", box=None)
    for lvl, (gh, gw) in enumerate(tex.level_shapes):
        levels.add_row(str(lvl), f"{gw} x {gh}", str(gh * gw), str(tex.patch_size << lvl))
    out.print(levels)
    mem = tex.nbytes()
    out.print("memory: " + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in mem.items()), highlight=False)
    out.print(f"encode: {tex.timings_ms.get('total', 0):.0f} ms total", highlight=False)
    if "text" in tex.extras:
        t = tex.extras["text"]
        tm = t.get("timings_ms", {})
        how = t.get("ocr", {})
        gate = how.get("gate")
        mode = (
            f"ocr={how['mode']}" + (f", gate: {gate['detector']} ({gate['ms']:.0f} ms)" if gate else "") if how else ""
        )
        out.print(
            f"text: {len(t['lines'])} OCR lines ({t['engine']}{'; ' + mode if mode else ''}), OCR "
            f"{tm.get('ocr', 0):.0f} ms, line embeddings {tm.get('embed', 0):.0f} ms ({t['embedder']})",
            highlight=False,
            markup=False,
        )
    if "semantic" in tex.extras:
        m = tex.extras["semantic"]
        out.print(
            f"semantic: {m['encoder']} {m['model']}, {m['dim']}-d patch embeddings on a {m['patch_grid']} grid, "
            f"PCA to {m['components']} keeps {100 * m['explained_variance']:.1f}% of the variance",
            highlight=False,
            markup=False,
        )
    _say_absent_once(tex)


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
        f"{d['images']} images in {d['seconds']:.1f} s ({rate}{d['images_per_s']:.2f} images/s, "
        f"{d['encoded_megapixels_per_s']:.2f} encoded MP/s): {d['encoded']} encoded, {d['skipped']} already "
        f"stored (skipped), {d['failed']} failed.  Store {store_dir}: {stats['entries']} textures, "
        f"{stats['bytes'] / 2**20:.1f} MiB",
        highlight=False,
    )
    if d["failed"]:
        raise FoveateError(f"{d['failed']} of {d['images']} images could not be encoded")
