"""Message passing over `feed` for node values of any rank ([n, d] or [n, k, d]).

Neighbour aggregation is one sparse-dense matmul with the (weighted)
bidirectional adjacency: early-join states [n, k, d] are viewed as [n, k * d],
so all configurations share one pass over the edges and no [edges, k, d]
message tensor is ever built.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn


def bidirectional_degree(graph: tfgnn.GraphTensor, edge_set: str = "feed") -> tf.Tensor:
    """Number of in- plus out-neighbours of every node, float32 [n]."""
    adj = graph.edge_sets[edge_set].adjacency
    n = graph.node_sets[adj.source_name].total_size
    ones = tf.ones_like(adj.source, dtype=tf.float32)
    return tf.math.unsorted_segment_sum(ones, adj.source, n) + tf.math.unsorted_segment_sum(
        ones, adj.target, n
    )


def bidirectional_adjacency(
    graph: tfgnn.GraphTensor,
    row_weight: tf.Tensor | None = None,
    column_weight: tf.Tensor | None = None,
    self_weight: tf.Tensor | None = None,
    edge_set: str = "feed",
) -> tf.SparseTensor:
    """Sparse [n, n] matrix R (A + A^T + S) C with per-node row/column scales.

    A has a 1 at (u, v) for every edge; S is diag(self_weight) (no self loops
    when None); R = diag(row_weight), C = diag(column_weight) (identity when None).
    Folding the scales into the matrix saves whole passes over [n, k, d] states.
    """
    adj = graph.edge_sets[edge_set].adjacency
    n = graph.node_sets[adj.source_name].total_size
    rows = tf.concat([adj.source, adj.target], 0)
    cols = tf.concat([adj.target, adj.source], 0)
    values = tf.ones_like(rows, dtype=tf.float32)
    if self_weight is not None:
        nodes = tf.range(n, dtype=rows.dtype)
        rows = tf.concat([rows, nodes], 0)
        cols = tf.concat([cols, nodes], 0)
        values = tf.concat([values, self_weight], 0)
    if row_weight is not None:
        values *= tf.gather(row_weight, rows)
    if column_weight is not None:
        values *= tf.gather(column_weight, cols)
    indices = tf.cast(tf.stack([rows, cols], 1), tf.int64)
    shape = tf.cast(tf.stack([n, n]), tf.int64)
    return tf.SparseTensor(indices, values, shape)


def propagate(adjacency: tf.SparseTensor, values: tf.Tensor) -> tf.Tensor:
    """adjacency @ values for values [n, ...]: each node sums its weighted neighbours."""
    shape = tf.shape(values)
    flat = tf.reshape(values, [shape[0], -1])
    return tf.reshape(tf.sparse.sparse_dense_matmul(adjacency, flat), shape)
