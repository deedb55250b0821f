"""The hand-off of a document's selection: a crop plan per page the selection touches (:func:`foveate.vlm.plan_for`),
and one request body with every page's pictures, each introduced by a line naming its page.

The reference is the document as the provider takes it when sent whole: every page as a picture under the rule
(:meth:`VlmRule.whole` per page).  Each page's plan never exceeds that page's whole picture and an untouched page
costs nothing, so the document's plan never exceeds the reference.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ConfigError
from ..core.io import encode_image
from ..vlm.formats import SentPictures, data_url
from ..vlm.models import resolve
from ..vlm.payload import MEDIA, picture_line
from ..vlm.picture import Picture
from ..vlm.pictures import cut_pictures
from ..vlm.plan import Plan, plan_for
from ..vlm.rules import VlmRule
from .select import DocumentSelection
from .texture import DocumentTexture


@dataclass
class DocumentPlan:
    """Per touched page its :class:`~foveate.vlm.Plan`; ``page_tokens`` every page's whole picture under the rule
    (the reference is their sum)."""

    rule: str
    model: str
    page_sizes: list[tuple[int, int]]  # (H, W)
    plans: list[tuple[int, Plan]]
    page_tokens: list[int]
    notes: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return sum(p.tokens for _, p in self.plans)

    @property
    def document_tokens(self) -> int:
        """Every page sent whole, as the provider takes it: what the plan never exceeds."""
        return sum(self.page_tokens)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "model": self.model,
            "pages": [{"width": w, "height": h} for h, w in self.page_sizes],
            "document_tokens": self.document_tokens,
            "page_tokens": list(self.page_tokens),
            "plan_tokens": self.tokens,
            "saving": round(1.0 - self.tokens / max(self.document_tokens, 1), 4),
            "page_plans": [{"page": i, **p.to_dict()} for i, p in self.plans],
            "notes": list(self.notes),
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }


def plan_document(
    selection: DocumentSelection, rule: VlmRule | str | None = None, *, model: str | None = None
) -> DocumentPlan:
    """A crop plan per page ``selection`` touches under ``rule`` (as :func:`foveate.vlm.plan_for`)."""
    t0 = time.perf_counter()
    vrule, name = resolve(rule, model)
    plans = [(i, plan_for(sel, vrule)) for i, sel in selection.pages]
    page_tokens = [int(vrule.whole(w, h)[1].tokens) for h, w in selection.page_sizes]
    notes = []
    n = sum(len(p.pictures) for _, p in plans)
    if vrule.max_pictures is not None and n > vrule.max_pictures:
        notes.append(f"{n} pictures over {len(plans)} pages: above the {vrule.max_pictures} {vrule.name} takes")
    return DocumentPlan(
        vrule.name,
        name,
        list(selection.page_sizes),
        plans,
        page_tokens,
        notes,
        {"plan": (time.perf_counter() - t0) * 1000.0},
    )


@dataclass
class DocumentRequest:
    """A request ready to post for a document: ``body``, the ``plan``, the ``pictures`` as sent (RGB arrays, body
    order) with their ``lines`` and ``pages``; for a local model's processor (Qwen2-VL) its ``inputs`` (torch tensors)
    instead of ``encoded`` pictures."""

    body: dict[str, Any]
    plan: DocumentPlan
    pictures: list[np.ndarray]
    lines: list[str]
    pages: list[int]
    question: str
    api: str
    model: str
    inputs: dict[str, Any] | None = None
    encoded: list[str] = field(default_factory=list)  # the pictures, base64 (empty with processor inputs)
    media: str = "image/png"

    def data_urls(self) -> list[str]:
        """The pictures as data URLs, in body order (empty when the request carries processor inputs)."""
        return [data_url(self.media, data) for data in self.encoded]

    def ledger(self) -> dict[str, Any]:
        doc = self.plan.to_dict()
        doc["pictures"] = [{"page": p, "line": line} for p, line in zip(self.pages, self.lines)]
        doc.update(
            api=self.api,
            model=self.model,
            question=self.question,
            text_tokens_estimate=sum(math.ceil(len(s) / 4) for s in self.lines),
        )
        return doc


def build_document_request(
    doc: DocumentTexture,
    selection: DocumentSelection,
    rule: VlmRule | str | None = None,
    question: str | None = None,
    *,
    model: str | None = None,
    image_format: str = "png",
    inputs: bool = True,
) -> DocumentRequest:
    """The request body for a document's selection: every touched page's planned pictures, in page order, each
    introduced by ``Page i of N:`` and the line :func:`foveate.vlm.build_request` would give it.  Qwen2-VL: the
    processor's inputs too, unless ``inputs=False`` (then the pictures are encoded as for the other APIs)."""
    fmt = image_format.lower()
    if fmt not in MEDIA:
        raise ConfigError(f"image_format must be png or jpeg, got {image_format!r}")
    vrule, name = resolve(rule, model)
    plan = plan_document(selection, vrule, model=name)
    pictures, arrays, lines, pages = [], [], [], []
    for i, pic, arr, line in document_pictures(doc, plan):
        lines.append(line)
        pictures.append(pic)
        arrays.append(arr)
        pages.append(i)
    q = question if question is not None else (selection.query.text or "Describe what you see.")
    processor_inputs = vrule.inputs(arrays) if inputs and arrays else None  # a local model's processor, else None
    encoded = [] if processor_inputs is not None else [_b64(encode_image(a, fmt)) for a in arrays]
    body = vrule.body(name, SentPictures(lines, pictures, encoded, MEDIA[fmt]), q)
    return DocumentRequest(body, plan, arrays, lines, pages, q, vrule.api, name, processor_inputs, encoded, MEDIA[fmt])


