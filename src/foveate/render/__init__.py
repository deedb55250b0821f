"""What a person and a VLM need from a selection: the overlay, the mosaic, the token tensors, the crops, JSON.

* ``overlay.png`` -- the image with every token's outline coloured by level, the relevance heat map where the
  relevance is high, and a bar under it with the caption (question, budget, tokens, model) and the legend.
* ``mosaic.png`` -- the image as the VLM sees it: each region at the resolution of the token covering it.
* :func:`save` writes them all to a folder, the pictures no larger than they are looked at (``max_side``).
* ``tokens.safetensors`` -- patches (K, 3, P, P) uint8 plus boxes, levels, positions, scores.
* ``crops/`` -- the pictures to send a hosted VLM under its own token rule (``foveate.vlm``): the page at a
  coarse scale plus crops at the scale their tokens were selected at, never more tokens than the whole image;
  ``crops.json`` is the plan's token ledger.
* ``selection.json`` -- everything above as data (schema: docs/selection-schema.md).

``overlay`` (heat map, outlines, mosaic), ``crops`` (crop plans for hosted VLMs), ``outputs`` (the files).
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{n: ".crops" for n in ("crop_images", "plan_crops")},
        **{
            n: ".outputs"
            for n in (
                "DEFAULT_MAX_SIDE",
                "FORMATS",
                "caption",
                "picture_bytes",
                "png_bytes",
                "save",
                "tokens_metadata",
                "write_outputs",
                "write_png",
            )
        },
        **{
            n: ".overlay"
            for n in ("LEVEL_COLORS", "heatmap", "legend_bar", "outline_width", "render_mosaic", "render_overlay")
        },
    },
)
