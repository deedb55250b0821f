"""Matching a question against OCR lines (pure, per query): tokens with case, punctuation, accents and common
OCR confusions folded, fuzzy word and quoted-phrase similarity (:func:`lexical_scores`), and the semantic
similarity of the MiniLM embeddings (:func:`match_lines`: ``line score = max(lexical, semantic)``)."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .embed import embed_query

if TYPE_CHECKING:
    from .layout import TextIndex

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN_RE = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_QUOTED_RE = re.compile(r"\"([^\"]+)\"|“([^”]+)”|«([^»]+)»|(?<!\w)'([^']+)'(?!\w)")
#: OCR confusions folded before fuzzy comparison (both sides): letters that PP-OCR and humans mix up with digits
_FOLD = str.maketrans({"o": "0", "i": "1", "l": "1", "s": "5", "z": "2", "b": "8", "g": "9"})
_FOLD_PAIRS = (("rn", "m"), ("vv", "w"), ("cl", "d"))
#: Words that carry the question's form, not its subject (ignored by the lexical match, kept for the semantic
#: one).  Words inside quotes are never dropped.
STOPWORDS = frozenset(
    """
a an the and or but if of to in on at by for from with without into onto about as is are was were be been being
am do does did done have has had having it its it's this that these those there here what which who whom whose
when where why how i me my we our you your he him his she her they them their can could would should will shall
may might must please tell show give find get let see look read me us any some all each every much many more most
value values field fields entry entries heading title say says said written write wrote whats what's
""".split()
)


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


def token_similarity(
    query_tokens: Sequence[str], words: Sequence[str], folded: Sequence[str] | None = None
) -> np.ndarray:
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
# Lines against a query

#: A line counts as a match when its score (max of lexical and semantic) reaches this.
MATCH_THRESHOLD = 0.5
#: Cosine similarity (MiniLM) mapped linearly to a semantic score: SEM_LOW -> 0, SEM_HIGH and above -> SEM_MAX.
#: SEM_MAX < 1: a paraphrase can carry a query on its own, but an exact lexical match of the words asked for
#: outranks lines that are merely similar in meaning (CAT-B-EXPENSES for "CAT-A-EXPENSES").
SEM_LOW, SEM_HIGH, SEM_MAX = 0.25, 0.60, 0.8


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


_QUESTIONS_LOCK = threading.Lock()
#: questions whose line scores a text index keeps (:func:`question_scores`)
RECENT_QUESTIONS = 16


def question_scores(index: TextIndex, text: str) -> tuple[np.ndarray, np.ndarray]:
    """(N,) float32 each: every line's lexical match (:func:`lexical_scores`) and MiniLM cosine to the question --
    what the hand-set match, the answer ranker and the extent model all read.  Kept with the index for the last
    :data:`RECENT_QUESTIONS` questions (read-only arrays), so a new question scores the page's lines once."""
    with _QUESTIONS_LOCK:
        recent = index.cache.setdefault("questions", OrderedDict())
        hit = recent.get(text)
    if hit is not None:
        return hit
    lex = lexical_scores(index, QueryText.parse(text))
    cos = (index.embeddings @ embed_query(text)).astype(np.float32) if len(index.lines) else np.zeros(0, np.float32)
    lex.setflags(write=False)
    cos.setflags(write=False)
    with _QUESTIONS_LOCK:
        recent[text] = (lex, cos)
        while len(recent) > RECENT_QUESTIONS:
            recent.popitem(last=False)
    return lex, cos


def semantic_scores(cosine: np.ndarray) -> np.ndarray:
    """MiniLM cosines mapped to semantic scores: :data:`SEM_LOW` -> 0, :data:`SEM_HIGH` and above -> :data:`SEM_MAX`."""
    return (SEM_MAX * np.clip((cosine - SEM_LOW) / (SEM_HIGH - SEM_LOW), 0.0, 1.0)).astype(np.float32)


def match_lines(index: TextIndex, text: str) -> LineMatch:
    lex, cos = question_scores(index, text)
    sem = semantic_scores(cos)
    return LineMatch(lex, cos, sem, np.maximum(lex, sem), [])
