"""A layout run's graphs, reduced as its args say (training: deduplicated, sampled; ranking:
every configuration; both pruned to `prune_hops`), and its saved model and record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baselines.core import model_lookup
from baselines.core.errors import PipelineError
from baselines.core.format import OPCODE_VOCAB_SIZE
from baselines.core.run_files import read_run, read_runs
from baselines.layout.data import load_layout_split
from baselines.layout.graph import LayoutGraph
from baselines.layout.prune import prune_to_configurable


def prune_all(
    graphs: list[LayoutGraph], hops: int | None, log: Callable[[str], None] | None, what: str
) -> list[LayoutGraph]:
    if hops is None:
        if log:
            log(f"{what}: no pruning (whole graphs)")
        return graphs
    pruned = [prune_to_configurable(g, hops)[0] for g in graphs]
    if log:
        before = sum(g.num_nodes for g in graphs)
        after = sum(g.num_nodes for g in pruned)
        log(
            f"{what}: pruned to configurable nodes + {hops} hop(s): kept {after} of {before} "
            f"nodes, dropped {before - after}"
        )
    return pruned


def load_run_split(
    folder: Path,
    *,
    training: bool,
    prune_hops: int | None,
    max_files: int | None = None,
    drop_duplicates: bool = False,
    max_configs: int | None = None,
    seed: int = 0,
    log: Callable[[str], None] | None = print,
    cache_dir: Path | str | None = None,
) -> list[LayoutGraph]:
    """The graphs of `folder`, reduced for training or ranking (module docstring)."""
    graphs = load_layout_split(
        folder,
        max_files=max_files,
        max_configs=max_configs if training else None,
        seed=seed,
        drop_duplicates=drop_duplicates and training,
        log=log,
        cache_dir=cache_dir,
    )
    if log:
        configs = sum(g.num_configs for g in graphs)
        log(f"{folder}: {len(graphs)} graphs, {configs} configurations")
    return prune_all(graphs, prune_hops, log, str(folder))


def max_configs_note(
    max_configs: int | None, graphs: Sequence[LayoutGraph], distinct: bool = False
) -> str | None:
    """One line when `max_configs` exceeds every train/valid graph's configurations."""
    if max_configs is None or not graphs:
        return None
    most = max(g.num_configs for g in graphs)
    if max_configs <= most:
        return None
    kind = "distinct configurations" if distinct else "configurations"
    return (
        f"--max_configs {max_configs} exceeds the most {kind} of any train/valid graph "
        f"({most:,}): every configuration is kept"
    )


def read_layout_run(model_dir: Path) -> dict[str, Any]:
    """The layout run record of `model_dir`; a tile model is refused in one line."""
    record = read_run(model_dir, "layout", ("args", "model", "model_kwargs"))
    if not (Path(model_dir).expanduser() / "saved_model.pb").is_file():
        raise PipelineError(
            f"{model_dir}: layout run lacks its saved model (layout runs saved as "
            "weights.npz); retrain the model"
        )
    return record


def build_model(name: str, kwargs: dict[str, Any]):
    """The model `name` of layout/models.py, unbuilt; `kwargs` may hold num_configs, num_ops."""
    from baselines.layout import models

    kwargs = dict(kwargs)
    positional = (kwargs.pop("num_configs", None), kwargs.pop("num_ops", OPCODE_VOCAB_SIZE))
    return model_lookup.build_model(models, models.LayoutModel, name, positional, kwargs)


def restore_layout_model(model_dir: Path, record: dict[str, Any]):
    from baselines.core.saved_model import copy_saved_variables

    model = build_model(record["model"], record["model_kwargs"]).create_variables()
    copy_saved_variables(Path(model_dir).expanduser(), model)
    return model


def read_layout_models(text: str, flag: str) -> list[tuple[Path, dict[str, Any]]]:
    """(folder, run record) of each comma-separated model folder, all of one layout collection."""
    models = read_runs(text, flag, read_layout_run)
    kinds = {(r["source"], r["search"]) for _, r in models}
    if len(kinds) > 1:
        raise PipelineError(
            f"{flag}: the models are of different collections {sorted(kinds)}; "
            "an ensemble ranks one source and search"
        )
    return models
