"""``foveate train`` end to end on a tiny synthetic set (real OCR, real MiniLM): the learned weights must beat the
hand-set ones on the run's own validation split -- a real assertion that fails when training is broken."""

from __future__ import annotations

import json

import numpy as np
import pytest

from foveate.eval.data import split_of
from foveate.synth import make_dataset
from foveate.synth.documents import GENERATED_MARK
from foveate.train import TrainConfig, train
from foveate.train.data import resolve_sources
from foveate.weights import Weights


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    data = make_dataset(root / "receipts", 14, kinds=("receipt",), seed=7)
    cfg = TrainConfig(
        (str(data),), root / "w.safetensors", cache=root / "cache", seed=0, budgets=(64, 144), epochs=6, workers=2
    )
    return cfg, train(cfg, log=lambda m: None)


@pytest.mark.slow
def test_learned_beats_handset_on_its_validation_split(tiny_run):
    cfg, res = tiny_run
    table = res.report["validation_hit"]["all"]
    learned = np.mean([table[b]["learned"] for b in cfg.budgets])
    handset = np.mean([table[b]["handset"] for b in cfg.budgets])
    assert learned > handset + 10.0, table
    assert all(table[b]["n"] > 0 for b in cfg.budgets)


@pytest.mark.slow
def test_the_weights_file_records_how_it_was_made(tiny_run):
    cfg, res = tiny_run
    w = Weights.load(res.path)
    assert w.text.ranker is not None and w.floor is not None and len(w.level_prior) == 10
    meta = w.meta
    assert meta["seed"] == 0 and meta["split"]["seed"] == 0 and "Poisson" in meta["objective"]
    assert meta["validation_hit"] == json.loads(json.dumps(res.report["validation_hit"]))
    # the extent model: fitted on the training pages' (answer line, neighbour) pairs, better than their base rate
    ext = meta["extent"]
    assert w.text.extent is not None and ext["pairs"] > 0 and 0.0 < ext["positive"] < 1.0
    assert ext["log_loss"] < ext["log_loss_constant"]
    from foveate.core.config import EncodeConfig
    from foveate.train.data import by_split, load_pages, resolve_sources
    from foveate.train.extent import extent_examples

    pages, _ = load_pages(resolve_sources(list(cfg.sources), cfg.cache, cfg.seed), cfg.cache, EncodeConfig(), cfg.seed)
    rows, labels = extent_examples(by_split(pages, "val"))  # images it never saw: still better than the base rate
    q = np.clip(w.text.extent.probabilities(rows), 1e-7, 1 - 1e-7)
    rate = float(np.clip(ext["positive"], 1e-7, 1 - 1e-7))
    assert len(labels) and labels.any()
    assert -np.mean(labels * np.log(q) + (1 - labels) * np.log(1 - q)) < -np.mean(
        labels * np.log(rate) + (1 - labels) * np.log(1 - rate)
    )
    # the split is by image: every question of an image is on one side
    lines = [json.loads(x) for x in (cfg.output.parent / "receipts" / "queries.jsonl").read_text().splitlines()]
    images = {x["image"] for x in lines}
    assert sum(meta["split"]["images"].values()) == len(images)
    assert meta["split"]["images"]["train"] == sum(split_of("receipts", im, 0) == "train" for im in images)


@pytest.mark.slow
def test_the_floor_gate_is_calibrated_on_the_weights_it_ships_with(tiny_run):
    """Fitting the gate again on the training split, from records the saved file scores itself (its prompt term's
    hand-set weight included, not the fitted one the run reports), gives the saved gate exactly."""
    from foveate.core.config import EncodeConfig
    from foveate.train.data import by_split, load_pages
    from foveate.train.evaluate import records
    from foveate.train.floor import choose_gate

    cfg, res = tiny_run
    w = Weights.load(res.path)
    assert w.meta["scorer"]["fitted_prompt_weight"] != w.query["prompt"]  # the gate would see a different term
    folders = resolve_sources(list(cfg.sources), cfg.cache, cfg.seed)
    pages, _ = load_pages(folders, cfg.cache, EncodeConfig(), cfg.seed, None, cfg.prompts)
    recs = records(
        by_split(pages, "train"),
        {"learned": w.replace(floor=None)},
        cfg.budgets,
        floor="off",
        gate_features=True,
        workers=1,
    )
    gate, report = choose_gate(recs, "learned", seed=cfg.seed)
    assert report["chosen"] == w.meta["floor"]["chosen"]
    assert gate == dict(w.floor.weights)


