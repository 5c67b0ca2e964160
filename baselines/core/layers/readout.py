"""Per-kernel pooling of op states and the per-configuration scoring head."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.layers.pointwise import PointwiseDense, pointwise_matmul

# TF-GNN pooling reductions a kernel's op states can be pooled with (upstream's `reduction`).
REDUCTIONS = ("sum", "mean", "max")


def folding_pays(num_configs, config_width: int, units: int):
    """Whether `ConfigScoringHead.score_gated` folds its first layer per kernel: folding costs
    c * g * u per kernel, saves g * (c + u) per config (c config width, g gate width, u units)."""
    return num_configs * (config_width + units) > config_width * units


class KernelPooling(tf.keras.layers.Layer):
    """Pools op states to one vector per kernel, the reductions concatenated: [n, d] to
    [b, d * len(reductions)], [n, k, d] to [b, k, d * len(reductions)]."""

    def __init__(self, reductions: Sequence[str] = ("sum",), **kw):
        super().__init__(**kw)
        bad = [r for r in reductions if r not in REDUCTIONS]
        if bad or not reductions:
            raise ValueError(
                f"reduction must be one or more of {', '.join(REDUCTIONS)} joined by '+', "
                f"got {'+'.join(reductions)!r}"
            )
        self.reductions = tuple(reductions)

    def call(self, graph: tfgnn.GraphTensor, states: tf.Tensor) -> tf.Tensor:
        pooled = [
            tfgnn.pool_nodes_to_context(graph, "op", r, feature_value=states)
            for r in self.reductions
        ]
        return tf.concat(pooled, axis=-1)


class ConfigScoringHead(tf.keras.layers.Layer):
    """Maps [b, k, d] joint kernel/config states to [b, k] scores (lower = faster) with an MLP."""

    def __init__(self, hidden_dims: Sequence[int], activation="leaky_relu", dropout=0.0, **kw):
        super().__init__(**kw)
        self.hidden = [
            PointwiseDense(d, activation=activation, name=f"hidden_{i}")
            for i, d in enumerate(hidden_dims)
        ]
        self.dropout = tf.keras.layers.Dropout(dropout)
        self.out = PointwiseDense(1, name="score")

    def build(self, input_shape) -> None:
        width = tf.TensorShape(input_shape)[-1]
        for layer in [*self.hidden, self.out]:
            layer.build(tf.TensorShape([None, width]))
            width = layer.units
        super().build(input_shape)

    def call(self, states: tf.Tensor, training=None) -> tf.Tensor:
        return self._from_first(self._layers()[0](states), training)

    def score_joined(
        self, kernel_states: tf.Tensor, config_states: tf.Tensor, training=None
    ) -> tf.Tensor:
        """`call` on [kernel_states [b, dk] repeated per config ; config_states [b, k, dc]], the
        first layer's kernel side computed once per kernel, the joined input never built."""
        first = self._layers()[0]
        width = kernel_states.shape[-1]
        if not self.built:  # called before Keras' first __call__ built the layers
            self.build(tf.TensorShape([None, None, width + config_states.shape[-1]]))
        per_kernel = tf.matmul(kernel_states, first.kernel[:width])  # [b, units]
        x = pointwise_matmul(config_states, first.kernel[width:]) + per_kernel[:, None, :]
        if first.use_bias:
            x = tf.nn.bias_add(x, first.bias)
        return self._from_first(first.activation(x), training)

    def score_gated(
        self,
        kernel_states: tf.Tensor,
        config_states: tf.Tensor,
        gate: tf.Tensor,
        projection: PointwiseDense,
        training=None,
    ) -> tf.Tensor:
        """`score_joined(kernel_states [b, dk], [configs ; gate [b, u] * projection(configs)])`,
        `projection` a linear PointwiseDense(u); when `folding_pays`, the config side folds into
        one matrix per kernel, M_b = W_config + P diag(gate_b) W_gated."""
        if projection.activation is not tf.keras.activations.linear:
            raise ValueError("score_gated needs a linear projection (activation None)")
        first = self._layers()[0]
        dk, dc = kernel_states.shape[-1], config_states.shape[-1]
        # Built lazily in the order a model's `build()` creates them (projection first).
        if not projection.built:  # never called: read directly below
            projection.build(tf.TensorShape([None, dc]))
        if not self.built:  # called before Keras' first __call__ built the layers
            self.build(tf.TensorShape([None, None, dk + dc + projection.units]))
        w_config = first.kernel[dk : dk + dc]
        w_gated = first.kernel[dk + dc :]
        per_kernel = tf.matmul(kernel_states, first.kernel[:dk])  # [b, h]
        if projection.use_bias:
            per_kernel += tf.matmul(gate * projection.bias, w_gated)

        def folded() -> tf.Tensor:
            gated = gate[:, :, None] * w_gated[None]  # [b, u, h]
            per_kernel_w = w_config[None] + tf.einsum("cu,buh->bch", projection.kernel, gated)
            return tf.matmul(config_states, per_kernel_w)  # [b, k, h]

        def unfolded() -> tf.Tensor:
            gated = gate[:, None, :] * pointwise_matmul(config_states, projection.kernel)
            return pointwise_matmul(config_states, w_config) + pointwise_matmul(gated, w_gated)

        num_configs = config_states.shape[1]
        if num_configs is not None:
            # Known when traced: one path, no cond keeping both branches' intermediates.
            x = folded() if folding_pays(num_configs, dc, first.units) else unfolded()
        else:
            fold = folding_pays(tf.shape(config_states)[1], dc, first.units)
            x = tf.cond(fold, folded, unfolded)
        x += per_kernel[:, None, :]
        if first.use_bias:
            x = tf.nn.bias_add(x, first.bias)
        return self._from_first(first.activation(x), training)

    def _layers(self) -> list[PointwiseDense]:
        return [*self.hidden, self.out]

    def _from_first(self, x: tf.Tensor, training) -> tf.Tensor:
        if self.hidden:
            x = self.dropout(x, training=training)
            for layer in self.hidden[1:]:
                x = self.dropout(layer(x), training=training)
            x = self.out(x)
        return tf.squeeze(x, axis=-1)
