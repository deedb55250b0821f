"""Request formats: how a request body carries pictures, each introduced by one short line, the question last.
Each VLM rule names the format its provider takes (:attr:`foveate.vlm.rules.base.VlmRule.format`).

* ``openai`` -- chat completions (``image_url`` parts with data URLs; ``detail`` where the plan chose one); also
  what OpenAI-compatible servers (vLLM, llama.cpp) take.
* ``anthropic`` -- messages (base64 ``image`` blocks; ``max_tokens`` is a required field).
* ``gemini`` -- generateContent (``inline_data`` parts).
* ``qwen2-vl`` -- the processor's chat-template messages; the pixels travel as processor inputs
  (:meth:`foveate.vlm.rules.qwen.Qwen2VL.inputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .picture import Picture

#: ``max_tokens`` of an Anthropic body (a required field of the messages API)
ANTHROPIC_MAX_TOKENS = 1024


def data_url(media: str, b64: str) -> str:
    """A picture as a data URL: ``data:MEDIA;base64,DATA``."""
    return f"data:{media};base64,{b64}"


def chat_picture(line: str, media: str, b64: str, option: str | None) -> list[dict[str, Any]]:
    """One picture of a chat-completions message: its line, then an ``image_url`` part (``detail`` where the plan
    chose one).  The gateway's rewrite (:mod:`foveate.gateway.rewrite`) builds the same parts."""
    image_url = {"url": data_url(media, b64)}
    if option is not None:
        image_url["detail"] = option
    return [{"type": "text", "text": line}, {"type": "image_url", "image_url": image_url}]


def anthropic_picture(line: str, media: str, b64: str) -> list[dict[str, Any]]:
    """One picture of an Anthropic message: its line, then a base64 ``image`` block."""
    return [
        {"type": "text", "text": line},
        {"type": "image", "source": {"type": "base64", "media_type": media, "data": b64}},
    ]


@dataclass(frozen=True)
class SentPictures:
    """The pictures a body carries, in order: each one's line, its plan entry and its base64 data of type ``media``
    (no data where a processor takes the pixels instead: ``qwen2-vl``)."""

    lines: Sequence[str]
    pictures: Sequence[Picture]
    encoded: Sequence[str]
    media: str

    def each(self) -> zip[tuple[str, Picture, str]]:
        """``(line, picture, data)`` per encoded picture."""
        return zip(self.lines, self.pictures, self.encoded)


@dataclass(frozen=True)
class RequestFormat:
    """A request body format, named by its ``api``."""

    api: str
    description: str

    def body(self, model: str, sent: SentPictures, question: str) -> dict[str, Any]:
        """The JSON body for ``sent`` (pictures already encoded as base64), each introduced by its line, then
        ``question``."""
        raise NotImplementedError


class OpenAIChat(RequestFormat):
    def body(self, model: str, sent: SentPictures, question: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for line, pic, data in sent.each():
            content += chat_picture(line, sent.media, data, pic.option)
        return {
            "model": model,
            "messages": [{"role": "user", "content": content + [{"type": "text", "text": question}]}],
        }


class AnthropicMessages(RequestFormat):
    def body(self, model: str, sent: SentPictures, question: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for line, _, data in sent.each():
            content += anthropic_picture(line, sent.media, data)
        return {
            "model": model,
            "max_tokens": ANTHROPIC_MAX_TOKENS,
            "messages": [{"role": "user", "content": content + [{"type": "text", "text": question}]}],
        }


class GeminiContents(RequestFormat):
    """generateContent; a picture sent with a ``media_resolution`` level (Gemini 3) carries it on its own part, beside
    ``inline_data`` (``"media_resolution": {"level": "MEDIA_RESOLUTION_LOW"}``: the per-part setting takes precedence
    over the request's)."""

    def body(self, model: str, sent: SentPictures, question: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        for line, pic, data in sent.each():
            part: dict[str, Any] = {"inline_data": {"mime_type": sent.media, "data": data}}
            if pic.option is not None:
                part["media_resolution"] = {"level": f"MEDIA_RESOLUTION_{pic.option.upper()}"}
            parts += [{"text": line}, part]
        return {"contents": [{"role": "user", "parts": parts + [{"text": question}]}]}


class ProcessorMessages(RequestFormat):
    def body(self, model: str, sent: SentPictures, question: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for line in sent.lines:
            content += [{"type": "text", "text": line}, {"type": "image"}]
        return {
            "model": model,
            "messages": [{"role": "user", "content": content + [{"type": "text", "text": question}]}],
        }


OPENAI_CHAT = OpenAIChat("openai", "OpenAI chat completions (and OpenAI-compatible servers)")
ANTHROPIC_MESSAGES = AnthropicMessages("anthropic", "Anthropic messages")
GEMINI_CONTENTS = GeminiContents("gemini", "Gemini generateContent")
QWEN_PROCESSOR = ProcessorMessages("qwen2-vl", "chat-template messages; the pixels as the processor's inputs")

#: the formats by ``api`` name (:func:`foveate.vlm.payload.build_body`)
FORMATS: dict[str, RequestFormat] = {
    f.api: f for f in (OPENAI_CHAT, ANTHROPIC_MESSAGES, GEMINI_CONTENTS, QWEN_PROCESSOR)
}
