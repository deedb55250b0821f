"""``--model NAME`` picks the provider's token rule from the model table (``foveate models``): for the nine names
users call, ``foveate prompt --model`` plans no costlier than the page, and saves on a form page for the OpenAI,
Anthropic and Gemini 3 families; an unknown name is one error line listing the families."""

from __future__ import annotations

import json

import pytest

from foveate.vlm import list_models, model_row, model_rule

from .common import run

#: model name -> the rule the table must pick for it
NINE = {
    "claude-opus-4-7": "anthropic:high",
    "claude-sonnet-4-5": "anthropic",
    "gpt-5.2": "openai-patch:gpt-5.2",
    "gpt-4o": "openai",
    "gpt-4.1-mini": "openai-patch",
    "gemini-3-flash-preview": "gemini-3",
    "gemini-2.5-flash": "gemini",
    "Qwen/Qwen3-VL-8B-Instruct": "qwen3-vl",
    "Qwen/Qwen2.5-VL-7B-Instruct": "qwen2.5-vl",
}
MUST_SAVE = {"claude-opus-4-7", "claude-sonnet-4-5", "gpt-5.2", "gpt-4o", "gpt-4.1-mini", "gemini-3-flash-preview"}


@pytest.fixture(scope="module")
def page_fvt(tmp_path_factory, page_texture):
    path = tmp_path_factory.mktemp("fvt") / "page.fvt"
    page_texture.save(path)
    return path


@pytest.mark.parametrize("name", sorted(NINE))
def test_prompt_with_a_model_name(name, page_fvt, tmp_path):
    done = run("prompt", page_fvt, "-q", "What is the total due?", "--model", name, "--json", "-o", tmp_path)
    assert done.returncode == 0, done.stderr
    ledger = json.loads(done.stdout)
    assert ledger["rule"] == NINE[name] and ledger["model"] == name
    assert ledger["source"] == model_rule(name).source and "(read 20" in ledger["source"]
    assert ledger["plan_tokens"] <= ledger["image_tokens"]
    if name in MUST_SAVE:
        assert ledger["plan_tokens"] < ledger["image_tokens"] and not ledger["fallback"]
    body = json.loads((tmp_path / "request.json").read_text())
    if "model" in body:  # the hosted APIs name the model in the body (Gemini names it in the URL)
        assert body["model"] == name


def test_select_with_a_model_name(page_fvt, tmp_path):
    done = run("select", page_fvt, "-q", "total due", "--model", "gemini-3-pro-preview", "-o", tmp_path)
    assert done.returncode == 0, done.stderr
    crops = json.loads((tmp_path / "q01-total-due" / "crops" / "crops.json").read_text())
    assert crops["rule"] == "gemini-3" and crops["plan_tokens"] <= crops["image_tokens"]


@pytest.mark.parametrize("command", ["prompt", "select"])
def test_an_unknown_model_is_one_error_line(command, page_fvt, tmp_path):
    done = run(command, page_fvt, "-q", "total", "--model", "llama-4-scout", "-o", tmp_path)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "unknown model 'llama-4-scout'" in done.stderr and "Gemini 3" in done.stderr and "--vlm" in done.stderr


def test_models_lists_the_table():
    done = run("models", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["pattern"] for r in rows] == [r.pattern for r in list_models()]
    assert all(r["source"].startswith("https://") and r["read"] for r in rows)
    one = run("models", "claude-opus-4-7")
    assert one.returncode == 0 and "anthropic:high" in one.stdout


def test_table_rows():
    """Every row names a rule the registry makes, a document and a date; the first match wins, also behind a
    provider prefix; a wide family never shadows a narrower one listed after it."""
    from foveate.vlm import ModelError, get_rule

    for row in list_models():
        get_rule(row.rule)
        assert row.source.startswith("https://") and len(row.read) == 10
    assert model_row("openrouter/anthropic/claude-opus-4-7").rule == "anthropic:high"
    assert model_row("CLAUDE-OPUS-4-7-20261001").rule == "anthropic:high"
    assert model_row("claude-haiku-4-5").rule == "anthropic"
    assert model_row("gpt-5.4-mini-2026-03-05").rule == "openai-patch:gpt-5.4-mini"
    assert model_row("gpt-4o-mini").rule == "openai:gpt-4o-mini"
    assert model_row("models/gemini-3-pro-preview").rule == "gemini-3"
    rows = list_models()
    import fnmatch

    for i, row in enumerate(rows):  # no row is unreachable: its own pattern (made concrete) matches it first
        name = row.pattern.replace("*", "x")
        assert model_row(name) in rows[: i + 1]
    with pytest.raises(ModelError, match="known families"):
        model_row("mistral-large")
    assert not fnmatch.fnmatchcase("gpt-5.2", "gpt-5")  # "gpt-5" is exact: gpt-5.2 is its own row
