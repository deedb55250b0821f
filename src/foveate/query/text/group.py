"""Deprecated: moved to :mod:`foveate.channels.text.group` in 0.3 (encode-time channels have a package of their own).
This path keeps working until 0.4, with a warning."""

from ..._compat import moved_module
from ...channels.text import group as _new

moved_module(__name__, _new)
