"""GraphSAGE convolution over the op graph, both edge directions, tied or untied."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.layers import graph_ops
from baselines.core.layers.pointwise import PointwiseDense, build_denses


class SAGEConv(tf.keras.layers.Layer):
    """Computes `l2_normalize(act(W [h_v ; mean_{u ~ v} h_u]))`, u ~ v its producers and
    consumers, as `W_self a + W_neighbour b` (no concatenation; states [n, d] or [n, k, d]).
    `directed=True`: `W_self h_v + W_prod sum_prod h_u / deg(v) + W_cons sum_cons h_u / deg(v)`."""

    def __init__(
        self,
        units: int,
        activation="leaky_relu",
        normalize: bool = True,
        directed: bool = False,
        **kw,
    ):
        super().__init__(**kw)
        self.directed = directed
        self.self_dense = PointwiseDense(units, name="self")
        if directed:
            self.neighbour_denses = {
                "producers": PointwiseDense(units, use_bias=False, name="producers"),
                "consumers": PointwiseDense(units, use_bias=False, name="consumers"),
            }
        else:
            self.neighbour_dense = PointwiseDense(units, use_bias=False, name="neighbour")
        self.activation = tf.keras.activations.get(activation)
        self.normalize = normalize

    def build(self, input_shape=None) -> None:
        neighbours = self.neighbour_denses.values() if self.directed else [self.neighbour_dense]
        build_denses([self.self_dense, *neighbours], input_shape)
        super().build(input_shape)

    def call(self, graph: tfgnn.GraphTensor, states: tf.Tensor) -> tf.Tensor:
        inverse_degree = 1.0 / tf.maximum(graph_ops.bidirectional_degree(graph), 1.0)
        if self.directed:
            update = self.self_dense(states)
            for direction, dense in self.neighbour_denses.items():
                mean_part = graph_ops.adjacency(graph, direction, row_weight=inverse_degree)
                update += dense(graph_ops.propagate(mean_part, states))
            out = self.activation(update)
        else:
            mean_adjacency = graph_ops.bidirectional_adjacency(graph, row_weight=inverse_degree)
            neighbours = graph_ops.propagate(mean_adjacency, states)
            out = self.activation(self.self_dense(states) + self.neighbour_dense(neighbours))
        return tf.math.l2_normalize(out, axis=-1) if self.normalize else out
