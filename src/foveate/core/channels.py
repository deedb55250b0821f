"""Deprecated: the channel-group registry is :mod:`foveate.channels.registry` (moved in 0.3, with the built-in groups
in :mod:`foveate.channels`).  This path keeps working until 0.4, with a warning."""

from .._compat import moved_module
from ..channels import registry as _registry

moved_module(__name__, _registry)
