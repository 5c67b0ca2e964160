"""Scores of saved layout models on a split folder, alone or as an ensemble.

    models = read_layout_models("out/model_a,out/model_b", "--dir")
    graphs, members = score_runs(models, root / "xla" / "default" / "valid")
    scores = ensemble_scores(members)  # core.ranking; one array per graph, lower = faster

`score_runs` reads the folder as each run was trained (pruned to its
`prune_hops`; every configuration kept, none dropped as a duplicate) once per
distinct pruning, and scores every configuration with each model. The
ensemble of several models (`core.ranking.ensemble_scores`) is, per graph, the
mean of each model's standardized scores. numpy only at import: TensorFlow
is imported when `score_runs` restores the models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines.core.errors import PipelineError
from baselines.layout.graph import LayoutGraph


def read_layout_models(text: str, flag: str) -> list[tuple[Path, dict[str, Any]]]:
    """(folder, run record) of each comma-separated model folder, all of one collection.

        models = read_layout_models("out/model_a,out/model_b", "--dirs")

    An empty item, a folder listed twice, a tile model and models of different
    sources or searches are refused in one line naming `flag`.
    """
    from baselines.core.run_files import model_dirs
    from baselines.layout.run_files import read_layout_run

    models = [(d, read_layout_run(d)) for d in model_dirs(text, flag)]
    kinds = {(r["source"], r["search"]) for _, r in models}
    if len(kinds) > 1:
        raise PipelineError(
            f"{flag}: the models are of different collections {sorted(kinds)}; "
            "an ensemble ranks one source and search"
        )
    return models


def score_runs(
    models: Sequence[tuple[Path, dict[str, Any]]],
    folder: Path,
    log: Callable[[str], None] | None = print,
    cache_dir: Path | str | None = None,
) -> tuple[list[LayoutGraph], list[list[np.ndarray]]]:
    """(the folder's graphs, each model's scores of every configuration of every graph).

        graphs, members = score_runs(read_layout_models(text, "--dir"), folder)

    Graphs come in file-name order, pruned as the first model's run says (every
    configuration kept), so their config indices are the files' own. With
    `cache_dir`, the folder is read through the memory-mapped split cache.
    """
    from baselines.layout.batching import prepare_graphs
    from baselines.layout.run_data import load_run_split
    from baselines.layout.run_files import restore_layout_model
    from baselines.layout.task import LayoutTrainArgs
    from baselines.layout.train_lib import GraphScorer

    by_hops: dict[int | None, tuple[list[LayoutGraph], list]] = {}
    members = []
    for model_dir, record in models:
        hops = LayoutTrainArgs.from_dict(record["args"]).prune_hops
        if hops not in by_hops:
            graphs = load_run_split(
                folder, training=False, prune_hops=hops, log=log, cache_dir=cache_dir
            )
            by_hops[hops] = (graphs, prepare_graphs(graphs))
        _, prepared = by_hops[hops]
        scorer = GraphScorer(restore_layout_model(model_dir, record))
        members.append([scorer.score(g) for g in prepared])
    graphs = next(iter(by_hops.values()))[0]
    return graphs, members
