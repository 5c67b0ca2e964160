"""Kernel batches: numpy dicts (`assemble_batch`) and the GraphTensor models read; config
features are NORMALIZED_CONFIG_DIM columns, or ARCHITECTURE_CONFIG_DIM (one dynamic width)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.keras_fit import BatchSource, vector_specs
from baselines.core.layers.graph_ops import edge_set
from baselines.tiles.analytic import NUM_ESTIMATES
from baselines.tiles.architecture import NUM_ARCHITECTURE
from baselines.tiles.data import CONFIG_FEAT_DIM, TileSplit
from baselines.tiles.features import (
    ANALYTIC_COLUMN,
    ARCHITECTURE_COLUMN,
    ARCHITECTURE_CONFIG_DIM,
    NORMALIZED_CONFIG_DIM,
    NORMALIZED_NODE_DIM,
)

BATCH_SIGNATURE = {
    **vector_specs(tf.int32, "op_sizes", "feed_sizes", "config_sizes", "op_opcode"),
    "op_feats": tf.TensorSpec([None, NORMALIZED_NODE_DIM], tf.float32),
    **vector_specs(tf.int32, "feed_source", "feed_target"),
    "config_feats": tf.TensorSpec([None, None], tf.float32),
    **vector_specs(tf.float32, "config_runtimes", "config_normalizers", "config_mask"),
    **vector_specs(tf.int32, "config_index"),
    **vector_specs(tf.string, "tile_id"),
}


def assemble_batch(
    split: TileSplit,
    kernel_ids: Sequence[int],
    config_slots: Sequence[np.ndarray],
    num_configs: int,
) -> dict[str, np.ndarray]:
    """Merges kernels into one batch dict; config_slots[i]: up to K indices, padded to K with -1."""
    op_sizes, feed_sizes, node_parts, edge_parts = [], [], [], []
    config_rows, config_pad = [], []
    node_base = 0
    for kid, slots in zip(kernel_ids, config_slots):
        n0, n1 = split.node_offsets[kid], split.node_offsets[kid + 1]
        e0, e1 = split.edge_offsets[kid], split.edge_offsets[kid + 1]
        c0 = split.config_offsets[kid]
        node_parts.append(slice(n0, n1))
        edge_parts.append(split.edge_index[e0:e1] + node_base)
        op_sizes.append(n1 - n0)
        feed_sizes.append(e1 - e0)
        node_base += n1 - n0
        slots = np.asarray(slots, dtype=np.int64)
        slots = np.concatenate([slots, np.full(num_configs - slots.shape[0], -1)])
        config_pad.append(slots < 0)
        config_rows.append(np.where(slots < 0, c0, c0 + slots))

    rows = np.concatenate(config_rows)
    pad = np.concatenate(config_pad)
    valid = (~pad).astype(np.float32)
    edges = np.concatenate(edge_parts) if edge_parts else np.zeros((0, 2), np.int32)
    normalizers = split.config_runtime_normalizers[rows].astype(np.float64)
    runtimes = split.config_runtime[rows] / normalizers
    config_index = np.where(
        pad, -1, rows - np.repeat(split.config_offsets[list(kernel_ids)], num_configs)
    )
    return {
        "op_sizes": np.asarray(op_sizes, np.int32),
        "feed_sizes": np.asarray(feed_sizes, np.int32),
        "config_sizes": np.full(len(kernel_ids), num_configs, np.int32),
        "op_opcode": np.concatenate([split.node_opcode[s] for s in node_parts]).astype(np.int32),
        "op_feats": np.concatenate([split.node_feat[s] for s in node_parts]).astype(np.float32),
        "feed_source": edges[:, 0].astype(np.int32),
        "feed_target": edges[:, 1].astype(np.int32),
        "config_feats": split.config_feat[rows].astype(np.float32) * valid[:, None],
        "config_runtimes": np.where(pad, -1.0, runtimes).astype(np.float32),
        "config_normalizers": np.where(pad, 1.0, normalizers).astype(np.float32),
        "config_mask": valid,
        "config_index": config_index.astype(np.int32),
        "tile_id": np.asarray(split.tile_ids[list(kernel_ids)]).astype(object).astype(bytes),
    }


def _component_ids(sizes: tf.Tensor) -> tf.Tensor:
    """[0, 0, 1, 2, 2, ...]: the component of each item, from per-component sizes."""
    ends = tf.cumsum(sizes)
    # Three ops: tf.repeat (and row_splits_to_segment_ids) add dozens, slowing tracing.
    return tf.searchsorted(ends, tf.range(tf.reduce_sum(sizes)), side="right", out_type=tf.int32)


def graph_from_batch(batch: dict[str, tf.Tensor]) -> tfgnn.GraphTensor:
    """The GraphTensor of a batch dict, one component per kernel: node sets `op` (`op`, `feats`),
    `config` (`feats`, `runtimes` = runtime / normalizer, `normalizers`, `mask`: 0 for padding,
    `index`: row in its file, -1 for padding) and `g` (one node per kernel, `tile_id`); edge
    sets `feed` (consumer u -> producer v of each `edge_index` row [u, v]), `g_op`, `g_config`."""
    op_sizes = batch["op_sizes"]
    config_sizes = batch["config_sizes"]
    num_ops = tf.reduce_sum(op_sizes)
    num_config_nodes = tf.reduce_sum(config_sizes)
    return tfgnn.GraphTensor.from_pieces(
        node_sets={
            "op": tfgnn.NodeSet.from_fields(
                sizes=op_sizes, features={"op": batch["op_opcode"], "feats": batch["op_feats"]}
            ),
            "config": tfgnn.NodeSet.from_fields(
                sizes=config_sizes,
                features={
                    "feats": batch["config_feats"],
                    "runtimes": batch["config_runtimes"],
                    "normalizers": batch["config_normalizers"],
                    "mask": batch["config_mask"],
                    "index": batch["config_index"],
                },
            ),
            "g": tfgnn.NodeSet.from_fields(
                sizes=tf.ones_like(op_sizes), features={"tile_id": batch["tile_id"]}
            ),
        },
        edge_sets={
            "feed": edge_set(
                batch["feed_sizes"], ("op", batch["feed_source"]), ("op", batch["feed_target"])
            ),
            "g_op": edge_set(
                op_sizes, ("g", _component_ids(op_sizes)), ("op", tf.range(num_ops, dtype=tf.int32))
            ),
            "g_config": edge_set(
                config_sizes,
                ("g", _component_ids(config_sizes)),
                ("config", tf.range(num_config_nodes, dtype=tf.int32)),
            ),
        },
    )


def to_tensors(batch: dict[str, np.ndarray]) -> dict[str, tf.Tensor]:
    return {k: tf.constant(v, dtype=BATCH_SIGNATURE[k].dtype) for k, v in batch.items()}


def dummy_batch(num_configs: int, architecture: bool = False) -> dict[str, np.ndarray]:
    """A two-op kernel with `num_configs` zero configs, to create a model's variables (with
    the architecture columns for a model that reads them)."""
    width = ARCHITECTURE_CONFIG_DIM if architecture else NORMALIZED_CONFIG_DIM
    return {
        "op_sizes": np.array([2], np.int32),
        "feed_sizes": np.array([1], np.int32),
        "config_sizes": np.array([num_configs], np.int32),
        "op_opcode": np.zeros(2, np.int32),
        "op_feats": np.zeros((2, NORMALIZED_NODE_DIM), np.float32),
        "feed_source": np.array([1], np.int32),
        "feed_target": np.array([0], np.int32),
        "config_feats": np.zeros((num_configs, width), np.float32),
        "config_runtimes": np.ones(num_configs, np.float32),
        "config_normalizers": np.ones(num_configs, np.float32),
        "config_mask": np.ones(num_configs, np.float32),
        "config_index": np.arange(num_configs, dtype=np.int32),
        "tile_id": np.array([b"dummy"], object),
    }


def batch_source(split: TileSplit) -> BatchSource:
    return BatchSource(
        num_configs=split.num_configs,
        assemble=lambda ids, slots, k: assemble_batch(split, ids, slots, k),
        signature=BATCH_SIGNATURE,
    )


def configs_per_kernel(graph: tfgnn.GraphTensor) -> tf.Tensor:
    return graph.node_sets["config"].total_size // graph.num_components


def config_features(graph: tfgnn.GraphTensor, num_configs) -> tf.Tensor:
    """The files' 24 config columns (normalized) as [batch, num_configs, 24]."""
    feats = graph.node_sets["config"]["feats"][:, :CONFIG_FEAT_DIM]
    return tf.reshape(feats, [-1, num_configs, CONFIG_FEAT_DIM])


def analytic_features(graph: tfgnn.GraphTensor, num_configs) -> tf.Tensor:
    """The analytic estimates of each config (`analytic.py`) as [batch, num_configs, 4]."""
    feats = graph.node_sets["config"]["feats"][:, ANALYTIC_COLUMN:NORMALIZED_CONFIG_DIM]
    return tf.reshape(feats, [-1, num_configs, NUM_ESTIMATES])


def architecture_features(graph: tfgnn.GraphTensor, num_configs) -> tf.Tensor:
    """The architecture inputs of each config (`architecture.py`) as [batch, num_configs, 14];
    an error if the split was normalized without them."""
    feats = graph.node_sets["config"]["feats"]
    check = tf.debugging.assert_equal(
        tf.shape(feats)[1],
        ARCHITECTURE_CONFIG_DIM,
        message="the model reads architecture inputs: normalize_split(..., architecture=True)",
    )
    with tf.control_dependencies([check]):
        feats = tf.identity(feats[:, ARCHITECTURE_COLUMN:ARCHITECTURE_CONFIG_DIM])
    return tf.reshape(feats, [-1, num_configs, NUM_ARCHITECTURE])
