"""``foveate`` command line: thin commands over the library.

Errors a user can cause print as one line (``error: ...``) with exit code 1 and no traceback; usage errors
exit with 2.

One module per command group over a small shared helper (``common``: the app, the consoles, shared options and
input helpers): ``encode`` (encode, select, info), ``prompt`` (prompt), ``serve`` (serve), ``gateway``
(gateway), ``bench`` (bench, bench-prompt, bench-serve, bench-ray, bench-video), ``eval`` (eval, eval-video),
``train`` (train, synth), ``video`` (video), ``store`` (the ``store`` group) and ``prepare`` (a machine's one-time
setup).  Importing a command module registers its commands on the app; the order here is the order of ``foveate
--help``.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from ..core.errors import FoveateError
from . import bench, encode, eval, gateway, models, prepare, prompt, serve, store, train, video  # noqa: F401  (importing a command module registers it)
from .common import app, err


def main() -> None:
    """Console entry point: run the app, turning foveate errors into one-line messages."""
    from ..core.device import tune_allocator
    from .ray import ray_flag_argv

    tune_allocator()
    try:
        app(args=ray_flag_argv(sys.argv[1:]))
    except FoveateError as exc:
        fail(f"error: {exc}")
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except OSError as exc:  # writing outputs: disk full, permission denied, ...
        fail(f"error: {exc}")


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` as one line on stderr (never wrapped, whatever the terminal's width or a pipe's) and exit."""
    err.print(" ".join(message.split()), highlight=False, markup=False, soft_wrap=True)
    sys.exit(code)
