"""What of a record gets embedded (its title, if any, on a line before its text), and the
embedding as every layer passes it (`Vector`)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

# An embedding as the model computes it (float32, unit length), the index stores it and a
# `vector` column is read back; a batch of them is a 2-d array of the same type.
Vector = NDArray[np.float32]


def embedding_text(title: str | None, text: str) -> str:
    return f"{title}\n{text}" if title else text
