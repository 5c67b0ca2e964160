"""Scoring every configuration of layout graphs: chunked calls, evaluation, saved runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from baselines.core import metrics
from baselines.core.keras_fit import EpochBatches
from baselines.layout.batching import (
    BATCH_SIGNATURE,
    PreparedGraph,
    assemble_batch,
    config_fields,
    prepare_graphs,
    to_model_inputs,
    to_tensors,
)
from baselines.layout.graph import LayoutGraph
from baselines.layout.layout_args import LayoutTrainArgs
from baselines.layout.metrics import SLOWDOWN_KS, kendall_tau, slowdown_at_k
from baselines.layout.models import LayoutModel
from baselines.layout.reach import Reach, ReachScorer, applies, find_reach
from baselines.layout.run_data import load_run_split, restore_layout_model

SCORE_CHUNK = 256  # configurations per scoring call, at most
# Node-configuration slots per scoring call (`GraphScorer.chunk_for`): ~0.8 GB at hidden 128.
SCORE_SLOT_BUDGET = 2**18


class GraphScorer:
    """Scores every configuration of a prepared graph in chunks of at most `chunk` configurations
    and `slot_budget` node-configuration slots (`chunk_for`); attending models in one call. With
    `reach`, a ResModel (`reach.applies`) runs only the nodes its configurations reach
    (`reach.ReachScorer`, the same scores) when they are few enough (`Reach.pays`)."""

    def __init__(
        self,
        model: LayoutModel,
        chunk: int = SCORE_CHUNK,
        slot_budget: int = SCORE_SLOT_BUDGET,
        reach: bool = True,
    ):
        self.model, self.chunk, self.slot_budget = model, chunk, slot_budget
        self.reach = ReachScorer(model) if reach and applies(model) else None
        self._score = tf.function(
            lambda batch: model.forward(to_model_inputs(batch), None, training=False),
            input_signature=[BATCH_SIGNATURE],
        )
        # A split model's graph part runs once per graph (~15% of every call on a large graph).
        self.splits = model.splits_graph_part and not model.attends_across_configs
        self._graph_part = tf.function(
            lambda batch: model.graph_part(to_model_inputs(batch), training=False),
            input_signature=[BATCH_SIGNATURE],
        )
        self._config_part = None  # traced once the graph part's structure is known

    def score_batch(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """[graphs, configs] scores of an assembled batch (padding slots scored too)."""
        return self._score(to_tensors(batch)).numpy()

    def chunk_for(self, graph: PreparedGraph, reach: Reach | None = None) -> int:
        """Configurations per call: slot_budget // the model's `nodes_per_config` (the reach's
        rows when given), 1 to `chunk`."""
        if self.model.attends_across_configs:
            return max(graph.num_configs, 1)
        if reach is not None:
            nodes = reach.rows.size
        else:
            nodes = self.model.nodes_per_config(graph.node_feats.shape[0], graph.cfg_node.shape[0])
        return min(max(self.slot_budget // max(nodes, 1), 1), self.chunk)

    def score(self, graph: PreparedGraph) -> np.ndarray:
        """[configs] scores of every configuration of `graph`, in file order."""
        reach = None
        if self.reach is not None:
            reach = find_reach(graph, len(self.model.convs))
            reach = reach if reach.pays else None
        chunk = self.chunk_for(graph, reach)
        chunks = [
            np.arange(start, min(start + chunk, graph.num_configs))
            for start in range(0, graph.num_configs, chunk)
        ]
        if not chunks:
            return np.zeros(0, np.float32)
        tensors = to_tensors(assemble_batch([graph], [0], [chunks[0]], len(chunks[0])))
        if reach is not None:
            return self.reach.score(graph, reach, tensors, chunks)
        part = self._graph_part(tensors) if self.splits else None
        parts = []
        for slots in chunks:
            if slots is not chunks[0]:
                # The graph's fields stay; only its configurations' change.
                tensors.update(to_tensors(config_fields(graph, slots, len(slots))))
            parts.append(self._call(tensors, part)[0])
        return np.concatenate(parts)

    def _call(self, tensors: dict[str, tf.Tensor], part) -> np.ndarray:
        """[graphs, configs] scores: `forward`, or `config_part` given the graph part."""
        if part is None:
            return self._score(tensors).numpy()
        if self._config_part is None:
            # Rows vary by graph; the widths stay static (layers split kernels by them).
            part_signature = tf.nest.map_structure(
                lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), part
            )
            self._config_part = tf.function(
                lambda batch, part: self.model.config_part(
                    to_model_inputs(batch), part, training=False
                ),
                input_signature=[BATCH_SIGNATURE, part_signature],
            )
        return self._config_part(tensors, part).numpy()


def evaluate_graphs(model: LayoutModel, graphs: Sequence[PreparedGraph]) -> dict[str, Any]:
    """Kendall tau (per graph and mean), pooled OPA and mean slowdown@k over every configuration."""
    scorer = GraphScorer(model)
    taus, pairs, slowdowns = {}, np.zeros(2), {k: [] for k in SLOWDOWN_KS}
    for g in graphs:
        scores = scorer.score(g)
        metrics.require_finite_scores([g.graph_id], [scores], "layout graphs")
        taus[g.graph_id] = kendall_tau(scores, g.raw_runtimes)
        pairs += metrics.kernel_opa(scores, g.raw_runtimes)
        for k in SLOWDOWN_KS:
            slowdowns[k].append(slowdown_at_k(scores, g.raw_runtimes, k))
    defined = [t for t in taus.values() if np.isfinite(t)]
    return {
        "kendall_tau": float(np.mean(defined)) if defined else float("nan"),
        "tau_per_graph": taus,
        "opa": float(pairs[0] / max(pairs[1], 1.0)),
        "slowdown": {str(k): float(np.mean(v)) for k, v in slowdowns.items()},
        "graphs": len(graphs),
    }


class ValidationKendallTau(tf.keras.callbacks.Callback):
    """Adds `val_kendall_tau` (mean Kendall tau-b over `val_batches`' fixed sample) to the logs."""

    def __init__(self, val_batches: EpochBatches):
        super().__init__()
        self.val_batches = val_batches
        self.scorer: GraphScorer | None = None

    def on_train_begin(self, logs=None) -> None:
        # The trainer's model: the conductor builds it under the strategy's scope.
        self.scorer = GraphScorer(self.model.tile_model)

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        if logs is None or "val_opa" not in logs:
            return
        taus: dict[str, float] = {}
        for batch in self.val_batches.batches(0):
            scores = self.scorer.score_batch(batch)
            runtimes = batch["config_runtimes"].reshape(scores.shape)
            mask = batch["config_mask"].reshape(scores.shape) > 0
            for graph_id, s, r, m in zip(batch["graph_id"], scores, runtimes, mask):
                taus[graph_id.decode()] = kendall_tau(s[m], r[m])
        defined = [t for t in taus.values() if np.isfinite(t)]
        logs["val_kendall_tau"] = float(np.mean(defined)) if defined else float("nan")


def score_runs(
    models: Sequence[tuple[Path, dict[str, Any]]],
    folder: Path,
    log: Callable[[str], None] | None = print,
    cache_dir: Path | str | None = None,
    max_files: int | None = None,
) -> tuple[list[LayoutGraph], list[list[np.ndarray]]]:
    """(the folder's graphs, the first `max_files` when given, each model's scores of all their
    configurations), in file order."""
    by_hops: dict[int | None, tuple[list[LayoutGraph], list]] = {}
    members = []
    for model_dir, record in models:
        hops = LayoutTrainArgs.from_dict(record["args"]).prune_hops
        if hops not in by_hops:
            graphs = load_run_split(
                folder,
                training=False,
                prune_hops=hops,
                max_files=max_files,
                log=log,
                cache_dir=cache_dir,
            )
            by_hops[hops] = (graphs, prepare_graphs(graphs))
        _, prepared = by_hops[hops]
        scorer = GraphScorer(restore_layout_model(model_dir, record))
        members.append([scorer.score(g) for g in prepared])
    graphs = next(iter(by_hops.values()))[0]
    return graphs, members
