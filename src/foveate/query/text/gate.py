"""Deprecated: moved to :mod:`foveate.channels.text.gate` in 0.3 (encode-time channels have a package of their own).
This path keeps working until 0.4, with a warning."""

from ..._compat import moved_module
from ...channels.text import gate as _new

moved_module(__name__, _new)
