"""A toy channel group: a checkerboard of level-0 tiles."""

from __future__ import annotations

import numpy as np

from foveate.channels.base import ChannelGroup, EncodeContext


def checker(ctx: EncodeContext) -> np.ndarray:
    gh, gw = ctx.grid
    board = (np.add.outer(np.arange(gh), np.arange(gw)) % 2).astype(np.float32)
    return board[..., None]


CHECKER = ChannelGroup("checker", ("checker",), checker, "free", "a checkerboard of level-0 tiles")
