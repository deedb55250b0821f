"""Qwen2-VL through transformers' own image processor, and a tiny random Qwen2-VL vision tower (built from a config,
no weights downloaded) run on the processor inputs of a plan: as many merged tokens as the rule bills."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import foveate
from foveate.vlm import build_request, get_rule, plan_for

from ..conftest import random_image


def test_transformers_qwen2vl_imports_without_torchvision():
    code = (
        "import sys, importlib.util\n"
        "from foveate.vlm import get_rule\n"
        "get_rule('qwen2-vl').tokens(100, 90)\n"
        "from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel\n"
        "from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig\n"
        "assert 'torchvision' not in sys.modules\n"
        "print(importlib.util.find_spec('torchvision') is None)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("True")  # torchvision is not installed here, and nothing needed it


@pytest.mark.parametrize("w, h", [(90, 100), (762, 1000), (30, 20), (2000, 1500), (600, 28)])
def test_rule_matches_the_processor_output(w, h):
    rule = get_rule("qwen2-vl")
    out = rule.inputs([random_image(h, w, 3)])
    t, gh, gw = (int(v) for v in out["image_grid_thw"][0])
    s = rule.sendings(w, h)[0]
    assert s.seen == (gw * 14, gh * 14)
    assert s.tokens == t * gh * gw // 4
    assert out["pixel_values"].shape == (t * gh * gw, 3 * 2 * 14 * 14)


def test_max_pixels_argument():
    small = get_rule("qwen2-vl:200704")  # 256 tokens at most
    assert small.tokens(2000, 2000) <= 256 < get_rule("qwen2-vl").tokens(2000, 2000)


def test_tiny_vision_tower_runs_on_a_plans_inputs(page_texture):
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

    sel = foveate.select(page_texture, "What is the total due?", budget=273)
    plan = plan_for(sel, "qwen2-vl")
    assert not plan.fallback and len(plan.pictures) > 1
    req = build_request(page_texture.image, sel, "qwen2-vl", plan=plan)
    grid = req.inputs["image_grid_thw"]
    assert [tuple(int(v) for v in g[1:] * 14)[::-1] for g in grid] == [p.seen for p in plan.pictures]
    torch.manual_seed(0)
    tower = Qwen2VisionTransformerPretrainedModel(
        Qwen2VLVisionConfig(depth=1, embed_dim=32, hidden_size=48, num_heads=2)
    ).eval()
    with torch.no_grad():
        out = tower(req.inputs["pixel_values"], grid_thw=grid)
    assert out.pooler_output.shape == (plan.tokens, 48)  # one merged token per billed token
    assert torch.isfinite(out.pooler_output).all()
    assert req.body["messages"][0]["content"][1] == {"type": "image"}
    assert len([c for c in req.body["messages"][0]["content"] if c["type"] == "image"]) == len(plan.pictures)
