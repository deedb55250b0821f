"""Counts and scales in words (``1 picture``, ``x0.86``) and tables a terminal shows whole: a table where it fits
the console's width, else the table without its optional columns, else a narrow layout (one block per row: its first
cell, then its ``column: value`` pairs, wrapped).  Used by the CLI's tables (``info``, ``select``, ``prompt``,
``eval``, ``video``)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table


def _table(title: str | None, header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str]) -> Table:
    t = Table(title=title, box=None, title_justify="left", pad_edge=False)
    for h in header:
        t.add_column(h, justify="right" if h in right else "left", no_wrap=True)
    for r in rows:
        t.add_row(*r)
    return t


def print_table(
    console: Console,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    optional: Sequence[str] = (),
    right: Sequence[str] = (),
) -> str:
    """Print ``rows`` under ``header`` on ``console`` in the widest layout that fits its width: the whole table, the
    table without the ``optional`` columns, or the narrow layout.  ``right``: columns aligned right.  Returns the
    layout used: ``"wide"``, ``"compact"`` or ``"narrow"``."""
    width = console.width
    unbounded = console.options.update(max_width=100_000)
    table = _table(title, header, rows, right)
    if Measurement.get(console, unbounded, table).maximum <= width:
        console.print(table)
        return "wide"
    if optional:
        keep = [i for i, h in enumerate(header) if h not in optional]
        compact = _table(title, [header[i] for i in keep], [[r[i] for i in keep] for r in rows], right)
        if Measurement.get(console, unbounded, compact).maximum <= width:
            console.print(compact)
            return "compact"
    if title:
        console.print(title, highlight=False, markup=False)
    for r in rows:
        console.print(f"{header[0]} {r[0]}" if r[0] else header[0], style="bold", highlight=False, markup=False)
        # each "column: value" kept whole on a line (non-breaking spaces while wrapping), pairs joined by "; "
        pairs = [f"{h}: {v}".replace(" ", "\xa0") + ";" for h, v in zip(header[1:], r[1:]) if v != ""]
        for line in textwrap.wrap(
            " ".join(pairs)[:-1], width=max(width, 20), initial_indent="  ", subsequent_indent="  "
        ):
            console.print(line.replace("\xa0", " "), highlight=False, markup=False, soft_wrap=True)
    return "narrow"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 picture``, ``2 pictures``, ``0 pictures`` (``nouns``: an irregular plural)."""
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


def scale_text(scale: float) -> str:
    """A resize factor as a person reads it: ``x0.86`` (shrunk to 0.86), ``x1`` (as it is), ``x2`` (enlarged):
    always the factor the picture is multiplied by, two decimals at most."""
    return f"x{scale:.2f}".rstrip("0").rstrip(".")
