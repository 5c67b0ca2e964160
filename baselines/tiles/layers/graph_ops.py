"""Message passing over `feed` for node values of any rank ([n, d] or [n, k, d])."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn


def _expand_like(x: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """Appends unit axes to a [n] tensor so it broadcasts against `like`."""
    return tf.reshape(x, tf.concat([tf.shape(x), tf.ones([tf.rank(like) - 1], tf.int32)], 0))


def bidirectional_degree(graph: tfgnn.GraphTensor, edge_set: str = "feed") -> tf.Tensor:
    """Number of in- plus out-neighbours of every node, float32 [n]."""
    adj = graph.edge_sets[edge_set].adjacency
    n = graph.node_sets[adj.source_name].total_size
    ones = tf.ones_like(adj.source, dtype=tf.float32)
    return tf.math.unsorted_segment_sum(ones, adj.source, n) + tf.math.unsorted_segment_sum(
        ones, adj.target, n
    )


def bidirectional_sum(
    graph: tfgnn.GraphTensor, values: tf.Tensor, edge_set: str = "feed", edge_weight=None
) -> tf.Tensor:
    """For every node, the sum of `values` over its in- and out-neighbours."""
    adj = graph.edge_sets[edge_set].adjacency
    n = tf.shape(values)[0]
    from_target = tf.gather(values, adj.target)
    from_source = tf.gather(values, adj.source)
    if edge_weight is not None:
        from_target *= _expand_like(edge_weight, from_target)
        from_source *= _expand_like(edge_weight, from_source)
    return tf.math.unsorted_segment_sum(from_target, adj.source, n) + (
        tf.math.unsorted_segment_sum(from_source, adj.target, n)
    )


def per_node(x: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """Broadcastable view of a per-node [n] tensor against node values `like`."""
    return _expand_like(x, like)
