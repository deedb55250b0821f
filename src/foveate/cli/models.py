"""``foveate models``: the model table -- which token rule bills pictures for each model name, and the document
(and the date read) each row follows."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from .common import app, out


@app.command()
def models(
    name: str | None = typer.Argument(None, help="Show the row a model name matches (e.g. claude-opus-4-7)."),
    json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
) -> None:
    """List the model table: model-name patterns -> the rule their provider bills pictures by.  ``--model NAME`` on
    prompt, select, eval and the service picks the rule from this table; ``--vlm RULE`` names a rule directly."""
    from ..vlm import list_models, model_row, model_rule

    rows = [model_row(name)] if name else list_models()
    docs = []
    for row in rows:
        rule = model_rule(name) if name else None
        doc = {"pattern": row.pattern, "rule": row.rule, "family": row.family, "source": row.source, "read": row.read}
        if rule is not None:
            doc.update(options=list(rule.options), max_pictures=rule.max_pictures)
        docs.append(doc)
    if json_out:
        out.print_json(json.dumps(docs))
        return
    groups: dict[tuple[str, str], list[str]] = {}  # rows of one rule and family on one line
    sources: dict[str, int] = {}
    for d in docs:
        groups.setdefault((d["rule"], d["family"]), []).append(d["pattern"])
        sources.setdefault(f"{d['source']} (read {d['read']})", len(sources) + 1)
    table = Table("model names", "rule", "family", "doc", box=None)
    for (rule_spec, family), patterns in groups.items():
        d = next(x for x in docs if x["rule"] == rule_spec and x["family"] == family)
        table.add_row(", ".join(patterns), rule_spec, family, str(sources[f"{d['source']} (read {d['read']})"]))
    out.print(table)
    for src, i in sources.items():
        out.print(f"[{i}] {src}", highlight=False, markup=False, soft_wrap=True)
    if name:
        opts = ", ".join(str(o) for o in docs[0]["options"] if o is not None) or "none"
        most = docs[0]["max_pictures"] or "any number of"
        out.print(f"{name}: per-picture options: {opts}; {most} pictures a request at most", highlight=False)
