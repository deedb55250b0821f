"""``/v1/textures``: upload (encode once), info, delete, and per query: select, overlay, mosaic, tokens, crops."""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import ValidationError
from pydantic_core import to_json
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from ...core.config import DEFAULT_BUDGET
from ...core.errors import ImageDecodeError, QueryError, TextureKindError, UnsupportedInputError
from ...core.texture import Texture
from ...query.query import MAX_QUERY_CHARS
from ...render import png_bytes, tokens_metadata
from ...selection import Selection, select
from ...store import StoreEntry
from ...vlm.rules.registry import rules_help
from ..documents import one_image_only, select_document_json
from ..errors import TextureNotFound
from ..guard import UPLOAD, body_limit
from ..schemas import (
    MAX_BUDGET,
    MAX_PROMPTS,
    TEXTURE_ID_PATTERN,
    CropsOut,
    Error,
    Mode,
    PromptIn,
    SelectIn,
    SelectionOut,
    TextureOut,
)

if TYPE_CHECKING:
    from ...document.texture import DocumentTexture

router = APIRouter(prefix="/v1/textures", tags=["textures"])

#: a select body is a small JSON document (text up to 20,000 characters, 64 points and boxes): 1 MiB is ample
SELECT_BODY_LIMIT = 1 << 20

TextureId = Annotated[str, Path(pattern=TEXTURE_ID_PATTERN, description="A texture id from POST /v1/textures.")]

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Error, "description": "Missing or wrong API key."},
    404: {"model": Error, "description": "No such texture (upload the image first)."},
    422: {"model": Error, "description": "Invalid query, budget or parameters."},
    504: {"model": Error, "description": "The request took longer than the server's timeout."},
}
PNG: dict[int | str, dict[str, Any]] = {200: {"content": {"image/png": {}}, "description": "A PNG image."}}

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "image/*": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            },
        },
    }
}


def _engine(request: Request):
    return request.app.state.engine


def texture_out(entry: StoreEntry, created: bool | None = None, pages: int | None = None) -> TextureOut:
    return TextureOut(
        kind="image" if pages is None else "document",
        pages=pages,
        id=entry.id,
        created=created,
        width=entry.width,
        height=entry.height,
        channels=list(entry.channels),
        absent=list(entry.absent),
        levels=entry.levels,
        preset=entry.preset,
        config_hash=entry.config_hash,
        content_hash=entry.content_hash,
        bytes=entry.size,
        encode_ms=round(entry.encode_ms, 3),
    )


#: declared types a client sends for anything but an image (curl --data-binary says form-urlencoded for any file):
#: the bytes decide, and a body of one of these that is not an image answers 415 saying what to send
NOT_IMAGE_TYPES = ("application/json", "application/x-www-form-urlencoded", "text/")


