"""Residual GCN convolution over the op graph, both edge directions, tied or untied."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.layers import graph_ops
from baselines.core.layers.pointwise import PointwiseDense, build_denses


class ResGCNConv(tf.keras.layers.Layer):
    """Computes `h + act(W (D^-1/2 (A + I) D^-1/2 h))`, A symmetric; `directed=True` gives each
    part its own weights, `h + act(W_prod N P h + W_cons N P^T h + W_self N h)`, `N x = D^-1/2
    x D^-1/2` (upstream's directed ResGCN). `units` is the state width; [n, d] or [n, k, d]."""

    def __init__(self, units: int, activation="leaky_relu", directed: bool = False, **kw):
        super().__init__(**kw)
        self.directed = directed
        if directed:
            # The bias sits in the self part only: one bias, as the undirected layer has.
            self.part_denses = {
                "producers": PointwiseDense(units, use_bias=False, name="producers"),
                "consumers": PointwiseDense(units, use_bias=False, name="consumers"),
                "self": PointwiseDense(units, name="self"),
            }
            self.activation = tf.keras.activations.get(activation)
        else:
            self.dense = PointwiseDense(units, activation=activation, name="transform")

    def build(self, input_shape=None) -> None:
        denses = list(self.part_denses.values()) if self.directed else [self.dense]
        build_denses(denses, input_shape)
        super().build(input_shape)

    def call(
        self, graph: tfgnn.GraphTensor, states: tf.Tensor, degree: tf.Tensor | None = None
    ) -> tf.Tensor:
        """Computes the layer on `graph`'s `states`; `degree` [n], when given, stands for the
        nodes' in- plus out-edge counts in D (a subgraph's nodes keep their whole graph's)."""
        if degree is None:
            degree = graph_ops.bidirectional_degree(graph)
        inv_sqrt = tf.math.rsqrt(degree + 1.0)
        if not self.directed:
            normalized = graph_ops.bidirectional_adjacency(
                graph,
                row_weight=inv_sqrt,
                column_weight=inv_sqrt,
                self_weight=tf.ones_like(inv_sqrt),
            )
            return states + self.dense(graph_ops.propagate(normalized, states))
        # N h = D^-1 h for the self part; the scale broadcasts over [n, k, d] too.
        self_scale = tf.reshape(tf.square(inv_sqrt), [-1] + [1] * (states.shape.rank - 1))
        update = self.part_denses["self"](states * self_scale)
        for direction in ("producers", "consumers"):
            normalized = graph_ops.adjacency(
                graph, direction, row_weight=inv_sqrt, column_weight=inv_sqrt
            )
            update += self.part_denses[direction](graph_ops.propagate(normalized, states))
        return states + self.activation(update)
