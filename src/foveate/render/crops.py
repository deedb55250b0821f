"""``crops/``: the pictures a VLM is sent for a selection, planned under that VLM's own token rule
(:mod:`foveate.vlm`): the page at a coarse scale for context plus crops at the scale their tokens were selected at,
never more tokens than the whole image as the provider takes it.  ``crops.json`` is the plan's ledger."""

from __future__ import annotations

import numpy as np

from ..selection import Selection
from ..vlm import Plan, VlmRule, cut_pictures, plan_for


def plan_crops(sel: Selection, rule: VlmRule | str = "openai", max_crops: int | None = None) -> Plan:
    """The plan of ``sel`` under ``rule``; ``max_crops``: at most that many pictures besides the context one."""
    return plan_for(sel, rule, max_pictures=None if max_crops is None else max_crops + 1)


def crop_images(image: np.ndarray, plan: Plan) -> list[tuple[str, np.ndarray]]:
    """``(file name, RGB array as sent)`` for every picture of a plan, in plan order: ``00-context.png``,
    ``01-crop.png``, ... (``00-image.png`` when the plan is the whole image)."""
    return [(f"{i:02d}-{p.kind}.png", arr) for i, (p, arr) in enumerate(zip(plan.pictures, cut_pictures(image, plan)))]
