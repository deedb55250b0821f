"""Documents on the command line: ``foveate select doc.pdf`` and ``foveate prompt doc.pdf`` (a PDF, a multi-page
TIFF or a saved document texture) spend one budget across the pages (:mod:`foveate.document`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeGuard

from rich.table import Table

from ..core.config import EncodeConfig, SelectConfig
from ..core.errors import FoveateError
from ..query.query import Query
from .common import Source, StoredRef, _slug, err, out, pictures_folder


def is_document_source(src: Source) -> TypeGuard[Path | StoredRef]:
    """A PDF, a multi-page TIFF, a saved document texture (``.fvt``) or a document's entry in a texture store
    (``STORE/#ID``) -- by content, not by name only."""
    if isinstance(src, StoredRef):
        return _stored_document_id(src)[1]
    return isinstance(src, Path) and is_document_path(src)


def is_document_path(src: Path) -> bool:
    """A PDF, a multi-page TIFF, or a saved document texture (``.fvt``) file."""
    if not src.is_file():
        return False
    if src.suffix == ".fvt":  # the header alone: no torch imported
        from ..document.header import is_document_file

        return is_document_file(src)
    from ..document.load import document_kind

    return document_kind(src) is not None


def _stored_document_id(ref: StoredRef) -> tuple[str, bool]:
    """(the full id ``ref`` names in its store, whether that entry is a document's): the blob's header decides."""
    from ..document.header import document_meta
    from ..store import TextureStore

    with TextureStore(ref.store, create=False) as store:
        tid = store.resolve_id(ref.id)  # none or several: a StoreError naming them
        data = store.get_bytes(tid)
    return tid, data is not None and document_meta(data) is not None


def document_for(
    src: Path | StoredRef,
    config: EncodeConfig,
    device: str,
    *,
    dpi: float | None = None,
    max_pages: int | None = None,
    quiet: bool = False,
) -> Any:
    """Load a saved document texture or a stored one (``STORE/#ID``), or encode the document (with a spinner on a
    terminal)."""
    from ..document.load import DEFAULT_DPI, DEFAULT_MAX_PAGES
    from ..document.texture import DocumentTexture, encode_document

    if isinstance(src, StoredRef):  # a document's store entry: read, never encoded
        from ..store import TextureStore
        from ..store.documents import get_document

        tid, _ = _stored_document_id(src)
        with TextureStore(src.store, create=False) as store:
            doc = get_document(store, tid, device=device)
        if doc is None:  # dropped as corrupt when read
            raise FoveateError(f"the document {tid} in {src.store} is corrupt and was dropped: encode it again")
        return doc
    if src.suffix == ".fvt":
        return DocumentTexture.load(src, device=device)
    dpi, max_pages = dpi or DEFAULT_DPI, max_pages or DEFAULT_MAX_PAGES
    if quiet or not err.is_terminal:
        return encode_document(src, config, device=device, dpi=dpi, max_pages=max_pages)
    with err.status(f"encoding the pages of {src.name} ..."):
        return encode_document(src, config, device=device, dpi=dpi, max_pages=max_pages)


def select_document_cli(
    src: Path | StoredRef,
    queries: list[Query],
    cfg: SelectConfig,
    weights: Any,
    enc: EncodeConfig,
    device: str,
    output: Path,
    rule: Any,
    json_out: bool,
    max_crops: int | None = None,
) -> None:
    """``foveate select`` on a document: per query, the document's ``selection.json`` (schema version 2) and the
    outputs of every page it touches."""
    from ..document.prompt import write_document_outputs
    from ..document.select import select_document

    doc = document_for(src, enc, device, quiet=json_out)
    table = Table("query", "tokens", "pages (tokens)", "ms", "written to", box=None)
    docs = []
    for i, q in enumerate(queries, 1):
        sel = select_document(doc, q, config=cfg, weights=weights)
        dest = output / _slug(q.text, i)  # one layout for one query or many, as for an image
        written = write_document_outputs(doc, sel, dest, vlm=rule, max_crops=max_crops)
        docs.append(json.loads(written["selection"].read_text()))
        pages = " ".join(f"p{p + 1}:{len(s)}" for p, s in sel.pages)
        label = q.text or "(no query: saliency)"
        table.add_row(label[:50], f"{len(sel)}/{sel.budget}", pages, f"{sel.timings_ms['total']:.1f}", str(dest))
        if not json_out:
            for note in sel.notes:
                err.print(f"note: {note}", highlight=False)
    if json_out:
        out.print_json(json.dumps(docs[0] if len(docs) == 1 else docs))
    else:
        out.print(table)


def prompt_document_cli(
    src: Path | StoredRef,
    query: Query,
    question: str,
    cfg: SelectConfig,
    weights: Any,
    enc: EncodeConfig,
    device: str,
    output: Path,
    rule: Any,
    model: str | None,
    image_format: str,
    json_out: bool,
    *,
    dpi: float | None = None,
    max_pages: int | None = None,
    page: int | None = None,
) -> None:
    """``foveate prompt`` on a document: one request with the pictures of every page the selection touches, and
    the ledger against the whole document sent as pictures."""
    from ..core.io import encode_image
    from ..document.prompt import build_document_request
    from ..document.select import select_document

    doc = document_for(src, enc, device, dpi=dpi, max_pages=max_pages, quiet=json_out)
    sel = select_document(doc, query, config=cfg, weights=weights, page=None if page is None else page - 1)
    req = build_document_request(doc, sel, rule, question, model=model, image_format=image_format)
    ledger = req.ledger()
    pdir, ext = pictures_folder(output, image_format)
    kinds = [pic.kind for _, p in req.plan.plans for pic in p.pictures]
    for i, (arr, p, kind) in enumerate(zip(req.pictures, req.pages, kinds)):
        (pdir / f"{i:02d}-p{p + 1:03d}-{kind}.{ext}").write_bytes(encode_image(arr, ext))
    (output / "request.json").write_text(json.dumps(req.body))
    (output / "ledger.json").write_text(json.dumps(ledger, indent=1))
    if req.inputs is not None:  # a local model's processor inputs (Qwen2-VL)
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in req.inputs.items()}, str(output / "inputs.safetensors"))
    if json_out:
        out.print_json(json.dumps(ledger))
        return
    for note in sel.notes + req.plan.notes:
        err.print(f"note: {note}", highlight=False)
    table = Table("page", "pictures", "plan tokens", "whole page", box=None)
    plans = dict(req.plan.plans)
    for i, tokens in enumerate(req.plan.page_tokens):
        if i in plans:
            table.add_row(str(i + 1), str(len(plans[i].pictures)), str(plans[i].tokens), str(tokens))
    out.print(table)
    out.print(
        f"{ledger['rule']} ({ledger['model']}): plan {ledger['plan_tokens']} tokens over {len(plans)} of "
        f"{doc.num_pages} pages; the whole document as pictures {ledger['document_tokens']}.  Wrote "
        f"{output / 'request.json'}, {output / 'ledger.json'}, {pdir}/"
        + (f", {output / 'inputs.safetensors'}" if req.inputs is not None else ""),
        highlight=False,
    )


