"""A run's outputs: eval.json, eval.md and the plots."""

from __future__ import annotations

import json
import sys

import pytest
from PIL import Image

from foveate.core.errors import FoveateError
from foveate.eval.report import write_outputs


def test_write_outputs_json_markdown_and_plots(result, tmp_path):
    pytest.importorskip("matplotlib")
    written = write_outputs(result, tmp_path / "o", plots=True, gallery=4, group_by=["page"])
    doc = json.loads(written["json"].read_text())
    assert len(doc["records"]) == result.counts["records"] and doc["counts"] == result.counts
    assert set(doc["summary"]) == {"64", "144"} and "by_page" in doc
    assert doc["problems"][0]["line"] is not None
    md = written["markdown"].read_text()
    assert md.count("| 64 | ") >= 6 and "by `page`" in md
    for name in ("curves", "gallery"):
        im = Image.open(written[name])
        assert im.size[0] > 300 and im.size[1] > 200


def test_plots_without_matplotlib_say_what_to_install(monkeypatch):
    from foveate.eval.plots import load_pyplot

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(FoveateError, match=r"foveate\[plots\]"):
        load_pyplot()
