"""``POST /v1/textures/{id}/prompt``: a question about a stored texture in, the request body to post to a VLM out,
with the pictures planned under the VLM's own token rule, and the token ledger (``foveate prompt --json``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from ...core.texture import Texture
from ...vlm import build_request
from ..documents import select_across_pages
from ..guard import body_limit
from ..schemas import Error, PromptIn, PromptOut
from .textures import ERRORS, SELECT_BODY_LIMIT, TextureId, _engine, select_stored, stored

router = APIRouter(prefix="/v1/textures", tags=["prompt"])


@router.post(
    "/{tid}/prompt",
    response_model=PromptOut,
    responses={**ERRORS, 413: {"model": Error, "description": "Body over 1 MiB."}},
    summary="A VLM request body for a question, pictures planned under the VLM's token rule",
)
@body_limit(SELECT_BODY_LIMIT)
async def prompt(request: Request, tid: TextureId, body: PromptIn) -> dict:
    """Selects tokens for the question on the stored texture (no encode), plans the pictures under ``vlm``'s own
    token rule (never more tokens than the whole image as the provider takes it) and returns the request body to
    post (pictures base64 inline, each introduced by a line saying where it sits and at what scale) with the ledger:
    the plan vs the whole image vs a uniform resize.  Nothing is sent to the VLM.  On a document's id: one budget
    across its pages, the pictures of every page it touches (each introduced by ``Page i of N.``), and the ledger
    against the whole document as pictures (``document_tokens``, which ``plan_tokens`` never exceeds)."""

    def work() -> dict:
        found = stored(request, tid)
        if not isinstance(found, Texture):  # a document: the pictures of the pages the one budget touches
            from ...document.prompt import build_document_request

            sel = select_across_pages(found, body, _engine(request).weights)
            req = build_document_request(
                found, sel, body.vlm, body.text, model=body.model, image_format=body.format, inputs=False
            )
            return {
                "ledger": req.ledger(),
                "request": req.body,
                "pictures": req.data_urls() if req.api == "qwen2-vl" else None,
            }
        tex, sel = select_stored(request, tid, body, False, found)  # the server's weights, as every route's
        req = build_request(
            tex.image,
            sel,
            body.vlm,
            body.text,
            model=body.model,
            image_format=body.format,
            max_pictures=None if body.max_crops is None else body.max_crops + 1,
            inputs=False,
        )
        return {
            "ledger": req.ledger(),
            "request": req.body,
            "pictures": req.data_urls() if req.api == "qwen2-vl" else None,
        }

    return await run_in_threadpool(work)