def document_pictures(doc: DocumentTexture, plan: DocumentPlan) -> list[tuple[int, Picture, np.ndarray, str]]:
    """(page, picture, its RGB array, its line) for every picture of ``plan``, in page order; each line is ``Page i
    of N.`` and the line :func:`foveate.vlm.build_request` would give the picture."""
    out = []
    for i, p in plan.plans:
        cut = cut_pictures(doc.pages[i].image, p)
        for k, (pic, arr) in enumerate(zip(p.pictures, cut), 1):
            line = f"Page {i + 1} of {doc.num_pages}. " + picture_line(pic, k, len(p.pictures), p.image_size)
            out.append((i, pic, arr, line))
    return out


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")


def write_document_outputs(
    doc: DocumentTexture,
    selection: DocumentSelection,
    outdir: str | Path,
    *,
    vlm: VlmRule | str = "openai",
    max_crops: int | None = None,
) -> dict[str, Path]:
    """Write a document's ``selection.json`` (schema version 2, its ``crops`` the :class:`DocumentPlan`) to
    ``outdir``, and for every page the selection touches ``page-NNN/`` (1-based) with that page's single-image outputs
    (:func:`foveate.render.write_outputs`: ``selection.json`` version 1, ``overlay.png``, ``mosaic.png``,
    ``tokens.safetensors``, ``crops/``).  Returns the paths written, by name."""
    from ..render import write_outputs

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("page-[0-9][0-9][0-9]"):  # pages of an earlier selection written here
        if old.is_dir() and (old / "selection.json").is_file():
            for f in old.rglob("*"):
                if f.is_file():
                    f.unlink()
    written: dict[str, Path] = {}
    for i, sel in selection.pages:
        dest = out / f"page-{i + 1:03d}"
        write_outputs(doc.pages[i], sel, dest, vlm=vlm, max_crops=max_crops)
        written[f"page-{i + 1:03d}"] = dest
    body = selection.to_dict()
    body["crops"] = plan_document(selection, vlm).to_dict()
    (out / "selection.json").write_text(json.dumps(body, indent=1))
    written["selection"] = out / "selection.json"
    return written
