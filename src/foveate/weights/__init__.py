"""The relevance model as an artifact: what ``foveate train`` learns and ``select`` uses.

``defaults`` (the hand-set constants, in one place) and ``weights`` (:class:`Weights`, its typed parts
:class:`TextTerm` and :class:`FloorGate`, the file format, :func:`load_weights`).  A weights file is a safetensors file
whose JSON metadata names every tensor's rows (channels, query terms, feature columns), so one file builds a
:class:`~foveate.query.scorer.Scorer` for any channel layout, plus how it was made (data sets, split, seed, objective,
validation figures, foveate version).  ``load_weights`` takes:

* ``None`` or ``"default"`` -- the weights the package ships (``default.safetensors`` beside this file; the
  hand-set ones if the package has none);
* ``"handset"`` -- the hand-set constants, for comparison;
* a path to a weights file (``foveate train -o weights.safetensors``);
* a :class:`Weights` (returned as is).

Names load on first use (:mod:`foveate._lazy`), so ``foveate.weights.defaults`` is read without torch.
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        n: ".weights"
        for n in (
            "DEFAULT_PATH",
            "FORMAT",
            "FORMAT_VERSION",
            "FloorGate",
            "TextTerm",
            "Weights",
            "WeightsSpec",
            "clear_weights_cache",
            "load_weights",
        )
    },
)
