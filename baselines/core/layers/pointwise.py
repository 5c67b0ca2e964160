"""A Dense layer for inputs of any rank through one MatMul, and state-width lookup."""

from __future__ import annotations

import tensorflow as tf


class PointwiseDense(tf.keras.layers.Dense):
    """Computes `act(x W + b)` on the last axis of `x`, for x of rank 2 or more.

    Same variables and results as `tf.keras.layers.Dense`. For rank > 2 Keras
    goes through `tf.tensordot`, whose shape bookkeeping adds dozens of ops per
    layer and slows tracing; here one MatMul and two reshapes do the work. The
    bias is added after the reshape back, which keeps the MatMul a plain one
    (a fused MatMul + BiasAdd is compiled anew for every call shape on oneDNN
    CPU builds).
    """

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        out = pointwise_matmul(inputs, self.kernel)
        if self.use_bias:
            out = tf.nn.bias_add(out, self.bias)
        return self.activation(out)  # Keras maps activation=None to the identity


def pointwise_matmul(x: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """x [..., d] times kernel [d, u] on the last axis, as one MatMul between two reshapes."""
    rank = x.shape.rank
    out = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), kernel)
    if rank != 2:
        # tf.slice, not shape[:-1]: indexing costs milliseconds of Python per trace.
        leading = tf.slice(tf.shape(x), [0], [rank - 1])
        out = tf.reshape(out, tf.concat([leading, [kernel.shape[-1]]], 0))
    return out


def state_width(input_shape) -> int | None:
    """The last dimension of a node-state shape; None for a graph's (scalar) shape.

    Graph layers are called as `layer(graph, states)`, so Keras builds them with
    the graph's shape, which does not give the state width; their sublayers are
    then built on the first call. Passing the states' shape to `build` (as
    `TileModel.build` does) creates the weights without any call.
    """
    if input_shape is None:
        return None
    shape = tf.TensorShape(input_shape)
    if shape.rank is None or shape.rank == 0:
        return None
    return shape[-1]
