"""``python -m foveate.cli``: the ``foveate`` command."""

from . import main

main()
