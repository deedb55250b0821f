"""``foveate`` command line: thin commands over the library.

Errors a user can cause print as one line (``error: ...``) with exit code 1 and no traceback; usage errors
exit with 2.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .core.config import DEFAULT_BUDGET, EncodeConfig, SelectConfig, replace_config
from .core.errors import FoveateError
from .core.io import DEFAULT_MAX_PIXELS

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Encode an image once; select a fixed budget of VLM tokens per query.")
out = Console()
err = Console(stderr=True)

EXAMPLES = Path(__file__).resolve().parent / "examples"

# -- shared options --------------------------------------------------------------------------------------
PresetOpt = typer.Option("default", "--preset", "-p", help="Channel preset: fast, default or full.")
PatchOpt = typer.Option(16, "--patch-size", help="Tile / token side P in pixels.")
LevelsOpt = typer.Option(5, "--max-levels", help="Pyramid levels (0..N-1); fewer for small images.")
MaxPixOpt = typer.Option(DEFAULT_MAX_PIXELS, "--max-pixels", help="Refuse images with more pixels than this.")
DeviceOpt = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N.")
SemanticOpt = typer.Option(None, "--semantic-model",
                           help="Local CLIP checkpoint directory (or an id already in the model cache) for the "
                                "semantic channels; adds the semantic group to any preset.  Without it, "
                                "$FOVEATE_SEMANTIC_MODEL configures the group of presets that have it (full).")


def _encode_config(preset: str, patch_size: int, max_levels: int, max_pixels: int,
                   semantic_model: Optional[str] = None) -> EncodeConfig:
    cfg = EncodeConfig(preset=preset, patch_size=patch_size, max_levels=max_levels, max_pixels=max_pixels)
    if semantic_model:
        from .core.channels import resolve_groups

        groups = resolve_groups(cfg)
        cfg = replace_config(cfg, {"groups": groups + ("semantic",) * ("semantic" not in groups),
                                   "options": {"semantic_model": semantic_model}})
    return cfg


_SAID: set[str] = set()


def _say_absent_once(tex) -> None:
    """Say once per command that the semantic channels are absent (no model configured): nothing fakes them."""
    if "semantic" in tex.absent and "semantic" not in _SAID:
        _SAID.add("semantic")
        err.print("note: the semantic channels are absent (zeros): no image-text model is configured "
                  "(--semantic-model DIR or $FOVEATE_SEMANTIC_MODEL); text queries use OCR only", highlight=False)


def _resolve_input(path: str) -> Path:
    """``example:page`` / ``example:photo`` name the bundled examples; anything else is a path."""
    if path.startswith("example:"):
        name = path.split(":", 1)[1]
        matches = sorted(EXAMPLES.glob(f"{name}.*"))
        if not matches:
            known = ", ".join(sorted(p.stem for p in EXAMPLES.iterdir() if p.suffix != ".md"))
            raise FoveateError(f"no bundled example {name!r}; known: {known}")
        return matches[0]
    return Path(path)


def _texture_for(path: Path, config: EncodeConfig, device: str, quiet: bool = False):
    """Load a saved ``.fvt`` texture (no encode) or encode an image, with a spinner on a terminal."""
    from .core.texture import Texture, encode

    if path.suffix == ".fvt":
        return Texture.load(path, device=device)
    if quiet or not err.is_terminal:
        return encode(path, config, device=device)
    with err.status(f"encoding {path.name} ..."):
        return encode(path, config, device=device)


def _numbers(values: str | list[str], what: str, count: int | None = None, kind: type = float) -> tuple:
    """Numbers separated by commas or spaces, from one option value or several: '0,2.5 4' -> (0.0, 2.5, 4.0);
    '' -> ().  ``count``: exactly that many (a point is 2, a box 4); ``kind=int``: whole numbers."""
    texts = [values] if isinstance(values, str) else list(values)
    parts = [t for text in texts for t in re.split(r"[,\s]+", text.strip()) if t]
    noun = "whole numbers" if kind is int else "numbers"
    shown = texts[0] if len(texts) == 1 else texts
    try:
        vals = tuple(kind(t) for t in parts)
    except ValueError:
        raise typer.BadParameter(f"{what} takes {noun} separated by commas, got {shown!r}") from None
    if count is not None and len(vals) != count:
        raise typer.BadParameter(f"{what} takes {count} {noun} separated by commas, got {shown!r}")
    return vals


def _prompt_query(text: Optional[str], point: list[str], neg_point: list[str], box: list[str]):
    """A :class:`Query` from the CLI's text and SAM-style prompt options (``--point x,y``, ``--neg-point``,
    ``--box x0,y0,x1,y1``, each repeatable)."""
    from .query.query import Query

    points = [_numbers(p, "--point", 2) for p in point] + [_numbers(p, "--neg-point", 2) for p in neg_point]
    return Query(text=text, points=tuple(points), point_labels=(1,) * len(point) + (0,) * len(neg_point),
                 boxes=tuple(_numbers(b, "--box", 4) for b in box))


def _slug(text: str | None, i: int) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", (text or "prompt")).strip("-").lower()[:40] or "query"
    return f"q{i:02d}-{s}"


# -- commands --------------------------------------------------------------------------------------------
@app.command()
def encode(
    images: list[str] = typer.Argument(..., help="Image file(s); example:page / example:photo for the bundled ones."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Output .fvt file (one image) or folder (several images)."),
    store: Optional[Path] = typer.Option(None, "--store", "-s",
                                         help="Encode into this texture store instead (images and folders; "
                                              "resumable: what is stored is skipped)."),
    workers: int = typer.Option(0, "--workers", "-w", help="--store: parallel decode + encode threads "
                                                            "(0 = one per CPU core)."),
    preset: str = PresetOpt, patch_size: int = PatchOpt, max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt, device: str = DeviceOpt, semantic_model: Optional[str] = SemanticOpt,
) -> None:
    """Encode image(s) once into texture file(s) (.fvt), or into a texture store (--store), that
    `foveate select` and `foveate serve` answer queries from."""
    from .core.texture import encode as encode_image

    config = _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model)
    if store is not None:
        if output is not None:
            raise FoveateError("pass either --store DIR or -o/--output, not both")
        _encode_into_store(store, images, config, workers)
        return
    paths = [_resolve_input(p) for p in images]
    many = len(paths) > 1
    if many and output is not None and output.suffix == ".fvt":
        raise FoveateError("several images need an output folder (-o DIR), not a .fvt file")
    failed = 0
    from rich.progress import Progress

    with Progress(console=err, disable=not many or not err.is_terminal, transient=True) as progress:
        task = progress.add_task("encoding", total=len(paths))
        for path in paths:
            if many:
                dest = (output or Path(".")) / f"{path.stem}.fvt"
            else:
                dest = output or Path(f"{path.stem}.fvt")
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
            out.print(f"{path} -> {dest}  ({tex.timings_ms['total']:.0f} ms, {len(tex.channels)} channels, "
                      f"{tex.num_levels} levels, {tex.feature_bytes() / 1024:.0f} KiB features)", highlight=False)
            progress.advance(task)
    if failed:
        raise FoveateError(f"{failed} of {len(paths)} images could not be encoded")


@app.command()
def select(
    source: str = typer.Argument(..., help="An image, a saved .fvt texture, or example:page / example:photo."),
    query: list[str] = typer.Option([], "--query", "-q", help="Query text; repeat for several queries."),
    point: list[str] = typer.Option([], "--point", help="Positive point prompt 'x,y' (pixels); repeatable."),
    neg_point: list[str] = typer.Option([], "--neg-point", help="Negative point prompt 'x,y'; repeatable."),
    box: list[str] = typer.Option([], "--box", help="Box prompt 'x0,y0,x1,y1' (pixels); repeatable."),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", "-b", help="Tokens to select."),
    mode: str = typer.Option("quadtree", "--mode", "-m", help="quadtree or topk."),
    gist: bool = typer.Option(True, "--gist/--no-gist", help="topk: add the whole image at the coarsest level."),
    output: Path = typer.Option(Path("out"), "--output", "-o", help="Output folder."),
    max_crops: int = typer.Option(4, "--max-crops", help="Merge the fine tokens into at most this many crops."),
    vlm_patch: int = typer.Option(14, "--vlm-patch", help="Patch size of the VLM for crop token estimates."),
    explain: bool = typer.Option(False, "--explain", help="Show which signals drove the chosen tokens."),
    json_out: bool = typer.Option(False, "--json", help="Print the selection JSON to stdout instead of a table."),
    preset: str = PresetOpt, patch_size: int = PatchOpt, max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt, device: str = DeviceOpt, semantic_model: Optional[str] = SemanticOpt,
) -> None:
    """Select tokens for one or more queries and write selection.json, overlay.png, mosaic.png,
    tokens.safetensors and crops/ per query.  A saved .fvt is not encoded again."""
    from .render import write_outputs
    from .selection import select as select_tokens

    cfg = SelectConfig(budget=budget, mode=mode, gist=gist)  # validate before the heavy encode
    if max_crops < 1 or vlm_patch < 1:
        raise FoveateError("--max-crops and --vlm-patch must be at least 1")
    queries = [_prompt_query(t, point, neg_point, box) for t in (list(query) or [None])]
    tex = _texture_for(_resolve_input(source), _encode_config(preset, patch_size, max_levels, max_pixels,
                                                              semantic_model), device, quiet=json_out)
    for q in queries:
        q.validate(tex.image_size)
    if not json_out:
        _say_absent_once(tex)
    table = Table("query", "tokens", "levels", "ms", "crops (VLM tokens)", "written to", box=None)
    docs = []
    for i, q in enumerate(queries, 1):
        sel = select_tokens(tex, q, config=cfg, explain=explain)
        dest = output if len(queries) == 1 else output / _slug(q.text, i)
        written = write_outputs(tex, sel, dest, max_crops=max_crops, vlm_patch=vlm_patch)
        doc = json.loads(written["selection"].read_text())
        docs.append(doc)
        levels = " ".join(f"L{k}:{v}" for k, v in sorted(sel.level_counts().items()))
        crops = doc.get("crops", {})
        crop_txt = f"{len(crops.get('crops', []))}+thumb ({crops.get('total_tokens')} vs {crops.get('full_image_tokens')})"
        label = q.text or ("prompt" if q.has_prompt else "(no query: saliency)")
        table.add_row(label[:50], f"{len(sel)}/{sel.budget}", levels, f"{sel.timings_ms['total']:.1f}", crop_txt,
                      str(dest))
        if not json_out:
            for note in sel.notes:
                err.print(f"note: {note}", highlight=False)
            if explain and sel.explain:
                top = ", ".join(f"{k} {v:+.2f}" for k, v in list(sel.explain.items())[:8])
                out.print(f"[bold]{label[:50]}[/] driven by: {top}", highlight=False)
                for ev in sel.evidence[:8]:
                    lv = ev.get("levels")
                    where = f" -> tokens at level {lv[0]}" + (f"-{lv[1]}" if lv and lv[1] != lv[0] else "") if lv else ""
                    sig = ", ".join(f"{k} {ev[k]:.2f}" for k in ("lexical", "semantic") if k in ev)
                    out.print(f"  {ev.get('term', '?')}: {ev.get('relation', '')} {ev.get('text', '')!r} "
                              f"{ev.get('box')} value {ev.get('value', 0):.2f} ({sig}){where}", highlight=False,
                              markup=False)
    if json_out:
        out.print_json(json.dumps(docs[0] if len(docs) == 1 else docs))
    else:
        out.print(table)


@app.command()
def info(
    source: str = typer.Argument(..., help="A saved .fvt texture or an image (encoded first)."),
    preset: str = PresetOpt, patch_size: int = PatchOpt, max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt, device: str = DeviceOpt, semantic_model: Optional[str] = SemanticOpt,
) -> None:
    """Show a texture's channels, levels, memory and encode timings."""
    from .core.channels import get_group

    tex = _texture_for(_resolve_input(source), _encode_config(preset, patch_size, max_levels, max_pixels,
                                                              semantic_model), device)
    h, w = tex.image_size
    out.print(f"[bold]{source}[/]  {w}x{h} px, patch {tex.patch_size}, id {tex.id}", highlight=False)
    groups = Table("group", "channels", "slice", "encode ms", "status", "description", box=None)
    for name, (a, b) in tex.groups.items():
        desc = get_group(name).description if name != "user" else "caller-attached maps"
        status = "[yellow]absent (zeros)[/]" if name in tex.absent else "ok"
        groups.add_row(name, ", ".join(tex.channels[a:b]), f"{a}-{b - 1}", f"{tex.timings_ms.get(name, 0):.1f}",
                       status, desc)
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
        out.print(f"text: {len(t['lines'])} OCR lines ({t['engine']}), OCR {tm.get('ocr', 0):.0f} ms, "
                  f"line embeddings {tm.get('embed', 0):.0f} ms ({t['embedder']})", highlight=False, markup=False)
    if "semantic" in tex.extras:
        m = tex.extras["semantic"]
        out.print(f"semantic: {m['encoder']} {m['model']}, {m['dim']}-d patch embeddings on a {m['patch_grid']} grid, "
                  f"PCA to {m['components']} keeps {100 * m['explained_variance']:.1f}% of the variance",
                  highlight=False, markup=False)
    _say_absent_once(tex)


