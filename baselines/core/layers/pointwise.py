"""A Dense layer for inputs of any rank through one MatMul, and state-width lookup."""

from __future__ import annotations

import tensorflow as tf


class PointwiseDense(tf.keras.layers.Dense):
    """`tf.keras.layers.Dense` on the last axis of `x` (rank >= 2): one MatMul between reshapes."""

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
    """The last dimension of a node-state shape; None for a graph's (scalar) shape."""
    if input_shape is None:
        return None
    shape = tf.TensorShape(input_shape)
    if shape.rank is None or shape.rank == 0:
        return None
    return shape[-1]


def build_denses(denses, input_shape) -> None:
    """Builds each dense for node states of shape `input_shape` (not for a graph's shape)."""
    width = state_width(input_shape)
    if width is not None:
        for dense in denses:
            dense.build(tf.TensorShape([None, width]))
