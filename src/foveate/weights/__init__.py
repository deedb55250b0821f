"""Relevance weights as an artifact: what ``foveate train`` learns and ``select`` uses.

A weights file is a safetensors file whose JSON metadata names every tensor's rows (channels, query terms,
feature columns), so one file builds a :class:`~foveate.query.scorer.Scorer` for any channel layout, plus how it
was made (data sets, split, seed, objective, validation figures, foveate version).  ``load_weights`` takes:

* ``None`` or ``"default"`` -- the weights the package ships (``default.safetensors`` beside this file; the
  hand-set ones if the package has none);
* ``"handset"`` -- today's hand-set constants, for comparison;
* a path to a weights file (``foveate train -o weights.safetensors``);
* a :class:`Weights` (returned as is).
"""

from .weights import (DEFAULT_PATH, FORMAT, FORMAT_VERSION, Weights, clear_weights_cache, load_weights,
                      resolve_scorer)

__all__ = ["DEFAULT_PATH", "FORMAT", "FORMAT_VERSION", "Weights", "clear_weights_cache", "load_weights",
           "resolve_scorer"]