@pytest.mark.slow
def test_training_is_deterministic_for_a_seed(tiny_run, tmp_path):
    """... and does not depend on the number of worker processes (the tiny run forks 2, this one runs in one)."""
    cfg, res = tiny_run
    again = train(
        TrainConfig(
            cfg.sources,
            tmp_path / "again.safetensors",
            cache=cfg.cache,
            seed=0,
            budgets=cfg.budgets,
            epochs=cfg.epochs,
            evaluate_test=False,
            workers=1,
        ),
        log=lambda m: None,
    )
    a, b = res.weights, again.weights
    assert a.channel == b.channel and a.query == b.query and a.floor == b.floor
    assert a.text.sharpness == b.text.sharpness and a.text.fill == b.text.fill and a.level_prior == b.level_prior
    assert again.report["validation_hit"] == res.report["validation_hit"]
    sa, sb = a.text.ranker.state_dict(), b.text.ranker.state_dict()
    assert all(np.array_equal(sa[k].numpy(), sb[k].numpy()) for k in sa)


def test_bad_sources_are_clear_errors(tmp_path):
    from foveate.core.errors import DatasetError

    with pytest.raises(DatasetError, match="queries.jsonl"):
        train(TrainConfig((str(tmp_path),), tmp_path / "w.safetensors", cache=tmp_path / "c"), log=lambda m: None)
    with pytest.raises(DatasetError, match="synth:N"):
        train(TrainConfig(("synth:many",), tmp_path / "w.safetensors", cache=tmp_path / "c"), log=lambda m: None)
    for bad in ("synth:2:poem", "synth:2:", "synth:2:form,poem"):
        with pytest.raises(DatasetError, match="kinds must be among"):
            resolve_sources([bad], tmp_path / "c", 0)


def test_generated_sources_name_their_kinds_and_are_redrawn_when_the_generator_changed(tmp_path):
    default, forms = resolve_sources(["synth:3", "synth:2:form"], tmp_path, 0)
    assert default.name == "synth-s0-n3" and forms.name == "synth-s0-n2-form"  # the default's name: the split's
    assert {json.loads(x)["kind"] for x in (forms / "queries.jsonl").read_text().splitlines()} == {"form"}
    mark = forms / GENERATED_MARK
    old = json.loads(mark.read_text())
    mark.write_text(json.dumps({**old, "version": old["version"] - 1}))  # drawn by an older generator
    (forms / "queries.jsonl").write_text("stale\n")
    resolve_sources(["synth:2:form"], tmp_path, 0)
    assert json.loads(mark.read_text()) == old and "stale" not in (forms / "queries.jsonl").read_text()
    mark.write_text("{not json")  # a mark cut short: drawn again, not a crash
    (forms / "queries.jsonl").write_text("stale\n")
    resolve_sources(["synth:2:form"], tmp_path, 0)
    assert json.loads(mark.read_text()) == old and "stale" not in (forms / "queries.jsonl").read_text()


