"""Semantic channels with a tiny, randomly initialised CLIP built from a config (no weights exist here):
shapes, the PCA's claimed variance, the cosine in PCA space, and one image-tower pass per image however
many queries follow.  Without a configured model the group is absent and nothing pretends otherwise."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import foveate
from foveate.core.errors import ConfigError
from foveate.query import semantic as S


def _byte_alphabet() -> list[str]:
    """GPT-2 / CLIP byte-to-unicode alphabet (256 printable characters)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


@pytest.fixture(scope="session")
def tiny_clip_dir(tmp_path_factory):
    from transformers import CLIPConfig, CLIPModel, CLIPTokenizer

    chars = _byte_alphabet()
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": 256 + i for i, c in enumerate(chars)})
    vocab.update({"<|startoftext|>": 512, "<|endoftext|>": 513})
    tok = CLIPTokenizer(vocab=vocab, merges=[])
    torch.manual_seed(0)
    cfg = CLIPConfig(
        text_config=dict(
            vocab_size=514,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
            eos_token_id=513,
            bos_token_id=512,
            pad_token_id=513,
        ),
        vision_config=dict(
            image_size=32,
            patch_size=8,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
        ),
        projection_dim=24,
    )
    path = tmp_path_factory.mktemp("tiny-clip")
    CLIPModel(cfg).eval().save_pretrained(path)
    tok.save_pretrained(path)
    (path / "preprocessor_config.json").write_text(
        json.dumps({"image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25]})
    )
    return path


@pytest.fixture()
def image():
    rng = np.random.default_rng(3)
    img = np.full((120, 200, 3), 240, np.uint8)
    img[20:70, 30:90] = (200, 40, 40)
    img[60:110, 120:190] = rng.integers(0, 255, (50, 70, 3), dtype=np.uint8)
    return img


GROUPS = ("rgb", "saliency", "semantic")


def test_semantic_channels_shapes_and_stored_basis(tiny_clip_dir, image, tmp_path):
    tex = foveate.encode(image, groups=GROUPS, options={"semantic_model": str(tiny_clip_dir)}, device="cpu")
    assert "semantic" not in tex.absent
    a, b = tex.groups["semantic"]
    assert b - a == 16 and tex.channels[a:b] == tuple(f"sem{i:02d}" for i in range(16))
    meta = tex.extras["semantic"]
    assert meta["dim"] == 24 and meta["patch_grid"] == [5, 8]  # longer side 2 x 32 px, in 8 px patches
    assert tex.tensors["semantic_basis"].shape == (24, 16) and tex.tensors["semantic_mean"].shape == (24,)
    assert 0.0 < meta["explained_variance"] <= 1.0
    ch = tex.mean[0][..., a:b].float()
    assert float(ch.min()) >= 0.0 and float(ch.max()) <= 1.0
    loaded = foveate.Texture.load(tex.save(tmp_path / "s.fvt"))
    q = "a red square"
    np.testing.assert_array_equal(foveate.select(tex, q, cut=False).boxes, foveate.select(loaded, q, cut=False).boxes)
    sel = foveate.select(tex, q, cut=False, explain=True)
    assert "query:semantic" in sel.explain


def test_pca_keeps_the_variance_it_claims():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(500, 6)) @ rng.normal(size=(6, 40)) * 3 + rng.normal(size=(500, 40)) * 0.5 + 7.0
    pca = S.fit_pca(x, k=16)
    xc = x - x.mean(0)
    recon = (xc @ pca.basis) @ pca.basis.T
    kept = 1.0 - ((xc - recon) ** 2).sum() / (xc**2).sum()
    assert kept == pytest.approx(pca.explained, abs=1e-5)
    evals = np.linalg.eigvalsh(np.cov(xc.T))[::-1]  # independent reference: the covariance spectrum
    assert pca.explained == pytest.approx(evals[:16].sum() / evals.sum(), abs=1e-5)
    np.testing.assert_allclose(pca.basis.T @ pca.basis, np.eye(16), atol=1e-5)
    small = S.fit_pca(rng.normal(size=(5, 8)), k=16)  # fewer rows than components: padded, keeps everything
    assert small.basis.shape == (8, 16) and small.explained == pytest.approx(1.0)


def test_cosine_in_pca_space_equals_the_reconstructed_cosine():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 24)) + 2.0
    pca = S.fit_pca(x)
    coef = (x - pca.mean) @ pca.basis
    t = rng.normal(size=24)
    t /= np.linalg.norm(t)
    recon = pca.mean + coef @ pca.basis.T
    ref = recon @ t / np.linalg.norm(recon, axis=1)
    np.testing.assert_allclose(S.cosine_map(coef, pca.mean, pca.basis, t), ref, atol=1e-4)


def test_image_tower_runs_once_per_image_however_many_queries(tiny_clip_dir, image):
    enc = S.load_encoder("clip", str(tiny_clip_dir))
    calls = {"vision": 0, "text": 0}
    hooks = [
        enc.model.vision_model.register_forward_hook(lambda *a: calls.__setitem__("vision", calls["vision"] + 1)),
        enc.model.text_model.register_forward_hook(lambda *a: calls.__setitem__("text", calls["text"] + 1)),
    ]
    try:
        S._text_embedding.cache_clear()
        p = foveate.FoveatePredictor(groups=GROUPS, options={"semantic_model": str(tiny_clip_dir)}, device="cpu")
        p.set_image(image)
        queries = ["a red square", "noise", "the top left corner", "a red square", "noise"]
        for q in queries:
            p.select(q, budget=40)
        assert calls["vision"] == 1
        assert calls["text"] == len(set(queries))  # one text-tower pass per distinct query (LRU cache)
    finally:
        for h in hooks:
            h.remove()


def test_absent_without_a_configured_model(image, monkeypatch):
    monkeypatch.delenv(S.ENV_MODEL, raising=False)
    tex = foveate.encode(image, groups=GROUPS, device="cpu")
    assert "semantic" in tex.absent and "semantic" not in tex.extras
    assert S.semantic_query_map(tex, foveate.Query(text="a red square"), []) is None
    sel = foveate.select(tex, "a cat on the sofa", cut=False)
    assert any("not used" in n for n in sel.notes)  # the query text is unused, and the selection says so


def test_environment_variable_and_bad_model(tiny_clip_dir, image, monkeypatch, tmp_path):
    monkeypatch.setenv(S.ENV_MODEL, str(tiny_clip_dir))
    tex = foveate.encode(image, groups=GROUPS, device="cpu")
    assert "semantic" not in tex.absent and tex.extras["semantic"]["model"] == str(tiny_clip_dir)
    with pytest.raises(ConfigError, match="nothing is downloaded"):
        foveate.encode(image, groups=GROUPS, options={"semantic_model": str(tmp_path / "missing")}, device="cpu")
    with pytest.raises(ConfigError, match="unknown semantic encoder"):
        foveate.encode(image, groups=GROUPS, options={"semantic_encoder": "sam"}, device="cpu")
