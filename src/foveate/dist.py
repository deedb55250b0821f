"""Deprecated: ``foveate.dist`` is :mod:`foveate.ray` (renamed in 0.3: tools take a folder named ``dist`` for build
output).  ``import foveate.dist`` and ``from foveate.dist.dataset import ...`` keep working until 0.4, with a
warning."""

from . import ray as _ray
from ._compat import alias_package

alias_package(__name__, _ray)