@pytest.mark.slow
def test_several_rankers_are_averaged(tiny_run, tmp_path):
    """``--rankers 2``: two rankers from consecutive seeds, each its own; the file keeps both and loads them back."""
    from foveate.core.config import EncodeConfig
    from foveate.query.text.ranker import RankerEnsemble
    from foveate.train.data import by_split, load_pages, resolve_sources
    from foveate.train.ranker import fit_rankers

    cfg, _ = tiny_run
    pages, _ = load_pages(
        resolve_sources(list(cfg.sources), cfg.cache, 0), cfg.cache, EncodeConfig(preset=cfg.preset), 0
    )
    ens, report = fit_rankers(by_split(pages, "train"), seed=0, members=2, max_epochs=2, log=lambda *_: None)
    assert isinstance(ens, RankerEnsemble) and [m["seed"] for m in report["members"]] == [0, 1]
    a, b = (m.state_dict() for m in ens.members)
    assert not np.array_equal(a["layer.weight"].numpy(), b["layer.weight"].numpy())

    w = Weights.load(cfg.output).replace(text_ranker=ens)
    back = Weights.load(w.save(tmp_path / "two.safetensors"))
    assert isinstance(back.text.ranker, RankerEnsemble) and back.text.ranker.config()["members"] == 2


@pytest.mark.slow
def test_the_text_term_is_judged_on_maps_of_a_ranker_that_never_saw_the_page(tiny_run):
    """The text term's constants are chosen on training pages, each painted by the cross-fitting ranker of the
    *other* half (:func:`cross_fit_records`): the same records, page by page, as scoring each half with that ranker
    by hand -- and not those of the final ranker, which trained on every one of them."""

    import torch

    from foveate.core.config import EncodeConfig
    from foveate.query.text.ranker import AnswerRanker
    from foveate.train.data import by_split, load_pages
    from foveate.train.evaluate import records
    from foveate.train.text_term import _cross_fit_halves, cross_fit_records

    cfg, res = tiny_run
    assert res.report["scorer"]["text_term_search"]["cross_fitted"] is True
    pages, _ = load_pages(resolve_sources(list(cfg.sources), cfg.cache, 0), cfg.cache, EncodeConfig(), 0)
    train_p = by_split(pages, "train")
    torch.manual_seed(3)
    rankers = [
        res.weights.text.ranker,
        AnswerRanker().eval(),
    ]  # the learned one for half 0, an untrained one for half 1
    named = {"w": res.weights}
    kw = dict(floor="off", prompts=False)
    got = cross_fit_records(train_p, named, (64,), train_p, rankers, 0, **kw)
    want = []
    for half, ranker in zip(_cross_fit_halves(len(train_p), 0), rankers):
        want += records([train_p[i] for i in half], {"w": res.weights.replace(text_ranker=ranker)}, (64,), **kw)
    key = lambda r: json.dumps(r, sort_keys=True, default=str)  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want)) and len(got) == len(want) > 0
    assert sorted(map(key, got)) != sorted(map(key, records(train_p, named, (64,), **kw)))  # not the final ranker's
    assert cross_fit_records(train_p, named, (64,), train_p, None, 0, **kw) == records(train_p, named, (64,), **kw)


@pytest.mark.slow
def test_the_ranker_runs_every_epoch_and_keeps_the_best_held_out_one(tiny_run):
    """The step size decays to 0 over ``max_epochs``: every epoch runs (no early stop), and the ranker returned is the
    epoch with the lowest held-out loss, which its report names."""
    import random

    from foveate.core.config import EncodeConfig
    from foveate.train.data import by_split, load_pages, resolve_sources
    from foveate.train.ranker import _tensors, build_groups, fit_ranker, held_out_pages, mean_loss

    cfg, _ = tiny_run
    pages, _ = load_pages(
        resolve_sources(list(cfg.sources), cfg.cache, 0), cfg.cache, EncodeConfig(preset=cfg.preset), 0
    )
    train_pages = by_split(pages, "train")
    ranker, report = fit_ranker(train_pages, seed=0, max_epochs=4, log=lambda *_: None)
    losses = [h["held_out_loss"] for h in report["history"]]
    assert len(losses) == 4
    assert report["epochs"] == 1 + int(np.argmin(losses))
    # the same held-out tenth as fit_ranker's draw: its loss, recomputed on the returned ranker, is the kept epoch's
    hold = build_groups(held_out_pages(train_pages, random.Random(0))[0], ranker)
    assert mean_loss(ranker, hold, _tensors(hold)) == pytest.approx(min(losses), abs=1e-3)


