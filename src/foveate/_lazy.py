"""Lazy package attributes (PEP 562): a package names what it exports and the submodule each name lives in; the
submodule is imported the first time one of its names is read.  ``import foveate`` (or ``foveate.video``, ...)
therefore costs almost nothing, and torch, OpenCV, onnxruntime and scikit-image load when a name that needs them
is used.

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"select": ".selector", "Selection": ".selection"})

A name missing from the table that is a submodule of the package (``foveate.video.tiles``) is imported as well,
as an eager ``from .tiles import ...`` in ``__init__`` used to make it an attribute.  :func:`lazy_module` defers a
heavy third-party module (``cv2 = lazy_module("cv2")``) until a function first uses it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` exporting ``exports`` (name -> module, relative to the
    package when it starts with a dot)."""

    def __getattr__(name: str) -> Any:
        mod = exports.get(name)
        if mod is None:
            if name.startswith("__"):
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(mod, package), name)
        setattr(sys.modules[package], name, value)  # the next read is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__, sorted(exports)


class _LazyModule(ModuleType):
    """Stands for a module until an attribute is read, then imports it (under the import system's per-module lock,
    so threads racing for the first use all get the finished module) and takes its attributes."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_lazy_loaded"] = False

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self.__name__)
        if not self.__dict__["_lazy_loaded"]:
            self.__dict__.update({k: v for k, v in vars(module).items() if k != "__name__"})
            self.__dict__["_lazy_loaded"] = True
        return getattr(module, attr)


def lazy_module(name: str) -> ModuleType:
    """``name`` (e.g. ``"cv2"``) imported on its first attribute read; an already imported module is returned as it
    is.  ``cv2 = lazy_module("cv2")`` at the top of a module keeps ``cv2.resize(...)`` calls as they were."""
    return sys.modules.get(name) or _LazyModule(name)
