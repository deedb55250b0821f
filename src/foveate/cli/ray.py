"""``foveate encode --ray [ADDRESS] SRC... -o OUT/``: the encode command's Ray path, writing a texture dataset
(:mod:`foveate.ray`).  ``foveate store import`` and ``foveate select DATASET/#ID`` read such datasets."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from .._tables import plural
from ..core.config import EncodeConfig
from ..core.errors import FoveateError
from .common import _resolve_input, err, out

_ADDRESS = re.compile(r"[\w.\-]+:\d+")


def is_address(value: str) -> bool:
    """A Ray cluster address: ``auto``, ``local``, ``ray://...`` or ``host:port`` (not an existing path)."""
    return (
        value in ("auto", "local")
        or value.startswith("ray://")
        or bool(_ADDRESS.fullmatch(value) and not Path(value).exists())
    )


def ray_flag_argv(argv: list[str]) -> list[str]:
    """``--ray`` takes an optional address, which Click's options cannot: rewrite ``--ray ADDRESS`` as
    ``--ray=ADDRESS`` and a bare ``--ray`` (followed by an image, an option or nothing) as ``--ray=``."""
    if "--ray" not in argv:
        return argv
    i = argv.index("--ray")
    nxt = argv[i + 1] if i + 1 < len(argv) else None
    if nxt is not None and is_address(nxt):
        return argv[:i] + [f"--ray={nxt}"] + argv[i + 2 :]
    return argv[:i] + ["--ray="] + argv[i + 1 :]


def split_address(value: str, images: list[str]) -> tuple[str | None, list[str]]:
    """(address or ``None`` for the default cluster, images) from ``--ray=VALUE``: a value that is no address
    is the first image."""
    if not value:
        return None, images
    return (value, images) if is_address(value) else (None, [value, *images])


def encode_with_ray(
    address_opt: str, images: list[str], output: str | None, config: EncodeConfig, workers: int, batch_size: int
) -> None:
    from ..ray.dataset import check_output
    from ..ray.encode import encode_dataset

    address, images = split_address(address_opt, images)
    if not images:
        raise typer.BadParameter("give the images to encode (files, folders, globs or URIs)", param_hint="IMAGES")
    if output is None:
        raise FoveateError("--ray writes a texture dataset: give its folder with -o OUT/")
    check_output(output)  # an empty path, a file, a place that cannot be written: before Ray starts (10 s and more)
    sources = [str(_resolve_input(p)) if p.startswith("example:") else p for p in images]
    s = encode_dataset(
        sources if len(sources) > 1 else sources[0],
        output,
        config=config,
        concurrency=workers or None,
        batch_size=batch_size,
        address=address,
        progress=True,
    )
    d = s.to_dict()
    for source, why in s.failures.items():
        err.print(f"[yellow]failed[/] {source}: {why}", markup=True, highlight=False)
    rate = f" ({d['per_s']:.2f} images/s)" if d["per_s"] else ""
    out.print(
        f"{plural(d['rows'], 'image')} in {d['seconds']:.1f} s on {plural(d['workers'], 'Ray worker')}{rate}: "
        f"{s.count('encoded')} encoded, {s.count('skipped')} already in {output} (skipped), "
        f"{plural(s.count('duplicate'), 'duplicate')} of stored pictures, {s.count('failed')} failed (rows with the "
        f"error).  {d['output_bytes'] / 2**20:.1f} MiB of textures written",
        highlight=False,
    )
    if s.count("failed"):
        raise FoveateError(f"{s.count('failed')} of {d['rows']} images could not be encoded (their rows say why)")
