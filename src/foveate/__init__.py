"""foveate: decide which parts of an image a vision-language model should look at, and how sharply.

Encode an image once into a mipmapped multi-channel texture (:func:`encode`), then answer many queries
cheaply (:func:`select`), each with a fixed budget of tokens at the level of detail each region needs.
"""

from .core.channels import ChannelGroup, list_groups, register_group
from .core.config import EncodeConfig, SelectConfig
from .core.errors import (
    BudgetError,
    ConfigError,
    DeviceError,
    FoveateError,
    ImageDecodeError,
    ImageError,
    ImageTooLargeError,
    NoImageSetError,
    QueryError,
    TextureFormatError,
    UnsupportedInputError,
    VideoError,
)
from .core.io import load_image
from .core.texture import Texture, encode
from .predictor import FoveatePredictor
from .query.query import Query
from .query.scorer import Scorer
from .selection import Selection, select
from .video import FrameReader, VideoConfig, VideoPredictor, VideoState, read_frames

# the text, emphasis and semantic channel groups and query terms register themselves on import; this order is the
# order of foveate.query.terms.QUERY_TERMS (prompt, text, emphasis, semantic), which the scorer's weights follow
from .query import text as _text, emphasis as _emphasis, semantic as _semantic  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "BudgetError", "ChannelGroup", "ConfigError", "DeviceError", "EncodeConfig", "FoveateError",
    "FoveatePredictor", "ImageDecodeError", "ImageError", "ImageTooLargeError", "NoImageSetError", "Query",
    "QueryError", "Scorer", "SelectConfig", "Selection", "Texture", "TextureFormatError",
    "UnsupportedInputError", "VideoConfig", "VideoError", "VideoPredictor", "VideoState", "FrameReader", "encode",
    "list_groups", "load_image", "read_frames", "register_group", "select",
]
