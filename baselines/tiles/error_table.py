"""Top-K errors of saved models and their ensemble, overall and per program."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from baselines.core import metrics
from baselines.core.errors import PipelineError
from baselines.core.tables import cell, csv_table, markdown_table
from baselines.tiles.data import TileSplit

COLUMNS = (
    "model",
    "program",
    "kernels",
    "top1_err",
    "top5_err",
    "top10_err",
    "kaggle_score",
    "opa",
)


def error_table(
    split: TileSplit, scores_by_model: Mapping[str, Sequence[np.ndarray]]
) -> list[dict]:
    """Rows of COLUMNS: per model, "ALL" first, then each program by name."""
    if not split.has_labels:
        raise PipelineError(
            f"split {split.name} has no runtimes (hidden labels); evaluate on valid instead"
        )
    ids = [str(t) for t in split.tile_ids]
    runtimes = split.normalized_runtimes()
    rows = []
    for label, scores in scores_by_model.items():
        groups = [("ALL", metrics.summarize(ids, scores, runtimes))]
        groups += list(metrics.summarize_by_program(ids, scores, runtimes).items())
        for program, m in groups:
            figures = (m["1"], m["5"], m["10"], m["kaggle_score"], m["opa"])
            rows.append(dict(zip(COLUMNS, (label, program, int(m["kernels"]), *figures))))
    return rows


def markdown(rows: Sequence[dict]) -> str:
    return markdown_table(COLUMNS, [[cell(r[c]) for c in COLUMNS] for r in rows])


def csv_text(rows: Sequence[dict]) -> str:
    return csv_table(COLUMNS, [[cell(r[c]) for c in COLUMNS] for r in rows])
