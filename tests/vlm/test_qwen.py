"""Qwen2-VL through transformers' own image processor, and a tiny random Qwen2-VL vision tower (built from a config,
no weights downloaded) run on the processor inputs of a plan: as many merged tokens as the rule bills."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
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


#: the checkpoints' own preprocessor_config.json (huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct and
#: huggingface.co/Qwen/Qwen3-VL-8B-Instruct, read 2026-11-27), loaded through transformers' AutoImageProcessor
CHECKPOINT_CONFIGS = {
    "qwen2.5-vl": (
        "qwen2_5_vl",
        {
            "min_pixels": 3136,
            "max_pixels": 12845056,
            "patch_size": 14,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711],
            "image_processor_type": "Qwen2VLImageProcessor",
            "processor_class": "Qwen2_5_VLProcessor",
        },
    ),
    "qwen3-vl": (
        "qwen3_vl",
        {
            "size": {"longest_edge": 16777216, "shortest_edge": 65536},
            "patch_size": 16,
            "temporal_patch_size": 2,
            "merge_size": 2,
            "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5],
            "image_processor_type": "Qwen2VLImageProcessorFast",
            "processor_class": "Qwen3VLProcessor",
        },
    ),
}


@pytest.mark.parametrize("family", sorted(CHECKPOINT_CONFIGS))
def test_qwen_successors_match_the_checkpoints_processor(family, tmp_path):
    """Qwen2.5-VL (28-px tokens) and Qwen3-VL (32-px tokens): the rule's tokens and seen size equal what
    transformers' processor, loaded from the checkpoint's own config, computes on real pictures of random sizes."""
    import json

    from transformers import AutoImageProcessor

    model_type, config = CHECKPOINT_CONFIGS[family]
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    reference = AutoImageProcessor.from_pretrained(tmp_path, backend="pil")
    rule, patch = get_rule(family), config["patch_size"]
    rng = np.random.default_rng(7)
    sizes = [(int(w), int(h)) for w, h in rng.integers(8, 2600, (24, 2))] + [(4500, 3000), (28, 28), (3000, 40)]
    for w, h in sizes:
        grid = reference(images=[random_image(h, w, 3)], return_tensors="np")["image_grid_thw"][0]
        t, gh, gw = (int(v) for v in grid)
        s = rule.sendings(w, h)[0]
        assert (s.tokens, s.seen) == (t * gh * gw // 4, (gw * patch, gh * patch)), (family, w, h)
