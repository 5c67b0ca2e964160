"""Adam and AdamW whose per-variable work is a few fused ops instead of dozens (faster on CPU)."""

from __future__ import annotations

import tensorflow as tf


def _fusable(gradient) -> bool:
    return (
        gradient is not None
        and not isinstance(gradient, tf.IndexedSlices)
        and gradient.dtype == tf.float32
    )


class _FusedUpdate:
    """Mixin over a Keras Adam(W): the same formulas, per-step scalars computed once, norms
    clipped together, weight decay and update one fused op per variable:

        g <- g * clipnorm / max(||g||, clipnorm)            (per variable)
        w <- w - lr * weight_decay * w                      (AdamW, before the update)
        m <- m + (g - m) (1 - beta_1)
        v <- v + (g^2 - v) (1 - beta_2)
        w <- w - alpha m / (sqrt(v) + epsilon),  alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)

    in float32; sparse gradients, AMSGrad and non-float32 variables keep Keras' path.
    """

    def _clip_gradients(self, grads):
        dense = [i for i, g in enumerate(grads) if _fusable(g)]
        if not (self.clipnorm and self.clipnorm > 0) or not dense:
            return super()._clip_gradients(grads)
        clip = tf.constant(self.clipnorm, tf.float32)
        norms = tf.sqrt(tf.stack([tf.reduce_sum(tf.square(grads[i])) for i in dense]))
        scales = tf.unstack(clip / tf.maximum(norms, clip))
        rest = [None if i in dense else g for i, g in enumerate(grads)]
        clipped = list(super()._clip_gradients(rest))  # Keras' own for the others
        for i, scale in zip(dense, scales):
            clipped[i] = grads[i] * scale
        return clipped

    def _apply_weight_decay(self, variables):
        if self.weight_decay is None:
            return
        fused = [v for v in variables if v.dtype == tf.float32 and self._use_weight_decay(v)]
        super()._apply_weight_decay([v for v in variables if v.dtype != tf.float32])

        def apply(distribution, variables, **kwargs):
            rate = tf.cast(self.learning_rate, tf.float32) * tf.cast(self.weight_decay, tf.float32)

            def decay(variable):
                tf.raw_ops.ResourceApplyGradientDescent(
                    var=variable.handle, alpha=rate, delta=variable.read_value()
                )

            for variable in variables:
                distribution.extended.update(variable, decay, group=False)

        tf.__internal__.distribute.interim.maybe_merge_call(
            apply, self._distribution_strategy, fused
        )

    def _distributed_apply_gradients_fn(self, distribution, grads_and_vars, **kwargs):
        # Once per step, in cross-replica context (the default strategy too).
        step = tf.cast(self.iterations + 1, tf.float32)
        self._step_scalars = {
            "beta1_power": tf.pow(tf.cast(self.beta_1, tf.float32), step),
            "beta2_power": tf.pow(tf.cast(self.beta_2, tf.float32), step),
            "lr": tf.cast(self.learning_rate, tf.float32),
            "beta1": tf.cast(self.beta_1, tf.float32),
            "beta2": tf.cast(self.beta_2, tf.float32),
            "epsilon": tf.cast(self.epsilon, tf.float32),
        }
        try:
            return super()._distributed_apply_gradients_fn(distribution, grads_and_vars, **kwargs)
        finally:
            self._step_scalars = None

    def update_step(self, gradient, variable):
        scalars = getattr(self, "_step_scalars", None)
        fused = scalars is not None and not self.amsgrad and variable.dtype == tf.float32
        if not (fused and _fusable(gradient)):
            return super().update_step(gradient, variable)
        index = self._index_dict[self._var_key(variable)]
        tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].handle,
            v=self._velocities[index].handle,
            grad=gradient,
            use_locking=False,
            **scalars,
        )


class FusedAdam(_FusedUpdate, tf.keras.optimizers.Adam):
    """`tf.keras.optimizers.Adam`, fused (`_FusedUpdate`)."""


class FusedAdamW(_FusedUpdate, tf.keras.optimizers.AdamW):
    """`tf.keras.optimizers.AdamW`, fused (`_FusedUpdate`)."""
