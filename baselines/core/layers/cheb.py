"""Chebyshev spectral graph convolution (ChebNet) on the symmetrized op graph."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.layers import graph_ops
from baselines.core.layers.pointwise import PointwiseDense, build_denses


def scaled_laplacian(graph: tfgnn.GraphTensor) -> tf.SparseTensor:
    """Sparse L~ = 2 L / lambda_max - I = -D^-1/2 A D^-1/2 (lambda_max = 2), L the normalized
    Laplacian of A = P + P^T without self loops (PyG's `get_laplacian`); isolated rows are zero."""
    adj = graph.edge_sets["feed"].adjacency
    not_loop = tf.cast(tf.not_equal(adj.source, adj.target), tf.float32)
    degree = graph_ops.bidirectional_degree(graph, edge_weight=not_loop)
    # where(): rsqrt(0) is inf, and inf * 0 would put NaN into isolated rows.
    inv_sqrt = tf.where(degree > 0, tf.math.rsqrt(tf.maximum(degree, 1e-12)), 0.0)
    return graph_ops.adjacency(
        graph, "both", row_weight=-inv_sqrt, column_weight=inv_sqrt, edge_weight=not_loop
    )


class ChebConv(tf.keras.layers.Layer):
    """Computes `act(sum_{k<K} T_k(L~) h W_k + b)` on `scaled_laplacian`, T_0 h = h, T_1 h = L~ h,
    T_k h = 2 L~ T_{k-1} h - T_{k-2} h (PyG's `ChebConv`, "sym", lambda_max 2): order K mixes
    up to K - 1 hops. Linear unless `activation` is given; works on [n, d] and [n, k, d]."""

    def __init__(self, units: int, order: int = 3, activation=None, **kw):
        super().__init__(**kw)
        if isinstance(order, bool) or not isinstance(order, int) or order < 1:
            raise ValueError(f"cheb_order must be an integer of at least 1, got {order!r}")
        self.units = units
        self.order = order
        # The bias once, on T_0: sum_k (T_k h W_k) + b.
        self.order_denses = [
            PointwiseDense(units, use_bias=k == 0, name=f"order_{k}") for k in range(order)
        ]
        self.activation = tf.keras.activations.get(activation)

    def build(self, input_shape=None) -> None:
        build_denses(self.order_denses, input_shape)
        super().build(input_shape)

    def call(self, graph: tfgnn.GraphTensor, states: tf.Tensor) -> tf.Tensor:
        out = self.order_denses[0](states)
        if self.order > 1:
            laplacian = scaled_laplacian(graph)
            previous, current = states, graph_ops.propagate(laplacian, states)
            out += self.order_denses[1](current)
            for dense in self.order_denses[2:]:
                previous, current = (
                    current,
                    2.0 * graph_ops.propagate(laplacian, current) - previous,
                )
                out += dense(current)
        return self.activation(out)
