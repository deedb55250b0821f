"""The ``text`` channel group (encode time, once per image): OCR lines and words (:mod:`.ocr`, where the gate finds
text: :mod:`.gate`), MiniLM embeddings of the lines (:mod:`.embed`), and the ``text`` / ``text_density`` channels
painted from them (:mod:`.group`).  The ``text`` query term that reads them is :mod:`foveate.query.text`."""
