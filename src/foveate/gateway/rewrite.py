"""Where the pictures are in each provider's request body, and what replaces them.  Pure JSON work: no pixels.

Three dialects, one per route:

* ``openai-chat`` (``POST /v1/chat/completions``): ``messages[-k]`` with ``role: user``; text parts
  ``{"type": "text"}``, pictures ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,...",
  "detail": ...}}``;
* ``openai-responses`` (``POST /v1/responses``): ``input`` items with ``role: user``; ``input_text`` parts, pictures
  ``{"type": "input_image", "image_url": "data:...", "detail": ...}``;
* ``anthropic`` (``POST /v1/messages``): ``messages[-k]`` with ``role: user``; ``text`` blocks, pictures
  ``{"type": "image", "source": {"type": "base64", "media_type": ..., "data": ...}}``.

Each also takes a PDF, re-planned as a document (its pages' pictures replace it): a chat ``{"type": "file", "file":
{"filename": ..., "file_data": "data:application/pdf;base64,..."}}`` part, a Responses ``{"type": "input_file",
"filename": ..., "file_data": "data:application/pdf;base64,..."}`` part, an Anthropic ``{"type": "document",
"source": {"type": "base64", "media_type": "application/pdf", "data": ...}}`` block.  A PDF by file id stays as it is,
one by URL is noted in ``Turn.urls`` like a picture's; any other file (plain text, a spreadsheet) is left alone.

The conversation's latest user turn is looked at (and, with ``replan_history``, the earlier user turns too: their
pictures are re-planned for the latest turn's question); a picture given by file id stays as it is, one given by
``http(s)://`` URL is noted in ``Turn.urls`` (the gateway fetches it only from ``--fetch-hosts``: :mod:`.fetch`).
A turn whose content is a plain string has no picture.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import FoveateError
from ..vlm.formats import anthropic_picture, chat_picture, data_url

#: the media type of the documents re-planned (other files pass as they are)
PDF_MEDIA = "application/pdf"
#: base64 of ``%PDF-``: a chat ``file_data`` given as bare base64 (without a data URL) that holds a PDF
PDF_B64 = "JVBERi0"

DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+)?(?:;[^,;]*?)*;base64,(?P<data>.*)$", re.S)


class BadBody(FoveateError):
    """A request body the gateway cannot read (answered 400 in the provider's error shape)."""


@dataclass
class Slot:
    """A base64 picture in the latest user turn: its place in ``content``, its text, its bytes and media type."""

    index: int
    b64: str
    raw: bytes
    media: str
    fetched: bool = False  # fetched from its URL (a picture that cannot be read is then a failed fetch, not a 400)
    document: bool = False  # a PDF: re-planned across its pages


@dataclass
class Turn:
    """The latest user turn: its ``content`` list (replaced in place), its text, its pictures."""

    content: list[Any]
    question: str
    slots: list[Slot] = field(default_factory=list)
    by_url: int = 0  # pictures given by URL or file id: passed through
    urls: list[tuple[int, str]] = field(default_factory=list)  # (index, URL) of pictures by http(s) URL


def _decode(b64: str, where: str) -> bytes:
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise BadBody(f"{where} is not valid base64") from None


def _data_url(url: Any, where: str) -> tuple[str, str] | None:
    """(media type, base64 text) of a data URL; ``None`` for any other URL; :class:`BadBody` for a broken one."""
    if not isinstance(url, str):
        raise BadBody(f"{where} must be a string")
    if not url.startswith("data:"):
        return None
    m = DATA_URL.match(url)
    if m is None:
        raise BadBody(f"{where} is a data URL without ';base64,': send the picture base64-encoded")
    return m.group("media") or "image/png", m.group("data")


def _pdf_data_url(data: Any, where: str) -> tuple[str, str] | bool:
    """(media, base64 text) of a PDF's data URL; ``False`` for anything else (another file type, not a data URL:
    left alone); :class:`BadBody` for a PDF's data URL without ``;base64,``."""
    if not isinstance(data, str) or not data[:40].lower().startswith("data:" + PDF_MEDIA):
        return False
    found = _data_url(data, where)
    return found if found is not None else False


def _user_turns(items: Any, name: str) -> list[dict[str, Any]]:
    """The user messages of ``items``, oldest first."""
    if not isinstance(items, list):
        raise BadBody(f"'{name}' must be an array of messages")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise BadBody(f"every item of '{name}' must be an object")
        if item.get("role") == "user":
            out.append(item)
    return out


class Dialect:
    """One provider's request format: find the latest user turn, and the parts that replace one picture."""

    name = ""
    text_types: tuple[str, ...] = ()
    list_key = "messages"

    def picture(self, part: dict[str, Any], where: str) -> tuple[str, str] | None | bool:
        """(media, base64) of a picture part; ``None`` for a picture by URL; ``False`` for a part that is none."""
        raise NotImplementedError

    def parts(self, line: str, media: str, b64: str, option: str | None) -> list[dict[str, Any]]:
        """The parts that introduce and carry one planned picture."""
        raise NotImplementedError

    def url(self, part: dict[str, Any]) -> str | None:
        """The URL of a picture part given by URL (``None`` for a file id)."""
        raise NotImplementedError

    def document(self, part: dict[str, Any], where: str) -> tuple[str, str] | None | bool:
        """(media, base64) of a base64 PDF part; ``None`` for a PDF by URL or file id; ``False`` for a part that is
        no PDF."""
        return False

    def document_url(self, part: dict[str, Any]) -> str | None:
        """The URL of a document part given by URL (``None`` for a file id)."""
        return None

    def users(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """The user messages of the body, oldest first."""
        return _user_turns(body.get(self.list_key), self.list_key)

    def turn(self, body: dict[str, Any]) -> Turn | None:
        """The latest user turn, or ``None`` when there is none or its content is plain text.  Raises
        :class:`BadBody` for a structure the provider would refuse too."""
        users = self.users(body)
        if not users or not isinstance(users[-1].get("content"), list):
            return None
        return self._read(users[-1], "the latest user message")

    def earlier(self, body: dict[str, Any]) -> list[Turn]:
        """The user turns before the latest one whose content is a list (a plain string has no picture), oldest
        first.  Their text is read but not used: their pictures are re-planned for the latest turn's question."""
        users = self.users(body)[:-1]
        return [
            self._read(m, f"user message {i + 1}") for i, m in enumerate(users) if isinstance(m.get("content"), list)
        ]

    def question(self, body: dict[str, Any]) -> str:
        """The latest user turn's text, whether its content is a list of parts or a plain string."""
        users = self.users(body)
        if not users:
            return ""
        content = users[-1].get("content")
        if isinstance(content, str):
            return content.strip()
        turn = self.turn(body)
        return turn.question if turn is not None else ""

    def _read(self, msg: dict[str, Any], name: str) -> Turn:
        content = msg["content"]
        texts: list[str] = []
        turn = Turn(content, "")
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                raise BadBody(f"every part of a user message's content must be an object (part {i})")
            kind = part.get("type")
            if kind in self.text_types:
                if not isinstance(part.get("text"), str):
                    raise BadBody(f"the text part {i} of {name} has no string 'text'")
                texts.append(part["text"])
                continue
            found = self.picture(part, f"the picture in part {i} of {name}")
            doc = False
            if found is False:
                found = self.document(part, f"the document in part {i} of {name}")
                doc = found is not False
            if found is None:
                turn.by_url += 1
                url = self.document_url(part) if doc else self.url(part)
                if url is not None and url.lower().startswith(("http://", "https://")):
                    turn.urls.append((i, url))
            elif found is not False:
                media, b64 = found  # type: ignore[misc]
                what = "document" if doc else "picture"
                turn.slots.append(Slot(i, b64, _decode(b64, f"the {what} in part {i} of {name}"), media, document=doc))
        turn.question = "\n".join(t.strip() for t in texts if t.strip())
        return turn


class OpenAIChat(Dialect):
    name = "openai-chat"
    text_types = ("text",)

    def picture(self, part, where):
        if part.get("type") != "image_url":
            return False
        return _data_url(self.url(part), where)

    def url(self, part):
        spec = part.get("image_url")
        return spec.get("url") if isinstance(spec, dict) else spec

    def document(self, part, where):
        if part.get("type") != "file":
            return False
        spec = part.get("file")
        if not isinstance(spec, dict):
            raise BadBody(f"{where} has no 'file' object")
        data = spec.get("file_data")
        if data is None:
            return None if spec.get("file_id") is not None else False
        if isinstance(data, str) and data.startswith(PDF_B64):  # bare base64 of a PDF
            return PDF_MEDIA, data
        return _pdf_data_url(data, where)

    def parts(self, line, media, b64, option):
        return chat_picture(line, media, b64, option)


class OpenAIResponses(Dialect):
    name = "openai-responses"
    text_types = ("input_text",)
    list_key = "input"

    def users(self, body):
        if isinstance(body.get("input"), str):  # a plain question, no picture
            return []
        return super().users(body)

    def picture(self, part, where):
        if part.get("type") != "input_image":
            return False
        if self.url(part) is None:  # a file id
            return None
        return _data_url(self.url(part), where)

    def url(self, part):
        return part.get("image_url")

    def document(self, part, where):
        if part.get("type") != "input_file":
            return False
        data = part.get("file_data")
        if data is None:
            if isinstance(part.get("file_url"), str) and _is_pdf_name(part.get("file_url"), part.get("filename")):
                return None
            return None if part.get("file_id") is not None else False
        return _pdf_data_url(data, where)

    def document_url(self, part):
        url = part.get("file_url")
        return url if isinstance(url, str) else None

    def parts(self, line, media, b64, option):
        return [
            {"type": "input_text", "text": line},
            {"type": "input_image", "image_url": data_url(media, b64), "detail": option or "auto"},
        ]


class AnthropicMessages(Dialect):
    name = "anthropic"
    text_types = ("text",)

    def picture(self, part, where):
        if part.get("type") != "image":
            return False
        source = part.get("source")
        if not isinstance(source, dict):
            raise BadBody(f"{where} has no 'source' object")
        if source.get("type") != "base64":
            return None
        data, media = source.get("data"), source.get("media_type")
        if not isinstance(data, str) or not isinstance(media, str):
            raise BadBody(f"{where} needs a string 'data' and 'media_type'")
        return media, data

    def url(self, part):
        source = part["source"]
        url = source.get("url") if source.get("type") == "url" else None
        return url if isinstance(url, str) else None

    def document(self, part, where):
        if part.get("type") != "document":
            return False
        source = part.get("source")
        if not isinstance(source, dict):
            raise BadBody(f"{where} has no 'source' object")
        citations = part.get("citations")
        if isinstance(citations, dict) and citations.get("enabled"):
            return False  # the answer's citations point into this block: it stays as it is
        kind = source.get("type")
        if kind == "base64":
            data, media = source.get("data"), source.get("media_type")
            if not isinstance(data, str) or not isinstance(media, str):
                raise BadBody(f"{where} needs a string 'data' and 'media_type'")
            return (media, data) if media.lower() == PDF_MEDIA else False
        return None if kind in ("url", "file") else False  # plain text or content blocks: no PDF

    def document_url(self, part):
        return self.url(part)

    def parts(self, line, media, b64, option):
        return anthropic_picture(line, media, b64)


def _is_pdf_name(url: Any, filename: Any) -> bool:
    """A Responses ``file_url`` that names a PDF (by the URL's path or the part's ``filename``)."""
    names = [str(url).split("?", 1)[0].split("#", 1)[0], str(filename or "")]
    return any(n.lower().endswith(".pdf") for n in names)


DIALECTS: dict[str, Dialect] = {d.name: d for d in (OpenAIChat(), OpenAIResponses(), AnthropicMessages())}


def replace(turn: Turn, replacements: dict[int, list[dict[str, Any]]]) -> None:
    """Replace the parts at the given indices of ``turn.content`` by their lists of parts (in place)."""
    out: list[Any] = []
    for i, part in enumerate(turn.content):
        out.extend(replacements.get(i, [part]))
    turn.content[:] = out
