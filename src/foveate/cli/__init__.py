"""``foveate`` command line: thin commands over the library.

Errors a user can cause print as one line (``error: ...``) with exit code 1 and no traceback; usage errors
exit with 2.  Any other exception (a bug) prints as one line too, ``error: unexpected ...``; ``FOVEATE_DEBUG=1``
shows its traceback.

One module per command group over a small shared helper (``common``: the app, the consoles, shared options and
input helpers): ``encode`` (encode, select, info), ``prompt`` (prompt), ``serve`` (serve), ``gateway``
(gateway), ``bench`` (bench, bench-prompt, bench-serve, bench-ray, bench-video), ``eval`` (eval, eval-video),
``train`` (train, synth), ``video`` (video), ``store`` (the ``store`` group) and ``prepare`` (a machine's one-time
setup).  Importing a command module registers its commands on the app; the order here is the order of ``foveate
--help``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import typer

from ..core.errors import FoveateError
from . import bench, encode, eval, gateway, models, prepare, prompt, serve, store, train, video  # noqa: F401  (importing a command module registers it)
from .common import app, err

# click's error classes, found through typer's public BadParameter (typer vendors its own click from 0.22 on)
_USAGE_ERROR: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
_CLICK_ERROR: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def main() -> None:
    """Console entry point: run the app, turning foveate errors into one-line messages."""
    from ..core.device import tune_allocator
    from .ray import ray_flag_argv

    tune_allocator()
    try:
        code = app(args=ray_flag_argv(sys.argv[1:]), standalone_mode=False)
    except _USAGE_ERROR as exc:  # a malformed option or argument: one line, and where to read more
        if type(exc).__name__ == "NoArgsIsHelpError":  # `foveate` or a group alone: its help
            exc.show()
            sys.exit(exc.exit_code)
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        fail(f"usage error: {exc.format_message()}{where}", exc.exit_code)
    except _CLICK_ERROR as exc:
        fail(f"error: {exc.format_message()}", exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        fail("interrupted", 130)
    except FoveateError as exc:
        fail(f"error: {exc}")
    except OSError as exc:  # writing outputs: disk full, permission denied, ...
        fail(f"error: {exc}")
    except Exception as exc:  # a case no message was written for (a bug): still one line; FOVEATE_DEBUG=1 raises
        if os.environ.get("FOVEATE_DEBUG"):
            raise
        fail(
            f"error: unexpected {type(exc).__name__}: {exc} (a bug in foveate, please report it; "
            "FOVEATE_DEBUG=1 shows where)"
        )
    if isinstance(code, int) and code:  # typer.Exit(code) from a command
        sys.exit(code)


def fail(message: str, code: int = 1) -> NoReturn:
    """Print ``message`` as one line on stderr (never wrapped, whatever the terminal's width or a pipe's) and exit."""
    err.print(" ".join(message.split()), highlight=False, markup=False, soft_wrap=True)
    sys.exit(code)
