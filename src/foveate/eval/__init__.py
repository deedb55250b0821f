"""Evaluation (``foveate eval``): on annotated data, do the selected tokens cover what the query asks about -- and how
do simple baselines at the same budget do on the same queries?

A data set is a folder with ``queries.jsonl``, one object per line::

    {"image": "images/a.png", "query": "What is the total?", "boxes": [[x0, y0, x1, y1], ...]}

in pixels of the stored image.  Optional keys: ``text_heights`` (one per box: the height of a line of its text,
used instead of the box height for legibility) and ``answer_text`` (one string per box, or one for all: what
an OCR of the selection should read there).  Other keys are kept as metadata (``--group-by``).

The stage, top to bottom:

* **data** (``data``) -- :func:`read_queries` parses every line; a malformed line, a missing or unreadable image, a
  box outside the image is a :class:`Problem` with its line number; the run goes on and the summary counts them.
* **baselines** (``baselines``, ``oracle``) -- pure functions from geometry to :class:`Tokens` (boxes + scale per
  token): *uniform* (the whole image resized to fit the budget), *random* (level-0 tiles plus the top-k gist),
  *oracle* (the same selection procedure driven by the ground-truth boxes); *query-blind* is foveate with no query,
  and *full* (every level-0 tile, over any budget) is the reference the metric itself allows.
* **OCR answer check** (``answers``) -- :func:`answer_found`: a normalised, location-aware match of ``answer_text`` in
  what an OCR reads from the mosaic, the full image and the uniform image (needs ``foveate.query.text``; otherwise
  the column is reported as unavailable).
* **runner** (``runner``, ``config``) -- :func:`run_eval`: each image is encoded once and serves all its queries,
  budgets, baselines; :class:`EvalConfig` says what a run measures.
* **aggregation and outputs** (``summary``, ``report``, ``plots``) -- :func:`aggregate`, :func:`render_markdown`,
  :func:`print_tables`, :func:`write_outputs` (JSON with every record, markdown, optional matplotlib plots).

``metrics`` scores one selection against the boxes (coverage, legible coverage, hit); ``video`` is the box-coverage
evaluation of the video updates (``foveate eval-video``).  This package re-exports the names of the former
``foveate.evaluation`` module.
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{
            n: ".answers"
            for n in (
                "OCR_METHODS",
                "answer_found",
                "lines_at",
                "load_ocr",
                "normalize_text",
                "query_answer_found",
                "substring_edit_distance",
            )
        },
        **{
            n: ".baselines"
            for n in (
                "BASELINES",
                "METHOD_HELP",
                "METHOD_LABELS",
                "Tokens",
                "random_tiles",
                "uniform_scale",
                "uniform_tokens",
                "uniform_view",
            )
        },
        **{
            n: ".data"
            for n in (
                "PROBLEM_KINDS",
                "QUERIES_FILE",
                "SIZE_BUCKETS",
                "EvalQuery",
                "Problem",
                "check_boxes",
                "parse_query_line",
                "read_queries",
                "size_bucket",
            )
        },
        "oracle_tiles": ".oracle",
        **{n: ".plots" for n in ("load_pyplot", "plot_curves", "plot_gallery", "worst_records")},
        **{
            n: ".report"
            for n in (
                "describe_run",
                "group_rows",
                "print_tables",
                "problem_summary",
                "render_markdown",
                "summary_rows",
                "write_outputs",
            )
        },
        **{n: ".config" for n in ("SELECT_KNOBS", "EvalConfig", "parse_select_value", "parse_variant")},
        **{n: ".runner" for n in ("EvalResult", "run_eval", "sample_queries")},
        "aggregate": ".summary",
    },
)
