"""A weights file is untrusted input: every malformed part is a ``WeightsError`` at load (issue 40 item 4: a mistyped
``text`` or ``meta`` section was an ``AttributeError``, ``floor: "junk"`` loaded and broke every select, NaN channel
weights were accepted), and a property test mutates the metadata of a real file at random."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import foveate
from foveate.core.errors import WeightsError
from foveate.weights import FloorGate, TextTerm, Weights
from foveate.weights.weights import FORMAT, FORMAT_VERSION


def _file(tmp_path: Path) -> Path:
    w = Weights.handset()
    return w.replace(floor=FloorGate({"bias": 0.5}), text=TextTerm(fill=0.25), meta={"note": "x"}).save(
        tmp_path / "w.safetensors"
    )


def _rewrite(path: Path, out: Path, change) -> Path:
    """``path`` with its foveate metadata changed by ``change(meta)`` (tensors as they were)."""
    data = path.read_bytes()
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8 : 8 + n])
    meta = json.loads(head["__metadata__"]["foveate"])
    meta = change(meta) or meta
    h = {**head, "__metadata__": {"foveate": json.dumps(meta)}}
    blob = json.dumps(h).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)
    out.write_bytes(len(blob).to_bytes(8, "little") + blob + data[8 + n :])
    return out


BAD = {
    "text is a string": lambda m: m.update(text="sharp"),
    "text is a list": lambda m: m.update(text=[1, 2]),
    "meta is a list": lambda m: m.update(meta=[1]),
    "meta.scorer is a string": lambda m: m.update(meta={"scorer": "x"}),
    "floor is a string": lambda m: m.update(floor="junk"),
    "floor is a list": lambda m: m.update(floor=[1, 2]),
    "a floor weight is NaN": lambda m: m.update(floor={"bias": float("nan")}),
    "a floor weight is a string": lambda m: m.update(floor={"bias": "1"}),
    "bias is a string": lambda m: m.update(bias="0"),
    "bias is infinite": lambda m: m.update(bias=float("inf")),
    "channels is a string": lambda m: m.update(channels="saliency"),
    "query_terms lists numbers": lambda m: m.update(query_terms=[1, 2, 3, 4]),
    "a prior of 10^9 levels": lambda m: m.update(level_prior_levels=10**9),
    "the ranker config is a list": lambda m: m["text"].update(ranker=[1]),
    "sharpness is zero": lambda m: m["text"].update(sharpness=0),
    "the metadata is a list": lambda m: [m],
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_metadata_is_a_weights_error(case, tmp_path):
    path = _rewrite(_file(tmp_path), tmp_path / "bad.safetensors", BAD[case])
    with pytest.raises(WeightsError):
        Weights.load(path)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_weights_are_refused(value, tmp_path):
    w = Weights.handset()
    w.channel["saliency"] = (value, 1.0)
    path = w.save(tmp_path / "nan.safetensors")
    with pytest.raises(WeightsError, match="non-finite"):
        Weights.load(path)


def test_a_bad_file_fails_at_the_edge_not_at_the_first_select(tmp_path, page_texture):
    """The CLI, the service and the predictor resolve weights once, at the start: a file whose floor was junk used to
    load and then make every select raise ValueError (HTTP 500)."""
    path = _rewrite(_file(tmp_path), tmp_path / "junk.safetensors", BAD["floor is a string"])
    with pytest.raises(WeightsError):
        foveate.FoveatePredictor(weights=str(path))
    with pytest.raises(WeightsError):
        foveate.select(page_texture, "total", weights=str(path))


META_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
KEYS = ["text", "meta", "floor", "bias", "need_floor", "channels", "query_terms", "level_prior_levels"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(KEYS + ["text.sharpness", "text.pad", "text.fill", "text.height", "text.ranker"]),
    value=META_VALUES,
)
def test_any_metadata_loads_or_is_a_weights_error(tmp_path_factory, key, value):
    """Whatever a hand edit puts in a metadata field: valid weights (every number finite) or a WeightsError."""
    tmp = tmp_path_factory.mktemp("w")
    path = _file(tmp)

    def change(m):
        if key.startswith("text."):
            m["text"][key.split(".", 1)[1]] = value
        else:
            m[key] = value

    bad = _rewrite(path, tmp / "mutated.safetensors", change)
    try:
        w = Weights.load(bad)
    except WeightsError:
        return
    assert all(math.isfinite(v) for pair in w.channel.values() for v in pair)
    assert math.isfinite(w.bias) and math.isfinite(w.need_floor)
    assert w.floor is None or all(math.isfinite(v) for v in w.floor.weights.values())
    assert 0.0 <= w.text.fill <= 1.0 and w.text.sharpness > 0
    scorer = foveate.Scorer.from_weights(w, ("saliency", "text"))
    assert torch.isfinite(scorer.weight).all()


def test_the_format_marker_is_checked_first(tmp_path):
    path = _rewrite(_file(tmp_path), tmp_path / "other.safetensors", lambda m: m.update(format="other"))
    with pytest.raises(WeightsError, match=FORMAT):
        Weights.load(path)
    path = _rewrite(_file(tmp_path), tmp_path / "v9.safetensors", lambda m: m.update(format_version=9))
    with pytest.raises(WeightsError, match=str(FORMAT_VERSION)):
        Weights.load(path)


def _trained_file(tmp_path: Path) -> Path:
    from foveate.weights import load_weights

    return load_weights("default").save(tmp_path / "trained.safetensors")


def test_learned_parameters_must_be_finite(tmp_path):
    """The ranker's and extent model's tensors were loaded unchecked: a NaN selected from NaN scores."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    path = _trained_file(tmp_path)
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    for prefix in ("ranker.", "extent."):
        tensors = load_file(str(path))
        key = next(k for k in tensors if k.startswith(prefix) and tensors[k].is_floating_point())
        tensors[key] = tensors[key].clone()
        tensors[key].view(-1)[0] = float("inf")
        bad = tmp_path / f"bad-{prefix}safetensors"
        save_file(tensors, str(bad), metadata=meta)
        with pytest.raises(WeightsError, match="not finite"):
            Weights.load(bad)


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda r: r.update(hidden=10**9), "hidden"),
        (lambda r: r.update(intent_dim=0), "intent_dim"),
        (lambda r: r.update(members=10**6), "members"),
    ],
)
def test_network_sizes_are_bounded_before_anything_is_allocated(tmp_path, change, needle):
    path = _trained_file(tmp_path)
    bad = _rewrite(path, tmp_path / "big.safetensors", lambda m: change(m["text"]["ranker"]))
    with pytest.raises(WeightsError, match=needle):
        Weights.load(bad)


def test_a_failed_save_leaves_no_partial_file(tmp_path, monkeypatch):
    import safetensors.torch

    def broken(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(safetensors.torch, "save_file", broken)
    with pytest.raises(OSError):
        Weights.handset().save(tmp_path / "w.safetensors")
    assert list(tmp_path.iterdir()) == []
