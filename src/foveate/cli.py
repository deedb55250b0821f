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

from .config import DEFAULT_BUDGET, EncodeConfig, SelectConfig
from .errors import FoveateError
from .io import DEFAULT_MAX_PIXELS

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
                                "semantic channels; adds the semantic group.  Default: $FOVEATE_SEMANTIC_MODEL.")


def _encode_config(preset: str, patch_size: int, max_levels: int, max_pixels: int,
                   semantic_model: Optional[str] = None) -> EncodeConfig:
    cfg = EncodeConfig(preset=preset, patch_size=patch_size, max_levels=max_levels, max_pixels=max_pixels)
    if semantic_model:
        from .channels import resolve_groups

        groups = resolve_groups(cfg)
        cfg = EncodeConfig(preset=preset, groups=groups + ("semantic",) * ("semantic" not in groups),
                           patch_size=patch_size, max_levels=max_levels, max_pixels=max_pixels,
                           options={"semantic_model": semantic_model})
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
    from .texture import Texture, encode

    if path.suffix == ".fvt":
        return Texture.load(path, device=device)
    if quiet or not err.is_terminal:
        return encode(path, config, device=device)
    with err.status(f"encoding {path.name} ..."):
        return encode(path, config, device=device)


def _parse_numbers(text: str, n: int, what: str) -> tuple[float, ...]:
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    try:
        vals = tuple(float(p) for p in parts)
    except ValueError:
        raise typer.BadParameter(f"{what} must be {n} numbers separated by commas, got {text!r}") from None
    if len(vals) != n:
        raise typer.BadParameter(f"{what} must be {n} numbers separated by commas, got {text!r}")
    return vals


def _slug(text: str | None, i: int) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", (text or "prompt")).strip("-").lower()[:40] or "query"
    return f"q{i:02d}-{s}"


# -- commands --------------------------------------------------------------------------------------------
@app.command()
def encode(
    images: list[str] = typer.Argument(..., help="Image file(s); example:page / example:photo for the bundled ones."),
    output: Optional[Path] = typer.Option(None, "--output", "-o",
                                          help="Output .fvt file (one image) or folder (several images)."),
    preset: str = PresetOpt, patch_size: int = PatchOpt, max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt, device: str = DeviceOpt, semantic_model: Optional[str] = SemanticOpt,
) -> None:
    """Encode image(s) once into texture file(s) (.fvt) that `foveate select` answers queries from."""
    from .texture import encode as encode_image

    config = _encode_config(preset, patch_size, max_levels, max_pixels, semantic_model)
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
    from .scoring import Query
    from .selection import select as select_tokens

    cfg = SelectConfig(budget=budget, mode=mode, gist=gist)  # validate before the heavy encode
    if max_crops < 1 or vlm_patch < 1:
        raise FoveateError("--max-crops and --vlm-patch must be at least 1")
    points = [_parse_numbers(p, 2, "--point") for p in point] + [_parse_numbers(p, 2, "--neg-point") for p in neg_point]
    labels = [1] * len(point) + [0] * len(neg_point)
    boxes = [_parse_numbers(b, 4, "--box") for b in box]
    texts: list[Optional[str]] = list(query) or [None]
    queries = [Query(text=t, points=tuple(points), point_labels=tuple(labels), boxes=tuple(boxes)) for t in texts]
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
    from .channels import get_group

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
    from .bench import run_bench

    run_bench([_resolve_input(p) for p in image], repeats=repeats, presets=[p for p in presets.split(",") if p],
              json_path=json_path, device=device, console=out)


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