async def _image_bytes(request: Request) -> tuple[bytes, str]:
    """(the uploaded bytes, the declared content type): a multipart form's ``file`` field, or the raw body whatever
    its declared type (the bytes are sniffed by decoding them: ``curl --data-binary @page.png`` declares
    application/x-www-form-urlencoded)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "multipart/form-data":
        form = await request.form(max_files=1, max_fields=8)
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise UnsupportedInputError(
                "a multipart upload needs the image in a file field named 'file' (curl -F file=@image.png ...)"
            )
        data = await file.read()
    else:
        data = await request.body()
    if not data:
        raise ImageDecodeError("the upload is empty: send the image bytes as the body or as multipart field 'file'")
    return data, ctype


@router.post(
    "",
    status_code=201,
    response_model=TextureOut,
    openapi_extra=UPLOAD_BODY,
    summary="Upload an image; encode it unless stored",
    responses={
        200: {"model": TextureOut, "description": "Already stored: nothing was encoded."},
        201: {"description": "Encoded and stored now."},
        400: {"model": Error, "description": "Empty, corrupt or unreadable image."},
        413: {"model": Error, "description": "Upload over the size limit."},
        415: {"model": Error, "description": "Not an image upload."},
        503: {"model": Error, "description": "Encode queue full: retry after Retry-After s."},
        507: {"model": Error, "description": "The texture alone is larger than the store cap."},
        **{k: v for k, v in ERRORS.items() if k != 404},
    },
)
@body_limit(UPLOAD)
async def upload(request: Request, response: Response) -> TextureOut:
    """The image as the raw body (whatever its declared content type: the bytes are decoded, so ``curl
    --data-binary @page.png`` works) or as multipart field ``file``.  Idempotent: the id is the image content
    hash + the encode config hash, so uploading the same picture again (even in another file format) answers 200
    with the same id and encodes nothing; concurrent uploads of one picture encode it once.  Images over the pixel
    limit answer 422.  A PDF or multi-page TIFF is stored as one document (``kind: "document"``, ``pages``; at
    most 50 pages, each within the pixel limit at 144 dpi); ``select`` and ``prompt`` on its id spend one budget
    across its pages."""
    data, ctype = await _image_bytes(request)
    from ..documents import is_document_upload

    if is_document_upload(data):  # a PDF or multi-page TIFF: one document entry, its pages encoded once
        entry, created, pages = await _engine(request).documents.upload(data)
        response.status_code = 201 if created else 200
        return texture_out(entry, created, pages)
    try:
        entry, created = await _engine(request).upload(data)
    except ImageDecodeError:
        if not ctype.startswith(NOT_IMAGE_TYPES):
            raise
        raise UnsupportedInputError(
            f"the {ctype} body is not an image: send the image itself (raw bytes or multipart field 'file'); "
            "this server does not fetch URLs"
        ) from None
    response.status_code = 201 if created else 200
    return texture_out(entry, created)


@router.get("/{tid}", response_model=TextureOut, responses=ERRORS, summary="A stored texture's metadata")
async def info(request: Request, tid: TextureId) -> TextureOut:
    engine = _engine(request)
    entry = engine.store.entry(tid)
    if entry is None:
        raise TextureNotFound(tid)
    return texture_out(entry, pages=await run_in_threadpool(engine.documents.pages, tid))


@router.delete("/{tid}", status_code=204, responses=ERRORS, summary="Remove a texture from the store")
async def delete(request: Request, tid: TextureId) -> Response:
    if not await run_in_threadpool(_engine(request).delete, tid):
        raise TextureNotFound(tid)
    return Response(status_code=204)


# -- per query ------------------------------------------------------------------------------------------------


def stored(request: Request, tid: str) -> Texture | DocumentTexture:
    """The stored texture or document (memory first).  Blocking: runs in a worker thread."""
    engine = _engine(request)
    docs = engine.documents
    if not docs.known(tid):
        try:
            tex = engine.texture(tid)
        except TextureKindError:  # a document's entry: read once, then known
            pass
        else:
            if tex is None:
                raise TextureNotFound(tid)
            docs.mark_single(tid)
            return tex
    doc = docs.get(tid)
    if doc is None:
        raise TextureNotFound(tid)
    return doc


def select_stored(
    request: Request, tid: str, body: SelectIn | PromptIn, cut: bool, found: Texture | DocumentTexture | None = None
) -> tuple[Texture, Selection]:
    """(texture, selection) of a stored texture under the server's weights (the engine's, resolved once at start):
    every route that selects one image comes here; on a document's id, the page ``body.page`` (1-based) as one image
    (without a page: a 422 that says so).  ``found``: what :func:`stored` gave already.  Blocking: runs in a worker
    thread."""
    engine = _engine(request)
    tex = stored(request, tid) if found is None else found
    page = getattr(body, "page", None)
    if not isinstance(tex, Texture):  # a document: the page asked for (1-based), as one image
        if page is None:
            raise one_image_only(tid, tex.num_pages)
        if page > tex.num_pages:
            raise QueryError(f"page {page} is outside the document's {tex.num_pages} pages (1-based)")
        tex = tex.pages[page - 1]
    elif page is not None:
        raise QueryError(f"page is for a document's id; texture {tid} is one image (leave page out)")
    sel = select(
        tex,
        body.to_query(),
        body.budget,
        mode=body.mode,
        gist=body.gist,
        cut=cut,
        explain=getattr(body, "explain", False),
        weights=engine.weights,
    )
    return tex, sel


def selection_json(sel: Selection) -> bytes:
    """The ``SelectionOut`` JSON body of a selection, without validating every token through the model (that
    took longer than the select itself): ``Selection.to_dict()`` in the model's field order (``evidence``, e.g. the
    likely answer lines and their probabilities, only where ``explain`` was asked), serialised by pydantic-core as
    FastAPI serialises ``response_model`` (its float format, e.g. ``0.00001`` where ``json.dumps`` writes ``1e-05``;
    NaN and infinities as null).  The values already have the model's types (ints, floats from ``float``/``tolist``,
    bools)."""
    doc = sel.to_dict()
    if doc["explain"] is None:
        del doc["evidence"]
    return to_json(doc, inf_nan_mode="null")


@router.post(
    "/{tid}/select",
    response_model=SelectionOut,
    summary="Select tokens for a query",
    responses={**ERRORS, 413: {"model": Error, "description": "Body over 1 MiB."}},
)
@body_limit(SELECT_BODY_LIMIT)
async def select_tokens(request: Request, tid: TextureId, body: SelectIn) -> Response:
    """Scores the stored texture for the query and spends the budget (no encode).  Returns the selection
    document of ``foveate select --json`` (schema: docs/selection-schema.md); on a document's id, the schema
    version 2 document (every token with its ``page``)."""

    def work() -> bytes:
        tex = stored(request, tid)
        if not isinstance(tex, Texture):  # a document: one budget across its pages, schema version 2
            return select_document_json(tex, body, _engine(request).weights)
        return selection_json(select_stored(request, tid, body, False, tex)[1])

    # the bytes FastAPI would make from response_model=SelectionOut (which stays for the OpenAPI schema)
    return Response(await run_in_threadpool(work), media_type="application/json")


_NUM = re.compile(r"[,\s]+")


def _numbers(text: str, n: int, what: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(v) for v in _NUM.split(text.strip()) if v)
    except ValueError:
        vals = ()
    if len(vals) != n:
        raise QueryError(f"{what} must be {n} numbers separated by commas, got {text[:60]!r}")
    return vals


def _point(text: str, what: str) -> tuple[float, float]:
    x, y = _numbers(text, 2, what)
    return x, y


def _box(text: str) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = _numbers(text, 4, "box")
    return x0, y0, x1, y1


def query_params(
    text: str | None = Query(
        None, max_length=MAX_QUERY_CHARS, description="Query text (longer queries: POST the select body)."
    ),
    point: list[str] = Query([], max_length=MAX_PROMPTS, description="Positive point 'x,y' (pixels); repeatable."),
    neg_point: list[str] = Query([], max_length=MAX_PROMPTS, description="Negative point 'x,y'; repeatable."),
    box: list[str] = Query([], max_length=MAX_PROMPTS, description="Box 'x0,y0,x1,y1' (pixels); repeatable."),
    budget: int = Query(DEFAULT_BUDGET, ge=1, le=MAX_BUDGET, description="Tokens to select."),
    mode: Mode = Query("auto"),
    gist: bool = Query(True, description="topk: add the whole image at the coarsest level."),
    page: int | None = Query(
        None,
        ge=1,
        le=100_000,
        description="A document's id only (required there): the page to render, 1-based as in the select body.",
    ),
) -> SelectIn:
    """The query of a GET rendering, from URL parameters (the same fields as the select body)."""
    points = [_point(p, "point") for p in point] + [_point(p, "neg_point") for p in neg_point]
    labels: list[Literal[0, 1]] = [1 for _ in point]
    labels += [0 for _ in neg_point]
    try:
        return SelectIn(
            text=text,
            points=points,
            point_labels=labels,
            boxes=[_box(b) for b in box],
            page=page,  # a document's page: the GET routes render one image
            budget=budget,
            mode=mode,
            gist=gist,
            explain=False,
        )
    except ValidationError as exc:
        raise QueryError(f"invalid query: {exc.errors()[0].get('msg', exc)}") from None


QueryParams = Annotated[SelectIn, Depends(query_params)]


@router.get(
    "/{tid}/overlay.png",
    response_class=Response,
    responses={**PNG, **ERRORS},
    summary="Heat map and chosen tokens over the image",
)
async def overlay(request: Request, tid: TextureId, q: QueryParams) -> Response:
    from ...render import render_overlay

    def work() -> bytes:
        tex, sel = select_stored(request, tid, q, cut=False)
        return png_bytes(render_overlay(tex.image, sel))

    return Response(await run_in_threadpool(work), media_type="image/png")


@router.get(
    "/{tid}/mosaic.png", response_class=Response, responses={**PNG, **ERRORS}, summary="The image as the VLM sees it"
)
async def mosaic(request: Request, tid: TextureId, q: QueryParams) -> Response:
    from ...render import render_mosaic

    def work() -> bytes:
        tex, sel = select_stored(request, tid, q, cut=False)
        return png_bytes(render_mosaic(tex, sel))

    return Response(await run_in_threadpool(work), media_type="image/png")


@router.get(
    "/{tid}/tokens",
    response_class=Response,
    summary="Selected tokens as safetensors",
    responses={
        200: {
            "content": {"application/octet-stream": {}},
            "description": "safetensors: patches (K, 3, P, P) uint8, boxes, levels, rows, cols, "
            "centers, grid, scores, gist; metadata: patch_size, image size, "
            "texture_id, query.",
        },
        **ERRORS,
    },
)
async def tokens(request: Request, tid: TextureId, q: QueryParams) -> Response:
    from safetensors.torch import save

    def work() -> bytes:
        _, sel = select_stored(request, tid, q, cut=True)
        return save(sel.tensors(), metadata=tokens_metadata(sel))

    return Response(
        await run_in_threadpool(work),
        media_type="application/octet-stream",
        headers={"Content-Disposition": 'attachment; filename="tokens.safetensors"'},
    )


@router.get(
    "/{tid}/crops",
    response_model=CropsOut,
    responses=ERRORS,
    summary="The pictures to send a VLM under its own token rule, never more tokens than the image",
)
async def crops(
    request: Request,
    tid: TextureId,
    q: QueryParams,
    vlm: str | None = Query(
        None, max_length=64, description=f"VLM rule (default: the model's, else openai): {rules_help()}."
    ),
    model: str | None = Query(
        None,
        max_length=200,
        description="A model name (`foveate models`): its provider's rule, unless `vlm` names one.",
    ),
    max_crops: int | None = Query(
        None, ge=1, le=64, description="At most this many crops besides the context picture."
    ),
    images: bool = Query(True, description="Include each picture as a PNG data URL."),
) -> dict:
    from ...render import crop_images, plan_crops
    from ...vlm import resolve

    rule, _ = resolve(vlm, model)  # an unknown rule or model: a 422 before any work

    def work() -> dict:
        tex, sel = select_stored(request, tid, q, cut=False)
        plan = plan_crops(sel, rule, max_crops=max_crops)
        doc = plan.to_dict()
        if images:
            for c, (_, arr) in zip(doc["pictures"], crop_images(tex.image, plan)):
                c["image"] = "data:image/png;base64," + base64.b64encode(png_bytes(arr)).decode()
        return doc

    return await run_in_threadpool(work)
