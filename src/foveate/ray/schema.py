"""The rows of a dataset: the schemas of a textures and of a selections dataset, and the check that a part holds
the columns a reader asks for, of their types (a part written by something else, or damaged, is a
:class:`DatasetError` saying so, never a ``KeyError`` later).  Needs only pyarrow, imported when used."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..core.errors import DatasetError, FoveateError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

TEXTURE_COLUMNS = ("id", "source", "width", "height", "preset", "texture", "texture_size", "encode_ms", "error")
EXTRA_HINT = "install the optional extra: pip install 'foveate[ray]'"


def require_pyarrow():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise FoveateError(f"texture datasets need pyarrow: {EXTRA_HINT}") from exc
    return pyarrow


def texture_schema() -> pa.Schema:
    pa = require_pyarrow()
    return pa.schema(
        [
            ("id", pa.string()),
            ("source", pa.string()),
            ("width", pa.int32()),
            ("height", pa.int32()),
            ("preset", pa.string()),
            ("texture", pa.binary()),
            ("texture_size", pa.int64()),
            ("encode_ms", pa.float64()),
            ("error", pa.string()),
        ]
    )


def selection_schema() -> pa.Schema:
    pa = require_pyarrow()
    return pa.schema(
        [
            ("qid", pa.int64()),
            ("id", pa.string()),
            ("source", pa.string()),
            ("query", pa.string()),
            ("budget", pa.int32()),
            ("mode", pa.string()),
            ("num_tokens", pa.int32()),
            ("selection", pa.string()),
            ("vlm", pa.string()),
            ("select_ms", pa.float64()),
            ("error", pa.string()),
        ]
    )


def check_columns(path: str, schema: pa.Schema, columns: Iterable[str]) -> None:
    """Every one of ``columns`` in ``schema``, of the type the dataset's schemas give it (or all null)."""
    pa = require_pyarrow()
    expected = {f.name: f.type for f in (*texture_schema(), *selection_schema())}
    for name in columns:
        if name not in schema.names:
            raise DatasetError(
                f"part {path} has no column {name} (it has {', '.join(schema.names) or 'none'}): not a part of a "
                "foveate dataset; move it away, or write the dataset again"
            )
        want, got = expected.get(name), schema.field(name).type
        if want is None or got == want or pa.types.is_null(got):
            continue
        alike = (
            (pa.types.is_string(want) and pa.types.is_large_string(got))
            or (pa.types.is_binary(want) and pa.types.is_large_binary(got))
            or (pa.types.is_integer(want) and pa.types.is_integer(got))
            or (pa.types.is_floating(want) and pa.types.is_floating(got))
        )
        if not alike:
            raise DatasetError(
                f"part {path}: column {name} holds {got}, not {want}: not a part of a foveate dataset; move it away, "
                "or write the dataset again"
            )


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {list: "an array", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (pyarrow's may span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
