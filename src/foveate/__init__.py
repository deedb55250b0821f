"""foveate: decide which parts of an image a vision-language model should look at, and how sharply.

Encode an image once into a mipmapped multi-channel texture (:func:`encode`), then answer many queries
cheaply (:func:`select`), each with a fixed budget of tokens at the level of detail each region needs.

Importing the package is cheap: every name below is loaded from its module on first use (PEP 562), so torch,
OpenCV, onnxruntime and scikit-image load only when something needs them (``tests/test_imports.py``).  Each registry
registers its built-ins where it is defined (``foveate.channels.registry``, ``foveate.query.terms``,
``foveate.vlm.rules.registry``).
"""

from ._lazy import lazy_exports

__version__ = "0.3.0.dev0"

_ERRORS = (
    "BudgetError",
    "ConfigError",
    "DeviceError",
    "DocumentDecodeError",
    "DocumentEmptyError",
    "DocumentEncryptedError",
    "DocumentError",
    "DocumentTooLongError",
    "FoveateError",
    "ImageDecodeError",
    "ImageError",
    "ImageTooLargeError",
    "NoImageSetError",
    "QueryError",
    "TextureFormatError",
    "TextureKindError",
    "UnsupportedInputError",
    "VideoError",
)

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **{name: ".core.errors" for name in _ERRORS},
        "ChannelGroup": ".channels.base",
        "list_groups": ".channels.registry",
        "register_group": ".channels.registry",
        "EncodeConfig": ".core.config",
        "SelectConfig": ".core.config",
        "load_image": ".core.io",
        "Texture": ".core.texture",
        "encode": ".document.texture",
        "DocumentTexture": ".document.texture",
        "encode_document": ".document.texture",
        "select_document": ".document.select",
        "FoveatePredictor": ".predictor",
        "Query": ".query.query",
        "Scorer": ".query.scorer",
        "Weights": ".weights.weights",
        "load_weights": ".weights.weights",
        "Selection": ".selection",
        "select": ".selection",
        "FrameReader": ".video",
        "VideoConfig": ".video",
        "VideoPredictor": ".video",
        "VideoState": ".video",
        "read_frames": ".video",
    },
)
