"""Whatever text a query holds -- any Unicode, lone surrogates, control characters, very long strings -- select
answers it or refuses it with a ``QueryError``; it never raises anything else (issue 40: undecodable bytes were a
``TypeError`` from the tokenizer)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import foveate
from foveate.core.errors import QueryError

TEXTS = st.text(st.characters(codec=None, exclude_categories=()), max_size=60) | st.sampled_from(
    ["", " ", "\x00", "tot\udcffal", "\ud800", "a" * 3000, "🙂" * 40, "\u202e\u200b", "Größe €", "名前"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXTS)
def test_any_question_selects_or_is_refused(page_texture, text):
    try:
        sel = foveate.select(page_texture, text, 64, cut=False)
    except QueryError:
        return
    assert 0 < len(sel) <= 64
    assert sel.query.text is None or sel.query.text.encode("utf-8")  # valid Unicode from here on
