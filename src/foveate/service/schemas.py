"""Request and response models of the HTTP API (they make the OpenAPI schema at ``/openapi.json``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..core.config import DEFAULT_BUDGET
from ..query.query import Query
from ..vlm.rules.registry import rules_help

TEXTURE_ID_PATTERN = r"^[0-9a-f]{32}-[0-9a-f]{16}$"
MAX_PROMPTS = 64
MAX_BUDGET = 100_000
Mode = Literal["auto", "quadtree", "topk", "uniform"]


class Error(BaseModel):
    """Every error: ``detail`` says what went wrong and what to do."""

    detail: str
    errors: list[dict] | None = Field(None, description="Request validation errors, one per bad field.")


class TextureOut(BaseModel):
    id: str = Field(description="Texture id: image content hash + encode config hash. Use it in the other routes.")
    created: bool | None = Field(
        None, description="Upload only: true if this upload encoded it (201), false if it was already stored (200)."
    )
    width: int
    height: int
    channels: list[str]
    absent: list[str] = Field(description="Channel groups stored as zeros (their source is not configured).")
    levels: int
    preset: str
    config_hash: str
    content_hash: str
    bytes: int = Field(description="Size of the stored texture.")
    encode_ms: float = Field(description="Time the encode took when the texture was made.")
    kind: Literal["image", "document"] = Field(
        "image", description="document: a PDF or multi-page TIFF, one texture per page (width, height: page 1's)."
    )
    pages: int | None = Field(None, description="A document's number of pages (null for an image).")


class QueryIn(BaseModel):
    """A query: text and/or SAM-style prompts in source-image pixels.  Empty = query-blind (saliency)."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = Field(
        None, max_length=20_000, description="Free text; over 2,000 characters is truncated, with a note."
    )
    points: list[tuple[float, float]] = Field(
        default_factory=list, max_length=MAX_PROMPTS, description="(x, y) pixel points."
    )
    point_labels: list[Literal[0, 1]] | None = Field(
        None, max_length=MAX_PROMPTS, description="Per point: 1 look here (default), 0 not here."
    )
    boxes: list[tuple[float, float, float, float]] = Field(
        default_factory=list, max_length=MAX_PROMPTS, description="(x0, y0, x1, y1) pixel boxes."
    )
    page: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="A document's id only: spend the whole budget on this page (1-based); points and boxes need it "
        "(they are in that page's pixels).",
    )

    def to_query(self) -> Query:
        return Query(
            text=self.text,
            points=tuple(self.points),
            point_labels=tuple(self.point_labels or ()),
            boxes=tuple(self.boxes),
        )


class SelectIn(QueryIn):
    budget: int = Field(DEFAULT_BUDGET, ge=1, le=MAX_BUDGET, description="Tokens to select.")
    mode: Mode = "auto"
    gist: bool = Field(True, description="topk: also spend tokens on the whole image at the coarsest level.")
    explain: bool = Field(False, description="Report which channels and query terms drove the chosen tokens.")


class PromptIn(QueryIn):
    """A question (it selects the tokens and ends the request) and the VLM rule to plan the pictures under."""

    text: str = Field(min_length=1, max_length=20_000, description="The question.")
    budget: int = Field(DEFAULT_BUDGET, ge=1, le=MAX_BUDGET, description="Tokens to select.")
    mode: Mode = "auto"
    gist: bool = Field(True, description="topk: also spend tokens on the whole image at the coarsest level.")
    vlm: str | None = Field(
        None, max_length=64, description=f"VLM rule (default: the model's, else openai): {rules_help()}."
    )
    model: str | None = Field(
        None,
        max_length=200,
        description="The model the request is for (claude-opus-4-7, gpt-5.2, gemini-3-flash-preview, "
        "Qwen/Qwen3-VL-8B-Instruct; `foveate models` lists the table): picks its provider's token rule unless `vlm` "
        "names one, and goes into the body.  An unknown name is a 422 listing the known families.",
    )
    format: Literal["png", "jpeg"] = Field("png", description="Picture encoding in the body.")
    max_crops: int | None = Field(None, ge=1, le=64, description="At most this many crops besides the context.")

    @field_validator("text")
    @classmethod
    def _a_question(cls, text: str) -> str:
        if not text.strip():  # as `foveate prompt -q "  "`: blanks select nothing and end the request with nothing
            raise ValueError("the question is empty: it selects the tokens and ends the request")
        return text


class PromptOut(BaseModel):
    """The request body to post to the VLM and its token ledger (``foveate prompt --json``)."""

    ledger: dict = Field(
        description="rule, model, image_size, image_tokens, plan_tokens, uniform_tokens, saving, "
        "fallback, pictures (kind, box, sent, seen, scale, option, tokens, line), ..."
    )
    request: dict = Field(
        description="The JSON body: OpenAI chat completions, Anthropic messages or Gemini "
        "generateContent; for the Qwen rules (api qwen2-vl) the chat messages (pictures in `pictures`)."
    )
    pictures: list[str] | None = Field(
        None,
        description="The Qwen rules: the pictures as PNG/JPEG data URLs, in message order, for the model's own "
        "processor.",
    )


class ImageSize(BaseModel):
    width: int
    height: int


class TokenOut(BaseModel):
    level: int
    row: int
    col: int
    box: list[int]
    center: list[float]
    grid: list[int]
    score: float
    gist: bool


class SelectionOut(BaseModel):
    """``Selection.to_dict()`` (schema: docs/selection-schema.md)."""

    schema_version: int
    texture_id: str
    image: ImageSize
    patch_size: int
    num_levels: int
    mode: str
    layout: str = "pyramid"
    uniform_scale: float | None = None
    budget: int
    num_tokens: int
    num_tiles_full: int
    query: dict
    level_counts: dict[str, int]
    timings_ms: dict[str, float]
    notes: list[str]
    explain: dict[str, float] | None = None
    evidence: list[dict] | None = Field(
        None, description="With explain: what drove the map, e.g. the likely answer lines and their probabilities."
    )
    tokens: list[TokenOut]


class CropOut(BaseModel):
    kind: Literal["context", "crop", "image", "uniform"]
    box: list[int] = Field(description="x0, y0, x1, y1 in source pixels.")
    sent: list[int] = Field(description="Width, height as sent.")
    seen: list[int] = Field(description="Width, height the model sees after the provider's own resize.")
    scale: float = Field(description="Source pixels per pixel the model sees.")
    option: str | None = Field(None, description="How it is sent (OpenAI: the detail, high or low).")
    tokens: int = Field(description="Tokens the provider bills for it.")
    keeps: int = Field(description="Selected tokens it shows at their selected scale.")
    image: str | None = Field(None, description="The picture as a PNG data URL (omitted with images=false).")


class CropsOut(BaseModel):
    """The crop plan under a VLM rule (``crops/crops.json``)."""

    rule: str
    model: str
    image_size: list[int]
    image_tokens: int = Field(description="The whole image as the provider takes it.")
    plan_tokens: int
    uniform_tokens: int = Field(description="The whole image resized uniformly to at most the plan's tokens.")
    saving: float
    fallback: bool = Field(
        description="Nothing cheaper than the whole image keeps every token's scale: the plan is the image."
    )
    kept_tokens: int
    selected_tokens: int
    image: CropOut
    uniform: CropOut
    pictures: list[CropOut]
    notes: list[str]
    timings_ms: dict[str, float]


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    preset: str
    pool: str
    workers: int
    queue: int = Field(description="Encode jobs running or waiting now.")
    queue_capacity: int
    store_entries: int
    cache_entries: int
