"""foveate: decide which parts of an image a vision-language model should look at, and how sharply.

Encode an image once into a mipmapped multi-channel texture (:func:`encode`), then answer many queries
cheaply (:func:`select`), each with a fixed budget of tokens at the level of detail each region needs.
"""

from .channels import ChannelGroup, list_groups, register_group
from .config import EncodeConfig, SelectConfig
from .errors import (
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
from .io import load_image
from .predictor import FoveatePredictor
from .scoring import Query, Scorer
from .selection import Selection, select
from .texture import Texture, encode
from .video import FrameReader, VideoConfig, VideoPredictor, VideoState, read_frames
from . import emphasis, semantic, text  # noqa: F401  (register the text and semantic groups and query terms)

__version__ = "0.1.0"

__all__ = [
    "BudgetError", "ChannelGroup", "ConfigError", "DeviceError", "EncodeConfig", "FoveateError",
    "FoveatePredictor", "ImageDecodeError", "ImageError", "ImageTooLargeError", "NoImageSetError", "Query",
    "QueryError", "Scorer", "SelectConfig", "Selection", "Texture", "TextureFormatError",
    "UnsupportedInputError", "VideoConfig", "VideoError", "VideoPredictor", "VideoState", "FrameReader", "encode",
    "list_groups", "load_image", "read_frames", "register_group", "select",
]
