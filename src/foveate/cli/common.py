"""What the commands share: the typer app, the two consoles, the options every encoding command takes, and the
helpers that turn command-line values into configs, inputs, textures and queries."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import typer
from rich.console import Console

from .._tables import plural, scale_text  # noqa: F401  (the commands' wording)
from ..core.config import DEFAULT_BUDGET, EncodeConfig, SelectConfig
from ..core.errors import ConfigError, FoveateError

if TYPE_CHECKING:
    from ..core.texture import Texture

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
ModelOpt = typer.Option(
    None,
    "--model",
    help="The model the request is for (claude-opus-4-7, gpt-5.2, gemini-3-flash-preview, Qwen/Qwen3-VL-8B-Instruct; "
    "foveate models lists them): picks its provider's token rule unless --vlm names one, and goes into the body.",
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
RecogniserOpt = typer.Option(
    "float",
    "--recogniser",
    help="Text group: the model that reads the lines: float (the one the shipped weights were fit on) or int8 "
    "(~1.7x as fast, made once by foveate prepare --int8; reads some lines differently).",
)


#: EncodeConfig's fields and the options that set them
_ENCODE_FLAGS = {
    "patch_size": "--patch-size",
    "max_levels": "--max-levels",
    "max_pixels": "--max-pixels",
    "recogniser": "--recogniser",
    "ocr": "--ocr",
}


def _encode_config(
    preset: str,
    patch_size: int,
    max_levels: int,
    max_pixels: int,
    semantic_model: str | None = None,
    ocr: str = "auto",
    recogniser: str = "float",
    ocr_flag: str = "--ocr",
) -> EncodeConfig:
    """The encode options as an :class:`EncodeConfig`; a value it refuses is a usage error on the option that set it
    (``ocr_flag``: the name of the command's OCR option)."""
    from ..channels.registry import resolve_groups, with_semantic_model

    try:
        options = (("ocr", ocr), ("recogniser", recogniser))
        cfg = EncodeConfig(
            preset=preset, patch_size=patch_size, max_levels=max_levels, max_pixels=max_pixels, options=options
        )
    except ConfigError as exc:  # the option the message names (EncodeConfig names the field it refused)
        flags = {**_ENCODE_FLAGS, "ocr": ocr_flag}
        flag = next((f for field, f in flags.items() if field in str(exc)), None)
        raise typer.BadParameter(str(exc), param_hint=flag) from None
    resolve_groups(cfg)  # an unknown preset fails here, also for a saved texture that is not encoded again
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


class StoredRef(NamedTuple):
    """``STORE/#ID``: a texture in a texture store (``foveate encode --store``); the id may be a unique prefix."""

    store: Path
    id: str


Source = Path | DatasetRef | StoredRef


def _resolve_input(path: str) -> Source:
    """``example:page`` / ``example:photo`` name the bundled examples; ``STORE/#ID`` a texture in a texture store,
    ``DATASET/#ID`` one in a texture dataset; anything else is a path."""
    if "#" in path:
        from ..ray.reader import split_ref
        from ..store.sqlite import DB_NAME

        base, _, tid = path.rpartition("#")
        folder = Path(base[:-1] if base.endswith("/") else base)
        if tid and "/" not in tid and (folder / DB_NAME).is_file() and not Path(path).exists():
            return StoredRef(folder, tid)
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
    """An image file or a bundled example (:func:`_resolve_input`); a texture in a dataset or a store is no image."""
    src = _resolve_input(path)
    if not isinstance(src, Path):
        raise FoveateError(f"{path} is an encoded texture, not an image")
    return src


def _check_cover_early(src: Source, config: EncodeConfig, select_config: SelectConfig) -> None:
    """Whether a quadtree budget can cover the image, from its header alone (before the heavy decode and encode);
    a saved .fvt, a dataset row or an unreadable header is left to the encode."""
    if not isinstance(src, Path) or src.suffix == ".fvt" or select_config.mode != "quadtree":
        return
    from ..core.io import peek_size
    from ..selection.quadtree import check_cover

    size = peek_size(src, config.max_pixels)
    if size is not None:
        check_cover(size, config.patch_size, config.max_levels, select_config.budget)


def _texture_for(path: Source, config: EncodeConfig, device: str, quiet: bool = False) -> Texture:
    """Load a saved ``.fvt`` texture or one from a dataset or a store (no encode), or encode an image, with a spinner
    on a terminal."""
    from ..core.texture import Texture, encode

    if isinstance(path, StoredRef):
        return _stored_texture(path, device)
    if isinstance(path, DatasetRef):
        from ..ray.reader import find_texture

        return find_texture(path.dataset, path.id, device=device)
    if path.suffix == ".fvt":
        return Texture.load(path, device=device)
    if quiet or not err.is_terminal:
        return encode(path, config, device=device)
    with err.status(f"encoding {path.name} ..."):
        return encode(path, config, device=device)


def _stored_texture(ref: StoredRef, device: str) -> Texture:
    """The texture ``ref`` names in its store (a unique id prefix will do)."""
    from ..store import TextureStore

    with TextureStore(ref.store, create=False) as store:
        tid = store.resolve_id(ref.id)  # by the id index; none or several: a StoreError naming them
        tex = store.get(tid, device=device)
    if tex is None:  # dropped as corrupt when read
        raise FoveateError(f"the texture {tid} in {ref.store} is corrupt and was dropped: encode the image again")
    return tex


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


def counting_bar(first: str = "{task.description}"):
    """The progress bar of a long run (eval, train) on stderr: a label, the bar, done of total, time; only on a
    terminal, gone when done."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(first),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


def _budgets(values: str | list[str], what: str = "--budget") -> tuple[int, ...]:
    """Budgets from the command line: a malformed number is a usage error (exit 2), a budget ``select`` refuses is a
    one-line error (exit 1)."""
    from ..eval.config import parse_budgets

    nums = _numbers(values, what, kind=int)
    return parse_budgets([str(n) for n in nums] if nums else values, what)


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


def pictures_folder(output: Path, image_format: str) -> tuple[Path, str]:
    """``OUTPUT/pictures/`` for a prompt's pictures, emptied of an earlier run's (``NN-kind.ext``), and the file
    extension of ``image_format``."""
    output.mkdir(parents=True, exist_ok=True)
    pdir = output / "pictures"
    pdir.mkdir(exist_ok=True)
    for old in pdir.glob("[0-9][0-9]-*.*"):
        old.unlink()
    return pdir, "jpg" if image_format.lower() in ("jpeg", "jpg") else "png"
