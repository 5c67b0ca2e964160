"""What a ranking means (indices by ascending score, ties in file order); ensembles. numpy only."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from baselines.core.errors import PipelineError


def ranking_order(scores: np.ndarray) -> np.ndarray:
    """Config indices from predicted fastest to slowest (ties keep file order)."""
    return np.argsort(np.asarray(scores), kind="stable")


def ranking_cell(scores: np.ndarray, top: int | None = None) -> str:
    """A TopConfigs cell: the `top` predicted-fastest indices joined by `;` (all if None)."""
    order = ranking_order(scores)
    return ";".join(map(str, order[:top].tolist()))


def standardized(scores: np.ndarray) -> np.ndarray:
    """Scores as float64 z-scores (distinct scores stay distinct); zeros when all are equal."""
    scores = np.asarray(scores, dtype=np.float64)
    std = float(scores.std())
    return (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)


def ensemble_scores(members: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """Per item, the mean of every member's standardized scores (`members[m][i]`); one: as is."""
    if not members:
        raise PipelineError("an ensemble needs at least one model; give at least one model folder")
    if len(members) == 1:
        return list(members[0])
    counts = {len(m) for m in members}
    if len(counts) > 1:
        raise PipelineError(
            f"the models scored different numbers of kernels or graphs {sorted(counts)}"
        )
    return [
        np.mean([standardized(member[i]) for member in members], axis=0)
        for i in range(len(members[0]))
    ]
