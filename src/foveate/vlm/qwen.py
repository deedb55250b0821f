"""Deprecated: the Qwen2-VL rule is :mod:`foveate.vlm.rules.qwen` (one module per provider since 0.3).  This path
keeps working until 0.4, with a warning."""

from .._compat import moved_module
from .rules import qwen as _new

moved_module(__name__, _new)
