"""The graphs a layout run trains, validates or ranks, reduced as its args say.

    train = load_run_split(root / "xla" / "default" / "train", args, training=True)
    test = load_run_split(root / "xla" / "default" / "test", args, training=False)

Training splits drop duplicate configurations (`drop_duplicates`) and sample
`max_configs`; splits to rank keep every configuration (a submission row lists
them all). Both are pruned to the configurable nodes' `prune_hops`-hop
neighbourhood (None: the whole graph), so a model ranks graphs shaped like
those it was trained on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

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
    """The graphs of `folder`, reduced for training or for ranking (module docstring).

    With `cache_dir`, read through the split's memory-mapped cache (`baselines.layout.cache`).
    """
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
    """One line when `max_configs` exceeds every graph's configurations (nothing was sampled).

        max_configs_note(5000, train + valid)
        # '--max_configs 5000 exceeds the most configurations of any train/valid graph
        #  (1,965): every configuration is kept'

    `graphs` are the loaded train and validation graphs (`distinct`: their
    duplicates were dropped first). None when the flag is unset or some graph
    has at least `max_configs` configurations (the flag then does cap).
    """
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
