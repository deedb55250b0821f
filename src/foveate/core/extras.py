"""foveate's optional extras (``pip install 'foveate[serve]'``) and the one check every optional part makes: a command
or package that needs an extra that is not installed raises :class:`~foveate.core.errors.MissingExtraError`, a
one-line message naming the extra to install.  The core install (``pip install foveate``) is what encode, select and
prompt need."""

from __future__ import annotations

import importlib.util

from .errors import MissingExtraError

#: extra -> the modules it brings that foveate imports (pyproject.toml's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("fastapi", "uvicorn", "multipart", "httpx", "prometheus_client"),
    "ray": ("ray", "pyarrow"),
    "onnx": ("onnx", "onnxscript"),
    "plots": ("matplotlib",),
    "bench": ("lmdb",),
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a module set to None in sys.modules
        return False


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [m for m in EXTRAS[extra] if not _importable(m)]


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` when ``extra`` is not installed: ``what`` (``"foveate serve"``) needs it."""
    absent = missing(extra)
    if absent:
        raise MissingExtraError(
            f"{what} needs foveate's '{extra}' extra, which is not installed (no "
            f"{', '.join(absent)}): pip install 'foveate[{extra}]'"
        )