def _encode_into_store(store_dir: Path, images: list[str], config: EncodeConfig, workers: int) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .store import TextureStore, encode_into_store, expand_images

    paths = expand_images([_resolve_input(p) for p in images])
    if not paths:
        raise FoveateError(f"no image files in {', '.join(images)}")
    counts = {"encoded": 0, "stored": 0, "failed": 0}
    with TextureStore(store_dir) as st, Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                                 TimeRemainingColumn(), console=err,
                                                 disable=not err.is_terminal, transient=True) as progress:
        task = progress.add_task("encoding", total=len(paths))

        def on_result(r) -> None:
            counts[r.status] += 1
            if r.status == "failed":
                err.print(f"[yellow]skipped[/] {r.message}", markup=True, highlight=False)
            progress.update(task, advance=1, description=f"encoded {counts['encoded']}, stored already "
                                                         f"{counts['stored']}, failed {counts['failed']}")

        summary = encode_into_store(st, paths, config, workers=workers or None, on_result=on_result)
        stats = st.stats()
    d = summary.to_dict()
    out.print(f"{d['images']} images in {d['seconds']:.1f} s ({d['images_per_s']:.2f} images/s, "
              f"{d['encoded_megapixels_per_s']:.2f} encoded MP/s): {d['encoded']} encoded, {d['skipped']} already "
              f"stored (skipped), {d['failed']} failed.  Store {store_dir}: {stats['entries']} textures, "
              f"{stats['bytes'] / 2**20:.1f} MiB", highlight=False)
    if d["failed"]:
        raise FoveateError(f"{d['failed']} of {d['images']} images could not be encoded")


