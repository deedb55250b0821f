"""Old import paths kept for one release after a rename (each listed in the CHANGELOG): importing one warns with a
:class:`DeprecationWarning` naming the new path, and gives the new module itself, so classes, functions and module
state are shared, never copied.

* :func:`moved_module`: a module file left at the old path calls it with the new module, imported explicitly.
* :func:`alias_package`: a renamed package (``foveate.dist`` -> ``foveate.ray``): every submodule name under the old
  package resolves to the new package's submodule.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

#: the release that drops the old paths
REMOVED_IN = "0.4"


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is now {new}; the old path goes away in foveate {REMOVED_IN}", DeprecationWarning, stacklevel=3
    )


def moved_module(old: str, new: ModuleType) -> None:
    """Make the module being imported as ``old`` the module ``new`` (call it from the file left at the old path)."""
    _warn(old, new.__name__)
    sys.modules[old] = new


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``<old>.<sub>`` to the already importable ``<new>.<sub>``."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if not name.startswith(self.old + "."):
            return None
        target_name = self.new + name[len(self.old) :]
        if importlib.util.find_spec(target_name) is None:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.new + spec.name[len(self.old) :])

    def exec_module(self, module: ModuleType) -> None:
        """The module is the new one, already executed."""


def alias_package(old: str, new: ModuleType) -> None:
    """Make the package being imported as ``old`` the package ``new``, submodules included (call it from a module file
    left at the old path)."""
    _warn(old, new.__name__)
    if not any(isinstance(f, _Alias) and f.old == old for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias(old, new.__name__))  # before the path finder, which would load a copy
    sys.modules[old] = new
