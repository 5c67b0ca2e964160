"""Residual GCN convolution over both directions of the op graph."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.tiles.layers import graph_ops
from baselines.tiles.layers.pointwise import PointwiseDense, state_width


class ResGCNConv(tf.keras.layers.Layer):
    """Computes `h + act(W (D^-1/2 (A + I) D^-1/2 h))` for every op node.

    A is the symmetric adjacency of `feed`; the self loop and the residual keep
    a node's own state when it has no neighbours. Works on [n, d] or [n, k, d].

        conv = ResGCNConv(units=64)    # units must equal the state width
        states = conv(graph, states)
    """

    def __init__(self, units: int, activation="leaky_relu", **kw):
        super().__init__(**kw)
        self.dense = PointwiseDense(units, activation=activation, name="transform")

    def build(self, input_shape=None) -> None:
        """Creates the weights for states of shape `input_shape` ([..., units])."""
        width = state_width(input_shape)
        if width is not None:
            self.dense.build(tf.TensorShape([None, width]))
        super().build(input_shape)

    def call(self, graph: tfgnn.GraphTensor, states: tf.Tensor) -> tf.Tensor:
        inv_sqrt = tf.math.rsqrt(graph_ops.bidirectional_degree(graph) + 1.0)
        normalized = graph_ops.bidirectional_adjacency(
            graph,
            row_weight=inv_sqrt,
            column_weight=inv_sqrt,
            self_weight=tf.ones_like(inv_sqrt),
        )
        return states + self.dense(graph_ops.propagate(normalized, states))
