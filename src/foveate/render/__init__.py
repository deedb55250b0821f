"""What a person and a VLM need from a selection: the overlay, the mosaic, the token tensors, the crops, JSON.

* ``overlay.png`` -- the relevance heat map over the image, with every token's outline coloured by level.
* ``mosaic.png`` -- the image as the VLM sees it: each region at the resolution of the token covering it.
* ``tokens.safetensors`` -- patches (K, 3, P, P) uint8 plus boxes, levels, positions, scores.
* ``crops/`` -- the fine tokens merged into at most N rectangles plus one thumbnail, each with its pixel size
  and the tokens a VLM with a given patch size would spend on it: a way to send fewer image tokens to a
  hosted VLM today, without changing the model.
* ``selection.json`` -- everything above as data (schema: docs/selection-schema.md).

``overlay`` (heat map, outlines, mosaic), ``crops`` (crop plans for hosted VLMs), ``outputs`` (the files).
"""

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    **{n: ".crops" for n in ("Crop", "CropPlan", "crop_images", "merge_boxes", "plan_crops", "vlm_tokens")},
    **{n: ".outputs" for n in ("png_bytes", "tokens_metadata", "write_outputs", "write_png")},
    **{n: ".overlay" for n in ("LEVEL_COLORS", "heatmap", "render_mosaic", "render_overlay")},
})