def test_a_near_tie_in_the_text_terms_grid_goes_to_the_broadest_painting():
    from foveate.train.text_term import broadest_within

    cells = {"a": (14.0, 4.0), "b": (14.0, 10.0), "c": (40.0, 10.0), "d": (40.0, 2.5)}
    tried = {"a": 92.71, "b": 92.66, "c": 92.30, "d": 92.71}
    assert broadest_within(tried, cells) == "b"  # sharpness 10 within 0.25 of the best; text 40 at 10 is not
    assert broadest_within(tried, cells, tie=0.5) == "c"  # both sharpness-10 cells close: the larger text weight
    assert broadest_within(tried, cells, tie=0.0) == "a"  # an exact tie: the larger sharpness of the two
    assert broadest_within({**tried, "b": 91.0, "c": 91.0}, cells) == "a"  # a real loss is not a tie


@pytest.mark.slow
def test_from_keeps_the_ranker_and_scorer_and_refits_the_text_term(tiny_run, tmp_path):
    """``--from``: the file's ranker, channel weights and level prior stay; the text term's constants and the gate
    are fitted again (and recorded); a file made from other sources or another seed is refused."""
    from foveate.core.errors import WeightsError
    from foveate.train.text_term import TEXT_FILLS, TEXT_SHARPNESS, TEXT_WEIGHTS

    cfg, res = tiny_run
    again = train(
        TrainConfig(
            cfg.sources,
            tmp_path / "refit.safetensors",
            cache=cfg.cache,
            seed=0,
            budgets=cfg.budgets,
            evaluate_test=False,
            start=str(res.path),
        ),
        log=lambda m: None,
    )
    a, b = res.weights, again.weights
    sa, sb = a.text.ranker.state_dict(), b.text.ranker.state_dict()
    assert all(np.array_equal(sa[k].numpy(), sb[k].numpy()) for k in sa)
    assert a.channel.keys() == b.channel.keys() and b.floor is not None  # the file holds float32
    assert all(b.channel[k] == pytest.approx(v, rel=1e-6) for k, v in a.channel.items())
    assert b.level_prior == pytest.approx(a.level_prior, rel=1e-6)
    assert b.text.extent is not None and again.report["extent"] == json.loads(
        json.dumps(res.report["extent"])
    )  # refitted alike
    search = again.report["scorer"]["text_term_search"]
    assert search["cross_fitted"] is False  # the file kept has no cross-fitting rankers: its own ranker paints
    assert len(search["tried"]) == len(TEXT_WEIGHTS) * len(TEXT_SHARPNESS) + len(TEXT_FILLS)
    assert b.query["text"] in TEXT_WEIGHTS and b.text.sharpness in TEXT_SHARPNESS
    assert b.text.fill in (0.0, *TEXT_FILLS) and f"fill={b.text.fill:g}" in search["chosen"]
    assert again.report["scorer"]["refit_from"]["weights"] == res.path.name
    assert again.report["ranker"] == json.loads(json.dumps(res.report["ranker"]))  # the kept ranker's own record
    with pytest.raises(WeightsError, match="seed"):
        train(
            TrainConfig(
                cfg.sources,
                tmp_path / "x.safetensors",
                cache=cfg.cache,
                seed=1,
                budgets=cfg.budgets,
                evaluate_test=False,
                start=str(res.path),
            ),
            log=lambda m: None,
        )
    with pytest.raises(WeightsError, match="no answer ranker"):
        train(
            TrainConfig(
                cfg.sources,
                tmp_path / "x.safetensors",
                cache=cfg.cache,
                seed=0,
                budgets=cfg.budgets,
                evaluate_test=False,
                start="handset",
            ),
            log=lambda m: None,
        )
