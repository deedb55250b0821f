"""The weights artifact: round trip, typed errors for bad files, and the hand-set weights unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from foveate import select
from foveate.core.errors import WeightsError
from foveate.query.scorer import DEFAULT_WEIGHTS, Scorer
from foveate.weights import FORMAT_VERSION, FloorGate, TextTerm, Weights, load_weights


def _learned_like() -> Weights:
    """Weights with every part a file holds: a ranker, an extent model, a level prior and a floor gate (random but
    fixed)."""
    from foveate.query.text.extent import AnswerExtent
    from foveate.query.text.ranker import AnswerRanker

    torch.manual_seed(0)
    ranker = AnswerRanker(kind_embeddings=np.random.default_rng(0).normal(size=(10, 384)).astype(np.float32))
    ranker.eval()
    extent = AnswerExtent()
    with torch.no_grad():
        extent.linear.weight.normal_(0.0, 0.5)
        extent.mean.normal_()
    w = Weights.handset()
    return Weights(
        "test",
        {**w.channel, "saliency": (0.1, 0.7)},
        w.need,
        {**w.query, "text": 12.0},
        w.query_need,
        level_prior=(0.0, 0.5, 0.25, -0.5, 0.0),
        text=TextTerm(ranker, extent.eval(), fill=0.25, height=0.6),
        floor=FloorGate({"bias": 0.5, "log_scale": -1.0}),
        meta={"note": "test"},
    )


def test_round_trip_gives_the_same_selections(tmp_path, page_texture):
    w = _learned_like()
    path = w.save(tmp_path / "w.safetensors")
    back = Weights.load(path)
    for k in set(w.channel) | set(back.channel):  # a file lists every channel with a weight or a need
        assert back.channel.get(k) == pytest.approx(w.channel.get(k, (0.0, 0.0)))
    assert back.query["text"] == pytest.approx(12.0) and back.level_prior == pytest.approx(w.level_prior)
    assert back.floor == w.floor and back.meta == {"note": "test"} and back.text.fill == 0.25
    assert back.text.height == 0.6 and Scorer.from_weights(back, page_texture.channels).text.height == 0.6
    rows = np.random.default_rng(1).normal(size=(20, len(w.text.extent.columns))).astype(np.float32)
    np.testing.assert_array_equal(back.text.extent.probabilities(rows), w.text.extent.probabilities(rows))
    assert Scorer.from_weights(back, page_texture.channels).text.extent is back.text.extent
    for q in ("What is the total due?", None, {"points": [(300, 200)]}):
        a, b = select(page_texture, q, 144, weights=w), select(page_texture, q, 144, weights=back)
        np.testing.assert_array_equal(a.boxes, b.boxes)
        assert a.layout == b.layout


def test_an_ensemble_of_rankers_round_trips(tmp_path, page_texture):

    from foveate.query.text.layout import text_index
    from foveate.query.text.ranker import AnswerRanker, RankerEnsemble

    kinds = np.random.default_rng(0).normal(size=(10, 384)).astype(np.float32)
    members = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        members.append(AnswerRanker(kind_embeddings=kinds).eval())
    w = _learned_like().replace(text_ranker=RankerEnsemble(members).eval())
    back = Weights.load(w.save(tmp_path / "ens.safetensors"))
    assert isinstance(back.text.ranker, RankerEnsemble) and len(back.text.ranker.members) == 2
    index = text_index(page_texture)
    q = "What is the total due?"
    np.testing.assert_array_equal(back.text.ranker.probabilities(index, q), w.text.ranker.probabilities(index, q))
    a, b = select(page_texture, q, 144, weights=w), select(page_texture, q, 144, weights=back)
    np.testing.assert_array_equal(a.boxes, b.boxes)


def test_a_file_without_a_fill_paints_as_before(tmp_path, page_texture):
    """Files written before the fill existed name none: they load with TEXT_FILL (0), every touched tile at full value
    (and without a text height, with TEXT_HEIGHT; without an extent model, painting the lines alone)."""

    from safetensors.torch import save_file

    from foveate.query.scorer import TEXT_FILL, TEXT_HEIGHT

    tensors, meta = _learned_like().to_tensors()
    del meta["text"]["fill"], meta["text"]["height"], meta["text"]["extent"]
    tensors = {k: v for k, v in tensors.items() if not k.startswith("extent.")}
    save_file(tensors, str(tmp_path / "old.safetensors"), metadata={"foveate": json.dumps(meta)})
    old = Weights.load(tmp_path / "old.safetensors")
    assert old.text.fill == TEXT_FILL == 0.0 and old.text.height == TEXT_HEIGHT and old.text.extent is None
    zero = _learned_like().replace(text_fill=0.0, text_extent=None)
    q = "What is the total due?"
    np.testing.assert_array_equal(
        select(page_texture, q, 144, weights=old).boxes, select(page_texture, q, 144, weights=zero).boxes
    )


def test_handset_is_todays_scorer(page_texture):
    hs = load_weights("handset")
    assert hs.text.ranker is None and hs.floor is None and hs.channel["saliency"] == DEFAULT_WEIGHTS["saliency"]
    explicit = Scorer(page_texture.channels)
    for q in ("total due", None):
        a = select(page_texture, q, 100, weights="handset")
        b = select(page_texture, q, 100, scorer=explicit)
        np.testing.assert_array_equal(a.boxes, b.boxes)


def test_bad_files_are_typed_errors(tmp_path):
    from safetensors.torch import save_file

    with pytest.raises(WeightsError, match="no weights file"):
        load_weights(tmp_path / "missing.safetensors")
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x00" * 100)
    with pytest.raises(WeightsError, match="not a readable weights file"):
        load_weights(junk)
    other = tmp_path / "other.safetensors"
    save_file({"x": torch.zeros(2)}, str(other))
    with pytest.raises(WeightsError, match="not foveate weights"):
        load_weights(other)
    good = _learned_like().save(tmp_path / "good.safetensors")
    data = good.read_bytes()
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8 : 8 + n])
    meta = json.loads(head["__metadata__"]["foveate"])

    def rewritten(name: str, change) -> Path:
        m = json.loads(json.dumps(meta))
        change(m)
        h = {**head, "__metadata__": {"foveate": json.dumps(m)}}
        blob = json.dumps(h).encode()
        blob += b" " * ((8 - len(blob) % 8) % 8)
        out = tmp_path / name
        out.write_bytes(len(blob).to_bytes(8, "little") + blob + data[8 + n :])
        return out

    with pytest.raises(WeightsError, match="format version"):
        load_weights(rewritten("newer.safetensors", lambda m: m.update(format_version=FORMAT_VERSION + 1)))
    for bad in (-0.5, 1.5, float("nan")):  # a hand-edited fill outside [0, 1]
        with pytest.raises(WeightsError, match="fill"):
            load_weights(rewritten(f"fill{bad}.safetensors", lambda m, bad=bad: m["text"].update(fill=bad)))
    for bad in (0.0, -1.0, 5.0, float("nan")):  # a hand-edited print height per OCR box height
        with pytest.raises(WeightsError, match="height"):
            load_weights(rewritten(f"height{bad}.safetensors", lambda m, bad=bad: m["text"].update(height=bad)))
    with pytest.raises(WeightsError, match="columns"):  # an extent model of other features
        load_weights(rewritten("extent.safetensors", lambda m: m["text"]["extent"].update(columns=["a", "b"])))
    with pytest.raises(WeightsError, match="does not compute"):  # a ranker that reads a feature not computed here
        load_weights(
            rewritten(
                "ranker.safetensors",
                lambda m: m["text"]["ranker"].update(columns=m["text"]["ranker"]["columns"] + ["no such feature"]),
            )
        )
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(WeightsError):
        load_weights(truncated)


def test_default_weights_load_and_describe_themselves():
    w = load_weights(None)
    assert load_weights("default") is w
    if w.name == "handset":
        pytest.skip("the package ships no trained weights")
    assert w.text.ranker is not None and w.floor is not None
    meta = w.meta
    assert {"seed", "datasets", "split", "objective", "validation_hit", "foveate_version"} <= set(meta)
    assert meta["split"]["images"]["val"] > 0
    # a channel training dropped as constant (motion, zero on still images) keeps its hand-set weight after loading
    for name in meta["scorer"].get("constant_channels", []):
        assert name not in w.channel
        sc = Scorer.from_weights(w, ("saliency", name))
        assert sc.weight[1].item() == DEFAULT_WEIGHTS[name][0] and sc.weight[3].item() == DEFAULT_WEIGHTS[name][1]
