"""``foveate store``: inspect and maintain a texture store (``ls``, ``info``, ``gc``, ``clear``, ``import``,
``bench``)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .._tables import plural
from ..core.errors import FoveateError
from .common import app, err, out

store_app = typer.Typer(no_args_is_help=True, help="Inspect and maintain a texture store (see `encode --store`).")
app.add_typer(store_app, name="store")
StoreOpt = typer.Option(
    None,
    "--store",
    "-s",
    envvar="FOVEATE_STORE",
    help="Store folder (default: $FOVEATE_STORE, else ~/.cache/foveate/store).",
)


def _open_store(store: Path | None, create: bool = False):
    from ..service.settings import default_store_dir
    from ..store import TextureStore

    return TextureStore(store or default_store_dir(), create=create)


def _ago(t: float) -> str:
    import time

    s = max(0.0, time.time() - t)
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{s / n:.0f} {unit} ago"
    return f"{s:.0f} s ago"


@store_app.command("ls")
def store_ls(
    store: Path | None = StoreOpt,
    order: str = typer.Option("last_access", "--order", help="last_access, size or created."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List stored textures, most recently used first: whole ids (to copy), the file each was encoded from."""
    from ..core.fvt import FORMAT_VERSION

    damaged: list[str] = []
    with _open_store(store) as st:
        entries = st.entries(order, damaged=damaged)
    if damaged:  # the rest is listed; the warning goes to stderr, so --json stays one JSON document
        err.print(
            f"warning: {plural(len(damaged), 'texture')} of {st.path} not listed: metadata unreadable "
            f"({', '.join(damaged[:3])}{', ...' if len(damaged) > 3 else ''}); `foveate store gc` drops them, "
            "encoding the images again stores them anew",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    if json_out:
        out.print_json(json.dumps([e.to_dict() for e in entries]))
        return
    rows = []
    for e in entries:
        stale = "" if e.format_version == FORMAT_VERSION else f" [yellow](format {e.format_version}: gc drops it)[/]"
        details = [
            f"{e.width}x{e.height}",
            e.preset,
            str(len(e.channels)),
            f"{e.size / 1024:.0f}",
            f"{e.encode_ms:.0f}",
        ]
        rows.append((e.id + stale, details, _ago(e.last_access), e.source or "-"))
    table = Table(box=None)
    table.add_column("id", no_wrap=True)
    for name in ("size", "preset", "channels", "KiB", "encode ms"):
        table.add_column(name, no_wrap=True)
    table.add_column("last used")
    table.add_column("source")
    for tid, details, ago, source in rows:
        table.add_row(tid, *details, ago, Text(source))
    fit = out.measure(table, options=out.options.update_width(1 << 20))
    if not out.is_terminal and fit.maximum > out.width:  # piped: the whole table, nothing cut (80 columns by default)
        Console(file=out.file, width=fit.maximum, no_color=out.no_color, highlight=False).print(table)
    elif fit.minimum <= out.width:  # fits, the source and last-use cells wrapped if need be (ids never are)
        out.print(table)
    else:  # a terminal too narrow for the table: two lines an entry, the id alone on the first, never cut
        for tid, (size, preset, channels, kib, ms), ago, source in rows:
            out.print(tid, soft_wrap=True, highlight=False)
            out.print(
                Text(f"  {size}  {preset}  {channels} channels  {kib} KiB  {ms} ms  used {ago}  {source}"),
                highlight=False,
            )


@store_app.command("info")
def store_info(
    texture_id: str | None = typer.Argument(None, help="A texture id (default: the whole store)."),
    store: Path | None = StoreOpt,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
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
    out.print(
        f"store {doc['path']}: {plural(doc['entries'], 'texture')}, {doc['bytes'] / 2**20:.1f} MiB of textures "
        f"(cap {cap}), {doc['file_bytes'] / 2**20:.1f} MiB on disk; format versions "
        f"{doc['format_versions'] or '-'} (this foveate reads {doc['format_version']})",
        highlight=False,
    )


@store_app.command("gc")
def store_gc(
    store: Path | None = StoreOpt,
    verify: bool = typer.Option(False, "--verify", help="Also re-hash every blob; drop corrupt ones."),
    max_mb: float | None = typer.Option(
        None, "--max-mb", help="Set the size cap (MiB, 0 = none) and evict down to it."
    ),
) -> None:
    """Drop unreadable entries (other format versions, unreadable metadata; corrupt blobs with --verify), evict to
    the cap, shrink the file."""
    from ..store.store import check_cap

    max_bytes = None if max_mb is None else check_cap(max_mb * 2**20, f"--max-mb {max_mb}")  # before the store opens
    with _open_store(store) as st:
        rep = st.gc(verify=verify, max_bytes=max_bytes)
    out.print(
        f"removed {rep.other_versions} of other format versions, {rep.corrupt} corrupt, {rep.evicted} "
        f"evicted; textures {rep.bytes_before / 2**20:.1f} -> {rep.bytes_after / 2**20:.1f} MiB, on disk "
        f"{rep.file_bytes_before / 2**20:.1f} -> {rep.file_bytes_after / 2**20:.1f} MiB",
        highlight=False,
    )


@store_app.command("clear")
def store_clear(
    store: Path | None = StoreOpt, yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask.")
) -> None:
    """Remove every texture from the store."""
    import sys

    from ..core.errors import FoveateError

    with _open_store(store) as st:
        if not yes and not sys.stdin.isatty():  # no one to ask: confirm's EOF read as "interrupted"
            raise FoveateError(f"store clear removes all {st.stats()['entries']} textures of {st.path}: pass --yes")
        if not yes and not typer.confirm(f"remove all {st.stats()['entries']} textures from {st.path}?"):
            raise typer.Exit(1)
        n = st.clear()
    out.print(f"removed {plural(n, 'texture')}", highlight=False)


@store_app.command("import")
def store_import(
    dataset: str = typer.Argument(..., help="A texture dataset (folder or URI) from `encode --ray`."),
    store: Path | None = StoreOpt,
) -> None:
    """Copy the textures of a dataset into the store (each verified; what is stored is skipped; a corrupt row is
    listed, and the import goes on)."""
    from ..ray.reader import import_into_store
    from ..ray.runtime import MAX_LISTED_FAILURES

    with _open_store(store, create=True) as st:
        summary = import_into_store(dataset, st)
        entries = st.stats()["entries"]
    for i, (tid, why) in enumerate(sorted(summary.corrupt.items())):
        if i == MAX_LISTED_FAILURES:
            err.print(f"... and {len(summary.corrupt) - i} more corrupt rows", highlight=False)
            break
        err.print(f"[yellow]corrupt[/] {escape(tid)}: {escape(why)}", markup=True, highlight=False, soft_wrap=True)
    out.print(
        f"imported {plural(summary.imported, 'texture')}, skipped {summary.skipped} ({summary.stored} already stored, "
        f"{plural(summary.without_texture, 'row')} without a texture: failed or duplicate), {len(summary.corrupt)} "
        f"corrupt (not imported); store {st.path}: {plural(entries, 'texture')}",
        highlight=False,
    )
    if summary.corrupt:
        raise FoveateError(
            f"{len(summary.corrupt)} corrupt rows of {dataset} were not imported (listed above); encode their "
            "images again"
        )


@store_app.command("bench")
def store_bench(
    count: int = typer.Option(40, "--count", "-n", help="Textures written and read per backend."),
    size: int = typer.Option(1024, "--size", help="Image side in pixels (the blob is that image's texture)."),
    backends: str = typer.Option(
        "sqlite,lmdb,files",
        "--backends",
        help="Comma-separated: sqlite, lmdb, files; sqlite-4k = SQLite with 4 KiB pages.",
    ),
    json_path: Path | None = typer.Option(None, "--json", help="Also write the results as JSON here."),
) -> None:
    """Measure the store's database against the alternatives: write, read (verified), concurrent read while
    another process writes, and bytes on disk."""
    from ..bench.store import run_store_bench

    run_store_bench(
        count=count, size=size, backends=[b for b in backends.split(",") if b], json_path=json_path, console=out
    )
