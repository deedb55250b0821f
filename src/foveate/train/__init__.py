"""Learning relevance from annotated data (``foveate train``): the answer ranker of the text term, the scorer's
channel and query-term weights and per-level prior, and the uniform-floor gate, fitted on a training split and
judged on a validation split (split by image), the test split looked at once.  See :mod:`.run`."""

from .run import TrainConfig, TrainResult, train

__all__ = ["TrainConfig", "TrainResult", "train"]
