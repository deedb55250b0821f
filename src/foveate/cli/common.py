"""What the commands share: the typer app, the two consoles, the options every encoding command takes, and the
helpers that turn command-line values into configs, inputs, textures and queries."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import typer
from rich.console import Console

from ..core.config import DEFAULT_BUDGET, EncodeConfig
from ..core.errors import ConfigError, FoveateError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Encode an image once; select a fixed budget of VLM tokens per query.",
)
out = Console()
err = Console(stderr=True)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# -- shared options --------------------------------------------------------------------------------------
PresetOpt = typer.Option("default", "--preset", "-p", help="Channel preset: fast, default or full.")
PatchOpt = typer.Option(16, "--patch-size", help="Tile / token side P in pixels.")
LevelsOpt = typer.Option(5, "--max-levels", help="Pyramid levels (0..N-1); fewer for small images.")
MaxPixOpt = typer.Option(EncodeConfig.max_pixels, "--max-pixels", help="Refuse images with more pixels than this.")
DeviceOpt = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N.")
WeightsOpt = typer.Option(
    "default",
    "--weights",
    help="Relevance weights: default (the trained weights foveate ships), handset, or a file written by foveate train.",
)
BudgetOpt = typer.Option(DEFAULT_BUDGET, "--budget", "-b", help="Tokens to select.")
ModeOpt = typer.Option("auto", "--mode", "-m", help="auto, quadtree, topk or uniform.")
SemanticOpt = typer.Option(
    None,
    "--semantic-model",
    help="Local CLIP checkpoint directory (or an id already in the model cache) for the "
    "semantic channels; adds the semantic group to any preset.  Without it, "
    "$FOVEATE_SEMANTIC_MODEL configures the group of presets that have it (full).",
)
OcrOpt = typer.Option(
    "auto",
    "--ocr",
    help="Text group (default and full presets): auto = OCR only where a detector "
    "pass on a small copy finds text; always = the whole image.",
)


def _encode_config(
    preset: str, patch_size: int, max_levels: int, max_pixels: int, semantic_model: str | None = None, ocr: str = "auto"
) -> EncodeConfig:
    from ..channels.registry import with_semantic_model

    try:
        cfg = EncodeConfig(
            preset=preset, patch_size=patch_size, max_levels=max_levels, max_pixels=max_pixels, options=(("ocr", ocr),)
        )
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--ocr") from None
    return with_semantic_model(cfg, semantic_model)


_SAID: set[str] = set()


def _say_absent_once(tex) -> None:
    """Say once per command that the semantic channels are absent (no model configured): nothing fakes them."""
    if "semantic" in tex.absent and "semantic" not in _SAID:
        _SAID.add("semantic")
        err.print(
            "note: the semantic channels are absent (zeros): no image-text model is configured "
            "(--semantic-model DIR or $FOVEATE_SEMANTIC_MODEL); text queries use OCR only",
            highlight=False,
        )


class DatasetRef(NamedTuple):
    """``DATASET/#ID``: a texture in a texture dataset (``foveate encode --ray``)."""

    dataset: str
    id: str


def _resolve_input(path: str) -> Path | DatasetRef:
    """``example:page`` / ``example:photo`` name the bundled examples; ``DATASET/#ID`` a texture in a texture
    dataset; anything else is a path."""
    if "#" in path:
        from ..ray.reader import split_ref

        ref = split_ref(path)
        if ref is not None:
            return DatasetRef(*ref)
    if path.startswith("example:"):
        name = path.split(":", 1)[1]
        matches = sorted(EXAMPLES.glob(f"{name}.*"))
        if not matches:
            known = ", ".join(sorted(p.stem for p in EXAMPLES.iterdir() if p.suffix != ".md"))
            raise FoveateError(f"no bundled example {name!r}; known: {known}")
        return matches[0]
    return Path(path)


def _resolve_image(path: str) -> Path:
    """An image file or a bundled example (:func:`_resolve_input`); a texture in a dataset is no image."""
    src = _resolve_input(path)
    if isinstance(src, DatasetRef):
        raise FoveateError(f"{path} is a texture in a dataset, not an image")
    return src


def _check_cover_early(src: Path | DatasetRef, config: EncodeConfig, select_config) -> None:
    """Whether a quadtree budget can cover the image, from its header alone (before the heavy decode and encode);
    a saved .fvt, a dataset row or an unreadable header is left to the encode."""
    if not isinstance(src, Path) or src.suffix == ".fvt" or select_config.mode != "quadtree":
        return
    from ..core.io import peek_size
    from ..selection.quadtree import check_cover

    size = peek_size(src, config.max_pixels)
    if size is not None:
        check_cover(size, config.patch_size, config.max_levels, select_config.budget)


def _texture_for(path: Path | DatasetRef, config: EncodeConfig, device: str, quiet: bool = False):
    """Load a saved ``.fvt`` texture or one from a dataset (no encode), or encode an image, with a spinner on a
    terminal."""
    from ..core.texture import Texture, encode

    if isinstance(path, DatasetRef):
        from ..ray.reader import find_texture

        return find_texture(path.dataset, path.id, device=device)
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


def _prompt_query(text: str | None, point: list[str], neg_point: list[str], box: list[str]):
    """A :class:`Query` from the CLI's text and SAM-style prompt options (``--point x,y``, ``--neg-point``,
    ``--box x0,y0,x1,y1``, each repeatable)."""
    from ..query.query import Query

    points = [_numbers(p, "--point", 2) for p in point] + [_numbers(p, "--neg-point", 2) for p in neg_point]
    return Query(
        text=text,
        points=tuple(points),
        point_labels=(1,) * len(point) + (0,) * len(neg_point),
        boxes=tuple(_numbers(b, "--box", 4) for b in box),
    )


def _slug(text: str | None, i: int) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", (text or "prompt")).strip("-").lower()[:40] or "query"
    return f"q{i:02d}-{s}"
