"""GraphSAGE convolution over both directions of the op graph."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.tiles.layers import graph_ops


class SAGEConv(tf.keras.layers.Layer):
    """Computes `l2_normalize(act(W [h_v ; mean_{u ~ v} h_u]))` for every op node v.

    `u ~ v` ranges over producers and consumers of v (edges of `feed` taken in
    both directions). Node states may carry a config axis ([n, k, d] in
    early-join models); the convolution acts on the last axis.

        conv = SAGEConv(units=64)
        states = conv(graph, states)
    """

    def __init__(self, units: int, activation="leaky_relu", normalize: bool = True, **kw):
        super().__init__(**kw)
        self.dense = tf.keras.layers.Dense(units, activation=activation, name="combine")
        self.normalize = normalize

    def call(self, graph: tfgnn.GraphTensor, states: tf.Tensor) -> tf.Tensor:
        degree = tf.maximum(graph_ops.bidirectional_degree(graph), 1.0)
        neighbours = graph_ops.bidirectional_sum(graph, states)
        neighbours /= graph_ops.per_node(degree, neighbours)
        out = self.dense(tf.concat([states, neighbours], axis=-1))
        return tf.math.l2_normalize(out, axis=-1) if self.normalize else out
