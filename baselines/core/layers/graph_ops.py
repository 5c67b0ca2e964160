"""Message passing over `feed` for node values [n, d] or [n, k, d], one sparse-dense matmul:
"producers" sums the ops a node reads, "consumers" the ops reading it, "both" A + A^T."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

DIRECTIONS = ("both", "producers", "consumers")


def edge_set(sizes, source: tuple[str, tf.Tensor], target: tuple[str, tf.Tensor]) -> tfgnn.EdgeSet:
    """An edge set of `sizes` edges per component; `source`, `target`: (node set, node ids)."""
    return tfgnn.EdgeSet.from_fields(
        sizes=sizes, adjacency=tfgnn.Adjacency.from_indices(source=source, target=target)
    )


def bidirectional_degree(
    graph: tfgnn.GraphTensor, edge_set: str = "feed", edge_weight: tf.Tensor | None = None
) -> tf.Tensor:
    """Number (or total `edge_weight`) of in- plus out-edges of every node, float32 [n]."""
    adj = graph.edge_sets[edge_set].adjacency
    n = graph.node_sets[adj.source_name].total_size
    ones = tf.ones_like(adj.source, dtype=tf.float32) if edge_weight is None else edge_weight
    return tf.math.unsorted_segment_sum(ones, adj.source, n) + tf.math.unsorted_segment_sum(
        ones, adj.target, n
    )


def adjacency(
    graph: tfgnn.GraphTensor,
    direction: str = "both",
    row_weight: tf.Tensor | None = None,
    column_weight: tf.Tensor | None = None,
    self_weight: tf.Tensor | None = None,
    edge_weight: tf.Tensor | None = None,
    edge_set: str = "feed",
) -> tf.SparseTensor:
    """Sparse [n, n] matrix R (M + S) C, M the `direction`'s adjacency: P (u -> v for every edge),
    P^T ("consumers") or P + P^T ("both"), `edge_weight` [edges] for its 1s; S =
    diag(self_weight), R = diag(row_weight), C = diag(column_weight), each absent when None."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    adj = graph.edge_sets[edge_set].adjacency
    n = graph.node_sets[adj.source_name].total_size
    ones = tf.ones_like(adj.source, dtype=tf.float32) if edge_weight is None else edge_weight
    parts = []  # (rows, columns, values)
    if direction in ("both", "producers"):
        parts.append((adj.source, adj.target, ones))
    if direction in ("both", "consumers"):
        parts.append((adj.target, adj.source, ones))
    if self_weight is not None:
        nodes = tf.range(n, dtype=adj.source.dtype)
        parts.append((nodes, nodes, self_weight))
    rows, cols, values = (tf.concat(list(column), 0) for column in zip(*parts))
    if row_weight is not None:
        values *= tf.gather(row_weight, rows)
    if column_weight is not None:
        values *= tf.gather(column_weight, cols)
    indices = tf.cast(tf.stack([rows, cols], 1), tf.int64)
    shape = tf.cast(tf.stack([n, n]), tf.int64)
    return tf.SparseTensor(indices, values, shape)


def bidirectional_adjacency(
    graph: tfgnn.GraphTensor,
    row_weight: tf.Tensor | None = None,
    column_weight: tf.Tensor | None = None,
    self_weight: tf.Tensor | None = None,
    edge_set: str = "feed",
) -> tf.SparseTensor:
    """Sparse [n, n] matrix R (A + A^T + S) C: `adjacency` in both directions."""
    return adjacency(graph, "both", row_weight, column_weight, self_weight, edge_set=edge_set)


def propagate(matrix: tf.SparseTensor, values: tf.Tensor) -> tf.Tensor:
    """matrix @ values for values [n, ...]: each node sums its weighted neighbours."""
    shape = tf.shape(values)
    flat = tf.reshape(values, [shape[0], -1])
    return tf.reshape(tf.sparse.sparse_dense_matmul(matrix, flat), shape)