def encode_document_cli(
    src: Path, config: EncodeConfig, device: str, output: Path | None, store: Path | None, workers: int = 0
) -> None:
    """``foveate encode doc.pdf``: the document texture into one ``.fvt`` file (``-o``, default ``<stem>.fvt``) or
    into a texture store as one entry (``--store``)."""
    from ..core.errors import FoveateError

    if store is not None and output is not None:
        raise FoveateError("pass either --store DIR or -o/--output, not both")
    if output is not None and output.suffix != ".fvt":
        raise FoveateError(f"a document is written to one .fvt file: name it with -o (got {output})")
    doc = document_for(src, config, device)
    what = (
        f"{doc.num_pages} pages ({', '.join(sorted(set(doc.text_sources)))}), {doc.timings_ms['total']:.0f} ms, "
        f"{sum(doc.nbytes().values()) / 1024:.0f} KiB"
    )
    if store is not None:
        from ..store import TextureStore
        from ..store.documents import put_document

        with TextureStore(store) as st:
            entry, created = put_document(st, doc, source=src)
        state = "stored" if created else "stored already"
        out.print(f"{src} -> {store} #{entry.id} ({state}; {what})", highlight=False)
        return
    dest = output or Path(f"{src.stem}.fvt")
    dest.parent.mkdir(parents=True, exist_ok=True)
    doc.save(dest)
    out.print(f"{src} -> {dest}  ({what})", highlight=False)


def document_info_cli(src: Path | StoredRef, json_out: bool) -> None:
    """``foveate info`` on a document texture file or a document's store entry (``STORE/#ID``): its pages from the
    header (no page is read)."""
    from ..core.errors import TextureFormatError
    from ..document.header import document_meta, read_document_header

    if isinstance(src, StoredRef):
        from ..store import TextureStore

        tid, _ = _stored_document_id(src)
        with TextureStore(src.store, create=False) as store:
            data = store.get_bytes(tid)
        meta = document_meta(data) if data is not None else None
        src, how = Path(f"{src.store}/#{tid}"), "foveate.store.get_document(TextureStore(store), id)"
    else:
        how = "foveate.DocumentTexture.load(path)"
        meta = read_document_header(src)
    if meta is None:  # is_document_file / the entry's header said yes: only a truncated header gets here
        raise TextureFormatError(f"{src}: corrupt document texture header")
    doc: dict[str, Any] = {k: meta.get(k) for k in ("id", "kind", "dpi", "num_pages")}
    doc["pages"], doc["text_sources"] = list(meta.get("pages") or []), list(meta.get("text_sources") or [])
    doc["source"] = str(src)
    doc["encode_ms"] = round(float(meta.get("timings_ms", {}).get("total", 0)), 3)
    if json_out:
        out.print_json(json.dumps(doc))
        return
    dpi = f" at {doc['dpi']:g} dpi" if doc["dpi"] else ""
    out.print(
        f"[bold]{src}[/]  document ({doc['kind']}{dpi}), {doc['num_pages']} pages, id {doc['id']}; encode "
        f"{doc['encode_ms']:.0f} ms",
        highlight=False,
    )
    table = Table("page", "width", "height", "text", box=None)
    for i, (size, source) in enumerate(zip(doc["pages"], doc["text_sources"]), 1):
        table.add_row(str(i), str(size["width"]), str(size["height"]), source)
    out.print(table)
    out.print(f"a page's channels and levels: {how}.pages[i]", highlight=False, markup=False)