# -- the texture store -------------------------------------------------------------------------------------
store_app = typer.Typer(no_args_is_help=True, help="Inspect and maintain a texture store (see `encode --store`).")
app.add_typer(store_app, name="store")
StoreOpt = typer.Option(None, "--store", "-s", envvar="FOVEATE_STORE",
                        help="Store folder (default: $FOVEATE_STORE, else ~/.cache/foveate/store).")


def _open_store(store: Optional[Path], create: bool = False):
    from .service.settings import default_store_dir
    from .store import TextureStore

    return TextureStore(store or default_store_dir(), create=create)


def _ago(t: float) -> str:
    import time

    s = max(0.0, time.time() - t)
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{s / n:.0f} {unit} ago"
    return f"{s:.0f} s ago"


@store_app.command("ls")
def store_ls(store: Optional[Path] = StoreOpt,
             order: str = typer.Option("last_access", "--order", help="last_access, size or created."),
             json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List stored textures, most recently used first."""
    from .core.texture import FORMAT_VERSION

    with _open_store(store) as st:
        entries = st.entries(order)
    if json_out:
        out.print_json(json.dumps([e.to_dict() for e in entries]))
        return
    table = Table("id", "size", "preset", "channels", "KiB", "encode ms", "last used", box=None)
    for e in entries:
        stale = "" if e.format_version == FORMAT_VERSION else f" [yellow](format {e.format_version}: gc drops it)[/]"
        table.add_row(e.id + stale, f"{e.width}x{e.height}", e.preset, str(len(e.channels)), f"{e.size / 1024:.0f}",
                      f"{e.encode_ms:.0f}", _ago(e.last_access))
    out.print(table)


@store_app.command("info")
def store_info(texture_id: Optional[str] = typer.Argument(None, help="A texture id (default: the whole store)."),
               store: Optional[Path] = StoreOpt,
               json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Show the store's size, cap and contents, or one texture's metadata."""
    with _open_store(store) as st:
        if texture_id is not None:
            entry = st.entry(texture_id)
            if entry is None:
                raise FoveateError(f"no texture {texture_id} in {st.path}; `foveate store ls` lists them")
            doc = entry.to_dict()
        else:
            doc = st.stats()
            doc.pop("counters")
    if json_out or texture_id is not None:
        out.print_json(json.dumps(doc))
        return
    cap = f"{doc['max_bytes'] / 2**20:.1f} MiB" if doc["max_bytes"] else "none"
    out.print(f"store {doc['path']}: {doc['entries']} textures, {doc['bytes'] / 2**20:.1f} MiB of textures "
              f"(cap {cap}), {doc['file_bytes'] / 2**20:.1f} MiB on disk; format versions "
              f"{doc['format_versions'] or '-'} (this foveate reads {doc['format_version']})", highlight=False)


@store_app.command("gc")
def store_gc(store: Optional[Path] = StoreOpt,
             verify: bool = typer.Option(False, "--verify", help="Also re-hash every blob; drop corrupt ones."),
             max_mb: Optional[float] = typer.Option(None, "--max-mb", help="Set the size cap (MiB, 0 = none) "
                                                                           "and evict down to it.")) -> None:
    """Drop unreadable entries (other format versions; corrupt ones with --verify), evict to the cap, shrink
    the file."""
    with _open_store(store) as st:
        rep = st.gc(verify=verify, max_bytes=None if max_mb is None else int(max_mb * 2**20))
    out.print(f"removed {rep.other_versions} of other format versions, {rep.corrupt} corrupt, {rep.evicted} "
              f"evicted; textures {rep.bytes_before / 2**20:.1f} -> {rep.bytes_after / 2**20:.1f} MiB, on disk "
              f"{rep.file_bytes_before / 2**20:.1f} -> {rep.file_bytes_after / 2**20:.1f} MiB", highlight=False)


@store_app.command("clear")
def store_clear(store: Optional[Path] = StoreOpt,
                yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask.")) -> None:
    """Remove every texture from the store."""
    with _open_store(store) as st:
        if not yes and not typer.confirm(f"remove all {st.stats()['entries']} textures from {st.path}?"):
            raise typer.Exit(1)
        n = st.clear()
    out.print(f"removed {n} textures", highlight=False)


@store_app.command("bench")
def store_bench(
    count: int = typer.Option(40, "--count", "-n", help="Textures written and read per backend."),
    size: int = typer.Option(1024, "--size", help="Image side in pixels (the blob is that image's texture)."),
    backends: str = typer.Option("sqlite,lmdb,files", "--backends", help="Comma-separated: sqlite, lmdb, files; "
                                                                   "sqlite-4k = SQLite with 4 KiB pages."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Measure the store's database against the alternatives: write, read (verified), concurrent read while
    another process writes, and bytes on disk."""
    from .bench.store import run_store_bench

    run_store_bench(count=count, size=size, backends=[b for b in backends.split(",") if b], json_path=json_path,
                    console=out)


# -- the HTTP service ----------------------------------------------------------------------------------------
#: request line + headers larger than this are refused (400) before routing: a GET rendering's query of
#: 2,000 characters of any script fits, URL-encoded
MAX_REQUEST_HEAD = 64 * 1024

@app.command()
def serve(
    host: Optional[str] = typer.Option(None, "--host", help="Address to listen on (default 127.0.0.1; another "
                                                            "needs FOVEATE_API_KEY or --allow-public)."),
    port: Optional[int] = typer.Option(None, "--port", help="Port (default 8000)."),
    store: Optional[Path] = typer.Option(None, "--store", "-s", help="Texture store folder (default "
                                                                     "~/.cache/foveate/store)."),
    preset: Optional[str] = typer.Option(None, "--preset", "-p", help="Encode preset for uploads (default: "
                                                                      "default)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Encode workers (default 2)."),
    pool: Optional[str] = typer.Option(None, "--pool", help="Encode pool: thread (default) or process."),
    queue: Optional[int] = typer.Option(None, "--queue", help="Encode jobs that may wait; more answer 503 "
                                                              "(default 16)."),
    max_upload_mb: Optional[float] = typer.Option(None, "--max-upload-mb", help="Larger uploads answer 413 "
                                                                                "(default 32)."),
    max_pixels: Optional[int] = typer.Option(None, "--max-pixels", help="Larger images answer 422 (default 25M)."),
    cache_mb: Optional[float] = typer.Option(None, "--cache-mb", help="Decoded textures kept in memory "
                                                                      "(default 512 MiB)."),
    store_max_mb: Optional[float] = typer.Option(None, "--store-max-mb", help="Store cap, LRU eviction (default: "
                                                                              "the store's saved cap)."),
    request_timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds before a request answers "
                                                                            "504 (default 60)."),
    allow_public: bool = typer.Option(False, "--allow-public", help="Listen on a non-loopback address without "
                                                                    "FOVEATE_API_KEY (a proxy authenticates)."),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve the HTTP API (FastAPI on uvicorn): upload once, select per query.  Every flag also reads the
    environment variable FOVEATE_<FLAG> (FOVEATE_STORE, FOVEATE_PRESET, FOVEATE_MAX_UPLOAD_MB, FOVEATE_TIMEOUT,
    ...); flags win.  Only from the environment: FOVEATE_API_KEY (bearer token), FOVEATE_RETRY_AFTER,
    FOVEATE_TORCH_THREADS."""
    import uvicorn

    from .service import ServiceSettings, create_app
    from .store import TextureStore

    settings = ServiceSettings.from_env(
        host=host, port=port, store=store, preset=preset, workers=workers, pool=pool, queue=queue,
        max_upload_mb=max_upload_mb, max_pixels=max_pixels, cache_mb=cache_mb, store_max_mb=store_max_mb,
        request_timeout=request_timeout, allow_public=allow_public or None)
    settings.check_bind()
    TextureStore(settings.store).close()  # a bad store folder fails here, as one line
    auth = "bearer token" if settings.api_key else "none"
    err.print(f"foveate serve: http://{settings.host}:{settings.port} (docs at /docs), store {settings.store}, "
              f"preset {settings.preset}, {settings.workers} {settings.pool} workers, auth {auth}", highlight=False)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=log_level,
                timeout_graceful_shutdown=5, h11_max_incomplete_event_size=MAX_REQUEST_HEAD)


@app.command("bench-serve")
def bench_serve(
    clients: int = typer.Option(16, "--clients", "-c", help="Concurrent clients."),
    requests: int = typer.Option(2000, "--requests", "-n", help="Select requests in all."),
    images: int = typer.Option(20, "--images", help="Images uploaded first (generated pages and photos)."),
    size: int = typer.Option(512, "--size", help="Image side in pixels."),
    preset: str = typer.Option("fast", "--preset", "-p", help="Server encode preset."),
    pools: str = typer.Option("", "--pools", help="Also compare encode pools, e.g. thread,process: uploads/s "
                                                  "of --images fresh images per pool."),
    workers: int = typer.Option(2, "--workers", help="Encode workers for the pool comparison."),
    torch_threads: int = typer.Option(1, "--torch-threads", help="The server's torch threads (FOVEATE_TORCH_THREADS)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Load-test a real `foveate serve` subprocess: upload images, then many concurrent selects; latency
    percentiles, throughput, errors, server memory before and after."""
    from .bench.service import run_service_bench

    run_service_bench(clients=clients, requests=requests, images=images, size=size, preset=preset,
                      pools=[p for p in pools.split(",") if p], workers=workers, torch_threads=torch_threads,
                      json_path=json_path, console=out)


@app.command()
def bench(
    image: list[str] = typer.Option([], "--image", "-i", help="Images to benchmark (default: the bundled photo "
                                                               "and page, resized to 1024x1024)."),
    repeats: int = typer.Option(20, "--repeats", "-n", help="Repetitions per measurement (median reported)."),
    presets: str = typer.Option("fast,default,full", "--presets", help="Comma-separated presets."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the results as JSON here."),
    device: str = DeviceOpt,
) -> None:
    """Benchmark encode (per channel group), select (scoring + cascade, and with the token cut) and memory."""
    from .bench.encode import run_bench

    run_bench([_resolve_input(p) for p in image], repeats=repeats, presets=[p for p in presets.split(",") if p],
              json_path=json_path, device=device, console=out)


@app.command("eval")
def eval_command(
    data_dir: Path = typer.Argument(..., help="A folder with queries.jsonl (image, query, boxes per line) and images."),
    budget: list[str] = typer.Option(["273"], "--budget", "-b", help="Budget(s): 273, or 64,144,273,576 for a curve."),
    mode: str = typer.Option("quadtree", "--mode", "-m", help="quadtree or topk."),
    area_exponent: float = typer.Option(1.0, "--area-exponent", help="quadtree: weight of the area a split refines."),
    min_level: int = typer.Option(0, "--min-level", help="quadtree: never split below this level."),
    topk_levels: str = typer.Option("4,2,0", "--topk-levels", help="topk: cascade stage levels, e.g. 4,3,2,1,0."),
    topk_candidates: str = typer.Option("default", "--topk-candidates",
                                        help="topk: candidates per stage transition, e.g. 500,none (none = keep all)."),
    gist: bool = typer.Option(True, "--gist/--no-gist", help="topk (and the random baseline): add the coarsest level."),
    variant: list[str] = typer.Option([], "--variant", help="Another foveate row from the same textures: "
                                      "NAME:key=value[:key=value], e.g. cascade5:mode=topk:topk_levels=4,3,2,1,0."),
    baselines: str = typer.Option("all", "--baselines", help="all, none, or a comma-separated subset of uniform, "
                                  "random, query_blind, oracle, full."),
    min_px: float = typer.Option(8.0, "--min-px", help="Text stays legible while height / scale >= this (px)."),
    hit_threshold: float = typer.Option(0.9, "--hit-threshold", help="A hit: every box legibly covered >= this."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", help="Evaluate a random sample of N queries."),
    seed: int = typer.Option(0, "--seed", help="Seed for --limit and the random baseline."),
    random_seeds: int = typer.Option(5, "--random-seeds", help="Seeds averaged for the random baseline."),
    ocr: str = typer.Option("auto", "--ocr", help="OCR answer check: auto, on or off."),
    ocr_budget: list[str] = typer.Option([], "--ocr-budget", help="Run the (slow) OCR check at these budgets only."),
    group_by: list[str] = typer.Option([], "--group-by", help="Also tabulate by this metadata key (e.g. isthing)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Output folder (default out/eval/<set>)."),
    plots: bool = typer.Option(False, "--plots", help="Also write curves.png and gallery.png (needs matplotlib)."),
    gallery: int = typer.Option(12, "--gallery", help="Worst queries shown in gallery.png."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the markdown tables (as in eval.md) to stdout."),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads (selection's small matmuls "
                                          "gain nothing from more than 1 on a loaded machine)."),
    preset: str = PresetOpt, patch_size: int = PatchOpt, max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt, device: str = DeviceOpt,
) -> None:
    """Measure on annotated data whether the selected tokens cover what each query asks about, next to the
    uniform, random, query-blind and oracle baselines at the same budget(s).  Writes eval.json (every
    per-query record) and eval.md."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .core.errors import DatasetError
    from .eval.baselines import BASELINES
    from .eval.plots import load_pyplot
    from .eval.report import print_tables, write_outputs
    from .eval.runner import EvalConfig, parse_select_value, parse_variant, run_eval

    sel = SelectConfig(mode=parse_select_value("mode", mode), area_exponent=area_exponent, min_level=min_level,
                       topk_levels=parse_select_value("topk_levels", topk_levels),
                       topk_candidates=parse_select_value("topk_candidates", topk_candidates), gist=gist)
    config = EvalConfig(
        budgets=_numbers(budget, "--budget", kind=int), encode=_encode_config(preset, patch_size, max_levels, max_pixels),
        select=sel, variants=tuple(parse_variant(v, sel) for v in variant),
        baselines=BASELINES if baselines == "all" else tuple(b.strip() for b in baselines.split(",")
                                                              if b.strip() and baselines != "none"), min_px=min_px,
        hit_threshold=hit_threshold, random_seeds=random_seeds, seed=seed, limit=limit, ocr=ocr,
        ocr_budgets=_numbers(ocr_budget, "--ocr-budget", kind=int) if ocr_budget else None, device=device)
    if threads is not None:
        import torch

        if threads < 1:
            raise FoveateError("--threads must be at least 1")
        torch.set_num_threads(threads)
    if plots:
        load_pyplot()  # fail now, not after the run
    with Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("eval", total=None)
        result = run_eval(data_dir, config, progress=lambda done, total: bar.update(task, completed=done, total=total))
    if not result.records:
        for p in result.problems[:20]:
            err.print(str(p), highlight=False, markup=False)
        raise DatasetError(f"nothing to evaluate in {data_dir}: {result.counts.get('problems', 0)} problems, "
                           "no valid query (see above)")
    print_tables(result, out, group_by)
    written = write_outputs(result, output or Path("out") / "eval" / data_dir.resolve().name, plots=plots,
                            gallery=gallery, group_by=group_by)
    if markdown:
        print(written["markdown"].read_text())
    out.print("wrote " + ", ".join(str(p) for p in written.values()), highlight=False)


@app.command()
def video(
    source: Path = typer.Argument(..., help="A video file (mp4, webm, ... via OpenCV/FFmpeg) or a folder of frames."),
    query: Optional[str] = typer.Option(None, "--query", "-q", help="Query text, applied to every frame."),
    point: list[str] = typer.Option([], "--point", help="Positive point prompt 'x,y' on the first frame; repeatable."),
    neg_point: list[str] = typer.Option([], "--neg-point", help="Negative point prompt 'x,y'; repeatable."),
    box: list[str] = typer.Option([], "--box", help="Box prompt 'x0,y0,x1,y1' on the first frame; repeatable."),
    prompt_all_frames: bool = typer.Option(False, "--prompt-all-frames",
                                           help="Apply points/boxes to every frame, not only the first."),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", "-b", help="Tokens to select per frame."),
    mode: str = typer.Option("quadtree", "--mode", "-m", help="quadtree or topk."),
    gist: bool = typer.Option(True, "--gist/--no-gist", help="topk: add the whole image at the coarsest level."),
    output: Path = typer.Option(Path("out/video"), "--output", "-o", help="Output folder."),
    threshold: Optional[float] = typer.Option(
        None, "--threshold", "-t", help="Re-encode a tile when its change exceeds this many grey levels: 0 = the exact "
        "update (any change; the texture is exactly the frame's encode); otherwise the motion-compensated update, "
        "the residual after moving the features with the camera (default 8)."),
    reencode_budget: float = typer.Option(0.05, "--reencode-budget",
                                          help="Motion-compensated update: at most this share of the frame's pixels "
                                               "is re-encoded per frame (more: closer to a from-scratch encode, "
                                               "slower)."),
    memory: int = typer.Option(6, "--memory", help="Recent frames in the temporal memory."),
    keyframe_interval: int = typer.Option(30, "--keyframe-interval", help="A full refresh every N frames."),
    stability: float = typer.Option(0.0, "--stability",
                                    help="Keep last frame's tokens unless a new one beats them by this score margin."),
    full: bool = typer.Option(False, "--full", help="Encode every frame from scratch (no incremental updates)."),
    overlay: bool = typer.Option(True, "--overlay/--no-overlay", help="Write overlay.mp4."),
    max_frames: Optional[int] = typer.Option(None, "--max-frames", help="Stop after this many frames."),
    fps: Optional[float] = typer.Option(None, "--fps", help="Overlay frame rate (default: the video's, else 24)."),
    preset: str = typer.Option("fast", "--preset", "-p", help="Channel preset: fast, default or full."),
    patch_size: int = PatchOpt, max_levels: int = LevelsOpt, max_pixels: int = MaxPixOpt, device: str = DeviceOpt,
) -> None:
    """Stream a video through a bounded temporal memory: re-encode only what changed, select tokens per frame.
    Writes selections.jsonl, stats.jsonl and overlay.mp4."""
    import os
    import warnings

    from .video import FrameSkippedWarning, VideoConfig, VideoPredictor, run_video

    cfg = SelectConfig(budget=budget, mode=mode, gist=gist)
    if max_frames is not None and max_frames < 1:
        raise FoveateError("--max-frames must be at least 1")
    q = _prompt_query(query, point, neg_point, box)
    vcfg = VideoConfig(change_threshold=threshold, reencode_budget=reencode_budget, memory=memory,
                       keyframe_interval=keyframe_interval,
                       stability=stability, incremental=not full)
    predictor = VideoPredictor(_encode_config(preset, patch_size, max_levels, max_pixels), vcfg, cfg, device=device)

    def show(message, category, filename, lineno, file=None, line=None):
        err.print(f"warning: {message}", highlight=False, markup=False)

    warnings.showwarning = show
    warnings.simplefilter("always", FrameSkippedWarning)
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # FFmpeg's own log lines; we report skipped frames ourselves
    progress = err.status("encoding frame 0 ...") if err.is_terminal else None
    if progress is not None:
        progress.start()
    try:
        summary = run_video(source, q, output, predictor=predictor, prompt_frames="all" if prompt_all_frames else "first",
                            overlay=overlay, max_frames=max_frames, fps=fps,
                            on_frame=(lambda r: progress.update(f"encoding frame {r.index + 1} ...")) if progress else None)
    finally:
        if progress is not None:
            progress.stop()
    for note in summary.notes:
        err.print(f"note: {note}", highlight=False)
    table = Table("frames", "skipped", "keyframes", "changed", "re-encoded", "add_frame ms (median)",
                  "select ms (median)", "tokens kept", box=None)
    table.add_row(str(summary.frames), str(summary.skipped), str(summary.keyframes),
                  f"{100 * summary.changed_share:.1f}%", f"{100 * summary.reencoded_share:.1f}%",
                  f"{summary.add_ms_median:.1f}", f"{summary.select_ms_median:.1f}",
                  "-" if summary.kept_share is None else f"{100 * summary.kept_share:.0f}%")
    out.print(table)
    out.print("wrote " + ", ".join(summary.outputs.values()), highlight=False)


@app.command("bench-video")
def bench_video(
    source: Optional[Path] = typer.Argument(None, help="A video file or folder of frames (default: a generated "
                                                       "static-camera clip)."),
    frames: int = typer.Option(200, "--frames", "-n", help="Frames to stream."),
    thresholds: str = typer.Option("0,8", "--thresholds",
                                   help="Change thresholds to compare, comma-separated (0: the exact update; others: "
                                        "motion-compensated)."),
    approximate: str = typer.Option("", "--approximate",
                                    help="Thresholds of extra exact-update sessions that re-encode only the changed "
                                         "tiles, neighbours and full-frame fallback skipped (comma-separated)."),
    reencode_budgets: str = typer.Option("", "--reencode-budgets",
                                         help="Extra motion-compensated sessions (threshold 8) with these re-encode "
                                              "budgets, shares of the frame's pixels (comma-separated)."),
    stream: Optional[int] = typer.Option(None, "--stream",
                                         help="Instead: resident memory over this many generated frames."),
    preset: str = typer.Option("fast", "--preset", "-p", help="Channel preset."),
    cv_threads: Optional[int] = typer.Option(None, "--cv-threads", min=1,
                                             help="OpenCV threads for the run (default: OpenCV's, one per core)."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the results as JSON here."),
    device: str = DeviceOpt,
) -> None:
    """Video benchmark: per-frame cost of incremental updates vs encoding every frame from scratch (same run), or
    resident memory over a long generated stream (--stream N)."""
    from .bench.video import bench_clip, bench_memory, generated_frame

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
        bench_clip(clip, preset=preset, thresholds=ts, approximate=approx, reencode_budgets=budgets, max_frames=frames,
                   device=device, console=out, json_path=json_path, label="generated static-camera clip (3 moving boxes), 960x540")
    else:
        bench_clip(source, preset=preset, thresholds=ts, approximate=approx, reencode_budgets=budgets,
                   max_frames=frames, device=device, console=out, json_path=json_path)


@app.command("eval-video")
def eval_video(
    root: Path = typer.Argument(..., help="A folder with queries.jsonl (image, boxes, sequence, frame_index per line), "
                                          "e.g. a DAVIS 2016 export."),
    budget: int = typer.Option(DEFAULT_BUDGET, "--budget", "-b", help="Level-0 tokens per frame (top-k, no gist)."),
    protocols: str = typer.Option("prev-box,first-box,blind", "--protocols",
                                  help="prev-box, first-box and/or blind (comma-separated)."),
    approximate: str = typer.Option("8,16", "--approximate",
                                    help="Thresholds of extra exact-update sessions that re-encode only the changed "
                                         "tiles, neighbours and full-frame fallback skipped (comma-separated; '' for "
                                         "none)."),
    preset: str = typer.Option("fast", "--preset", "-p", help="Channel preset."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the results as JSON here."),
    device: str = DeviceOpt,
) -> None:
    """Per-frame coverage of an annotated box, incremental updates vs encoding every frame from scratch (one run)."""
    from .eval.video import PROTOCOLS, eval_boxes

    chosen = tuple(p.strip() for p in protocols.split(",") if p.strip())
    bad = [p for p in chosen if p not in PROTOCOLS]
    if bad or not chosen:
        raise FoveateError(f"unknown protocol(s) {bad}; choose from {', '.join(PROTOCOLS)}")
    if not (root / "queries.jsonl").is_file():
        raise FoveateError(f"{root}: no queries.jsonl")
    eval_boxes(root, protocols=chosen, budget=budget, preset=preset, approximate=_numbers(approximate, "--approximate"),
               device=device, console=out, json_path=json_path)


def main() -> None:
    """Console entry point: run the app, turning foveate errors into one-line messages."""
    try:
        app()
    except FoveateError as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted", highlight=False)
        sys.exit(130)
    except OSError as exc:  # writing outputs: disk full, permission denied, ...
        err.print(f"error: {exc}", highlight=False, markup=False)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
