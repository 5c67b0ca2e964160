"""GraphSAGE convolution over the op graph, both edge directions, tied or untied."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.layers import graph_ops
from baselines.core.layers.pointwise import PointwiseDense, state_width


class SAGEConv(tf.keras.layers.Layer):
    """Computes `l2_normalize(act(W [h_v ; mean_{u ~ v} h_u]))` for every op node v.

    `u ~ v` ranges over producers and consumers of v (edges of `feed` taken in
    both directions). Node states may carry a config axis ([n, k, d] in
    early-join models); the convolution acts on the last axis. `W [a ; b]` is
    computed as `W_self a + W_neighbour b`, which avoids materializing the
    concatenation of two [n, k, d] tensors.

    With `directed=True` the neighbour term is split by direction, each part
    with its own weights: `W_self h_v + W_prod sum_{producers} h_u / deg(v) +
    W_cons sum_{consumers} h_u / deg(v)` (deg = producers + consumers), so the
    layer can tell an op's inputs from its users (upstream's `directed`).
    Tied weights (W_prod = W_cons) give back the undirected layer.
    """

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

    def _denses(self) -> list[PointwiseDense]:
        if self.directed:
            return [self.self_dense, *self.neighbour_denses.values()]
        return [self.self_dense, self.neighbour_dense]

    def build(self, input_shape=None) -> None:
        """Creates the weights for states of shape `input_shape` ([..., d])."""
        width = state_width(input_shape)
        if width is not None:
            for dense in self._denses():
                dense.build(tf.TensorShape([None, width]))
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
