"""GraphSAGE convolution over both directions of the op graph."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.tiles.layers import graph_ops
from baselines.tiles.layers.pointwise import PointwiseDense, state_width


class SAGEConv(tf.keras.layers.Layer):
    """Computes `l2_normalize(act(W [h_v ; mean_{u ~ v} h_u]))` for every op node v.

    `u ~ v` ranges over producers and consumers of v (edges of `feed` taken in
    both directions). Node states may carry a config axis ([n, k, d] in
    early-join models); the convolution acts on the last axis. `W [a ; b]` is
    computed as `W_self a + W_neighbour b`, which avoids materializing the
    concatenation of two [n, k, d] tensors.

        conv = SAGEConv(units=64)
        states = conv(graph, states)
    """

    def __init__(self, units: int, activation="leaky_relu", normalize: bool = True, **kw):
        super().__init__(**kw)
        self.self_dense = PointwiseDense(units, name="self")
        self.neighbour_dense = PointwiseDense(units, use_bias=False, name="neighbour")
        self.activation = tf.keras.activations.get(activation)
        self.normalize = normalize

    def build(self, input_shape=None) -> None:
        """Creates the weights for states of shape `input_shape` ([..., d])."""
        width = state_width(input_shape)
        if width is not None:
            for dense in (self.self_dense, self.neighbour_dense):
                dense.build(tf.TensorShape([None, width]))
        super().build(input_shape)

    def call(self, graph: tfgnn.GraphTensor, states: tf.Tensor) -> tf.Tensor:
        inverse_degree = 1.0 / tf.maximum(graph_ops.bidirectional_degree(graph), 1.0)
        mean_adjacency = graph_ops.bidirectional_adjacency(graph, row_weight=inverse_degree)
        neighbours = graph_ops.propagate(mean_adjacency, states)
        out = self.activation(self.self_dense(states) + self.neighbour_dense(neighbours))
        return tf.math.l2_normalize(out, axis=-1) if self.normalize else out
