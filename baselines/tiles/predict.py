"""Compiled scoring of every configuration of every kernel in one trace: large kernels chunked,
small ones packed (`plan_calls`), padding dropped, so a score never depends on its call."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import tqdm

from baselines.core.metrics import require_finite_scores
from baselines.core.ranking import ranking_cell
from baselines.core.submission import TILE_PREFIX
from baselines.tiles.data import TileSplit
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import (
    BATCH_SIGNATURE,
    assemble_batch,
    configs_per_kernel,
    dummy_batch,
    graph_from_batch,
    to_tensors,
)
from baselines.tiles.model_base import EarlyJoinModel, TileModel
from baselines.tiles.model_builder import restore_model
from baselines.tiles.run_records import read_run_for_model


@dataclasses.dataclass(frozen=True)
class Call:
    """One scoring call: kernel ids, each with a [start, stop) range of configs."""

    ranges: tuple[tuple[int, int, int], ...]
    slots: int  # configuration slots per kernel in this call


def plan_calls(
    num_configs: np.ndarray,
    num_nodes: np.ndarray,
    max_elements: int,
    max_configs: int,
    max_kernels: int = 256,
    early_join: bool = True,
) -> list[Call]:
    """Splits large kernels into chunks and packs small ones (by configuration count), every
    config once: kernels x slots <= max_configs, and ops x slots <= max_elements (early join;
    at least one config) or ops <= max_elements (late join, cut by max_configs only)."""
    calls: list[Call] = []
    small: list[int] = []
    for i, (c, n) in enumerate(zip(num_configs.tolist(), num_nodes.tolist())):
        chunk = max(1, min(max_configs, max_elements // max(n, 1))) if early_join else max_configs
        if c > chunk:
            calls += [
                Call(((i, s, min(s + chunk, c)),), min(chunk, c - s)) for s in range(0, c, chunk)
            ]
        else:
            small.append(i)
    small.sort(key=lambda i: (-int(num_configs[i]), i))
    group: list[int] = []
    nodes = 0
    for i in small:
        slots = int(num_configs[group[0]]) if group else int(num_configs[i])
        n = int(num_nodes[i])
        fits = (
            len(group) < max_kernels
            and (nodes + n) * (slots if early_join else 1) <= max_elements
            and (len(group) + 1) * slots <= max_configs
        )
        if group and not fits:
            calls.append(_packed(group, num_configs))
            group, nodes = [], 0
        group.append(i)
        nodes += n
    if group:
        calls.append(_packed(group, num_configs))
    return calls


def _packed(group: list[int], num_configs: np.ndarray) -> Call:
    return Call(tuple((i, 0, int(num_configs[i])) for i in group), int(num_configs[group[0]]))


class ConfigScorer:
    """Scores configurations with `model.forward` under one compiled function: `max_elements`
    bounds ops x slots (early join) or ops (late join) per call, `max_configs` slots."""

    def __init__(
        self, model: TileModel, max_elements: int = 1 << 15, max_configs: int | None = None
    ):
        self.model = model
        self.early_join = isinstance(model, EarlyJoinModel)
        self.max_elements = max_elements
        self.max_configs = max_configs or (8192 if self.early_join else 16384)
        self.traces = 0
        self._score = tf.function(
            self._score_batch, input_signature=[BATCH_SIGNATURE], autograph=False
        )

    def _score_batch(self, batch: dict[str, tf.Tensor]) -> tf.Tensor:
        self.traces += 1  # Runs only while tracing.
        graph = graph_from_batch(batch)
        return self.model.forward(graph, configs_per_kernel(graph), training=False)

    def warm_up(self) -> None:
        """Traces the scoring function on a tiny batch (e.g. while data loads)."""
        self._score(to_tensors(dummy_batch(2, self.model.architecture_inputs)))

    def score_calls(self, split: TileSplit, calls: list[Call], progress=None) -> list[np.ndarray]:
        scores = [np.empty(int(c), np.float32) for c in split.num_configs]

        def run(call: Call) -> np.ndarray:
            ids = [i for i, _, _ in call.ranges]
            slots = [np.arange(start, stop) for _, start, stop in call.ranges]
            return self._score(to_tensors(assemble_batch(split, ids, slots, call.slots))).numpy()

        # Two calls in flight: one call's ops are mostly a chain; another uses the idle core.
        with ThreadPoolExecutor(max_workers=2) as pool:
            for call, out in zip(calls, pool.map(run, calls)):
                for row, (i, start, stop) in enumerate(call.ranges):
                    scores[i][start:stop] = out[row, : stop - start]
                    if progress is not None and stop == split.num_configs[i]:
                        progress.update(1)
        return scores

    def plan(self, split: TileSplit) -> list[Call]:
        """The calls that score every configuration of `split` once, within this scorer's bounds."""
        return plan_calls(
            split.num_configs,
            split.num_nodes,
            self.max_elements,
            self.max_configs,
            early_join=self.early_join,
        )

    def score_kernel(self, split: TileSplit, i: int) -> np.ndarray:
        """Scores of all configurations of kernel i, in file order."""
        one = split.replace(
            tile_ids=split.tile_ids[i : i + 1],
            node_offsets=split.node_offsets[i : i + 2],
            edge_offsets=split.edge_offsets[i : i + 2],
            config_offsets=split.config_offsets[i : i + 2],
        )
        return self.score_split(one, progress=False)[0]

    def score_split(
        self, split: TileSplit, progress: bool = True, desc: str | None = None
    ) -> list[np.ndarray]:
        """Scores of every kernel's configurations, in file order."""
        calls = self.plan(split)
        with tqdm.tqdm(
            total=len(split), desc=desc or f"rank {split.name}", unit="kernel", disable=not progress
        ) as bar:
            return self.score_calls(split, calls, bar)


@dataclasses.dataclass(frozen=True)
class SavedRanker:
    """A saved model, its run record and its train statistics; scores raw splits."""

    model_dir: Path
    record: dict[str, Any]
    stats: FeatureStats
    scorer: ConfigScorer

    @classmethod
    def load(cls, model_dir: Path | str, record: dict[str, Any] | None = None) -> SavedRanker:
        """Rebuilds the run's model and copies its weights in (record read if not given)."""
        model_dir = Path(model_dir).expanduser()
        if record is None:
            record, stats = read_run_for_model(model_dir)
        else:
            stats = FeatureStats.from_dict(record["feature_stats"])
        return cls(model_dir, record, stats, ConfigScorer(restore_model(model_dir, record)))

    def normalized(self, raw: TileSplit) -> TileSplit:
        """An unnormalized split normalized with the train statistics and the derived
        columns the model reads."""
        model = self.scorer.model
        return self.stats.normalize_split(
            raw, estimates=model.analytic_inputs, architecture=model.architecture_inputs
        )

    def score(self, raw: TileSplit, progress: bool = True) -> list[np.ndarray]:
        """Scores of every configuration of an unnormalized split, in file order."""
        return self.scorer.score_split(self.normalized(raw), progress=progress)


def ranking_rows(
    tile_ids: Sequence[str], scores: Sequence[np.ndarray], top: int = 5
) -> list[tuple[str, str]]:
    """`ID,TopConfigs` rows: `tile:xla:<id>` and its `top` predicted-fastest configs."""
    require_finite_scores(tile_ids, scores)
    return [(f"{TILE_PREFIX}{tid}", ranking_cell(s, top)) for tid, s in zip(tile_ids, scores)]
