"""Array type aliases for annotations (``numpy.typing``): what a function takes and returns, by dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

#: any NumPy array (shape and dtype in the docstring)
Array = npt.NDArray[Any]
F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]
