"""What a ranking means, for every writer of rankings: tile and layout predictions,
ensembles, the training results CSV and the Kaggle join.

A ranking lists configuration indices (a file's own row numbers), predicted
fastest first: ascending score, since a lower score means predicted faster.
Equal scores keep file order, the lower index first, so a ranking is a function
of the scores alone.

    ranking_order(np.array([0.5, 0.1, 0.5]))      # array([1, 0, 2])
    ranking_cell(np.array([0.5, 0.1, 0.5]), 2)    # '1;0', a TopConfigs cell

numpy only: the submission tools import it without TensorFlow.
"""

from __future__ import annotations

import numpy as np


def ranking_order(scores: np.ndarray) -> np.ndarray:
    """Config indices from predicted fastest to slowest (ties keep file order)."""
    return np.argsort(np.asarray(scores), kind="stable")


def ranking_cell(scores: np.ndarray, top: int | None = None) -> str:
    """A TopConfigs cell: the `top` predicted-fastest indices joined by `;` (all if None)."""
    order = ranking_order(scores)
    return ";".join(map(str, order[:top].tolist()))
