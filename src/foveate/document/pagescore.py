"""The page score's constants that belong to the document package (the others, ``PAGE_LEXICAL``, ``PAGE_COSINE``
and ``PAGE_SHARE``, are in :mod:`foveate.weights.defaults`)."""

#: weight of the question's MiniLM cosine to a page's theme (the mean of its lines' embeddings) in the page score
#: (:func:`foveate.document.select.page_scores`): how much what the page as a whole is about counts beside its best
#: line.  Fitted with the other page constants on documents of training-split pages (``python
#: scripts/eval_documents.py --split train --fit``), chosen among the best there on documents of validation-split pages.
PAGE_THEME = 4.0
