"""``foveate prompt``: a question about an image in, the request body to post to a VLM out -- its pictures planned
under the VLM's own token rule (``foveate.vlm``) -- plus the token ledger.  Nothing is sent anywhere."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer

from .._tables import print_table
from ..core.config import SelectConfig
from ..core.errors import FoveateError
from ..vlm.rules.registry import rules_help
from .common import (
    BudgetOpt,
    DeviceOpt,
    LevelsOpt,
    MaxPixOpt,
    ModelOpt,
    ModeOpt,
    PatchOpt,
    PresetOpt,
    WeightsOpt,
    _check_cover_early,
    _encode_config,
    _prompt_query,
    _resolve_input,
    _texture_for,
    app,
    err,
    out,
    pictures_folder,
    scale_text,
)


@app.command()
def prompt(
    source: str = typer.Argument(
        ..., help="An image, a PDF or multi-page TIFF, a saved .fvt texture, or example:page / example:photo."
    ),
    query: str = typer.Option(..., "--query", "-q", help="The question: it selects the tokens and ends the request."),
    vlm: str | None = typer.Option(
        None, "--vlm", help=f"VLM rule (default: the --model's, else openai): {rules_help()}."
    ),
    model: str | None = ModelOpt,
    point: list[str] = typer.Option([], "--point", help="Also a positive point prompt 'x,y' (pixels); repeatable."),
    box: list[str] = typer.Option([], "--box", help="Also a box prompt 'x0,y0,x1,y1' (pixels); repeatable."),
    budget: int = BudgetOpt,
    mode: str = ModeOpt,
    max_crops: int | None = typer.Option(None, "--max-crops", help="At most this many crops besides the context."),
    image_format: str = typer.Option("png", "--format", help="Picture encoding in the body: png or jpeg."),
    weights: str = WeightsOpt,
    output: Path = typer.Option(
        Path("out/prompt"), "--output", "-o", help="Folder for request.json, ledger.json and pictures/."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the ledger as one JSON object instead of a table."),
    preset: str = PresetOpt,
    patch_size: int = PatchOpt,
    max_levels: int = LevelsOpt,
    max_pixels: int = MaxPixOpt,
    device: str = DeviceOpt,
    dpi: float | None = typer.Option(None, "--dpi", help="A PDF's render resolution (default 144)."),
    max_pages: int | None = typer.Option(
        None, "--max-pages", min=1, help="Refuse a document with more pages than this (default 50)."
    ),
    page: int | None = typer.Option(
        None, "--page", min=1, help="A document: spend the whole budget on this page (1-based)."
    ),
) -> None:
    """Write the request body a user posts to a VLM (OpenAI chat completions, Anthropic messages, Gemini
    generateContent; Qwen2-VL processor inputs) with the pictures foveate plans for the question under that VLM's
    own token rule, and the token ledger: the plan vs the whole image vs a uniform resize."""
    from ..core.io import encode_image
    from ..selection import select as select_tokens
    from ..vlm import build_request, resolve
    from ..weights import load_weights

    if not query.strip():
        raise FoveateError("the question (-q) is empty: it selects the tokens and ends the request")
    if dpi is not None and not (math.isfinite(dpi) and dpi > 0):  # 0 meant the default; NaN passes `min=`
        raise typer.BadParameter(f"must be a finite number of dots per inch > 0, got {dpi}", param_hint="--dpi")
    rule, model = resolve(vlm, model)  # an unknown rule or model fails before the encode
    relevance = load_weights(weights)
    cfg = SelectConfig(budget=budget, mode=mode)
    if max_crops is not None and max_crops < 1:
        raise FoveateError("--max-crops must be at least 1")
    if image_format.lower() not in ("png", "jpeg", "jpg"):
        raise FoveateError(f"--format must be png or jpeg, got {image_format!r}")
    q = _prompt_query(query, point, [], box)
    src = _resolve_input(source)
    enc = _encode_config(preset, patch_size, max_levels, max_pixels)
    from .document import is_document_source, prompt_document_cli

    if is_document_source(src):  # a PDF, a multi-page TIFF or a saved document: one budget across its pages
        return prompt_document_cli(
            src, q, query, cfg, relevance, enc, device, output, rule, model, image_format, json_out,
            dpi=dpi, max_pages=max_pages, page=page,
        )  # fmt: skip
    if page is not None or dpi is not None or max_pages is not None:
        raise FoveateError(f"--page, --dpi and --max-pages apply to a PDF or multi-page TIFF; {source} is one image")
    _check_cover_early(src, enc, cfg)
    tex = _texture_for(src, enc, device, quiet=json_out)
    q.validate(tex.image_size)
    sel = select_tokens(tex, q, config=cfg, weights=relevance)
    req = build_request(
        tex.image,
        sel,
        rule,
        query,
        model=model,
        image_format=image_format,
        max_pictures=None if max_crops is None else max_crops + 1,
    )
    ledger = req.ledger()
    pdir, ext = pictures_folder(output, image_format)
    for i, (pic, arr) in enumerate(zip(req.plan.pictures, req.pictures)):
        (pdir / f"{i:02d}-{pic.kind}.{ext}").write_bytes(encode_image(arr, ext))
    (output / "request.json").write_text(json.dumps(req.body))
    (output / "ledger.json").write_text(json.dumps(ledger, indent=1))
    if req.inputs is not None:
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in req.inputs.items()}, str(output / "inputs.safetensors"))
    if json_out:
        out.print_json(json.dumps(ledger))
        return
    for note in sel.notes + req.plan.notes:
        err.print(f"note: {note}", highlight=False)
    rows = [
        [
            str(i),
            p["kind"],
            ",".join(map(str, p["box"])),
            "x".join(map(str, p["sent"])),
            "x".join(map(str, p["seen"])),
            scale_text(1 / p["scale"]),
            str(p["option"] or ""),
            str(p["tokens"]),
        ]
        for i, p in enumerate(ledger["pictures"], 1)
    ]
    header = ["#", "picture", "source box", "sent", "model sees", "scale", "option", "tokens"]
    print_table(out, header, rows, optional=("source box", "option", "sent"), right=("#", "tokens"))
    u = ledger["uniform"]
    out.print(
        f"{ledger['rule']} ({ledger['model']}): plan {ledger['plan_tokens']} tokens, whole image "
        f"{ledger['image_tokens']}, uniform resize {ledger['uniform_tokens']} ({'x'.join(map(str, u['seen']))} "
        f"seen, {scale_text(1 / u['scale'])}); {ledger['kept_tokens']} of {ledger['selected_tokens']} selected "
        f"tokens at their scale.  Wrote {output / 'request.json'}, {output / 'ledger.json'}, {pdir}/"
        + (f", {output / 'inputs.safetensors'}" if req.inputs is not None else ""),
        highlight=False,
    )
