"""FusedAdam(W) against Keras' Adam(W): the same updates, in fewer ops.

Tolerance: both evaluate the same formulas in float32; only the association
differs (clipping t * (c / n) against (t * c) / n, decay (lr * wd) * w against
(w * wd) * lr), so each step's values agree to a few float32 ulps (2^-24
relative each). Adam normalizes the update by sqrt(v), so a relative error of
~1e-7 in m or v moves a weight by ~1e-7 * lr per step: over 6 steps at lr 0.05,
~3e-8. atol 1e-5 sits far above that and far below what a wrong formula moves
(a skipped decay step alone moves w by lr * wd * |w| ~ 5e-3 here, a skipped or
doubled clip changes the first step by up to lr).

The optimizer state differs by more, by construction: Keras computes
1 - beta_2 in double (0.001, then float32), the fused kernel in float32
(1 - 0.999f = 0.00099998713), 1.3e-5 relative on every increment of v (and
2.4e-7 on m's). Hence rtol 1e-4 for the state, on top of atol; a swapped beta
alone moves m by (beta_2 - beta_1) g, ~1 here.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from baselines.core.fused_adam import FusedAdam, FusedAdamW

STEPS = 6
ATOL = 1e-5
STATE_RTOL = 1e-4


def _variables(seed: int = 0) -> list[tf.Variable]:
    rng = np.random.default_rng(seed)
    return [
        tf.Variable(rng.normal(size=(5, 4)).astype(np.float32), name="kernel"),
        tf.Variable(rng.normal(size=4).astype(np.float32), name="bias"),
        tf.Variable(rng.normal(size=(10, 3)).astype(np.float32), name="embedding"),
        tf.Variable(rng.normal(size=(3, 2)).astype(np.float32) * 0.01, name="small"),
    ]


def _loss(variables) -> tf.Tensor:
    kernel, bias, embedding, small = variables
    x = tf.constant(np.linspace(-2.0, 3.0, 20, dtype=np.float32).reshape(4, 5))
    # The embedding is read through a gather with repeated ids: an IndexedSlices
    # gradient with duplicate rows (Keras' own sparse path in both optimizers).
    rows = tf.gather(embedding, [1, 3, 3, 7])
    out = tf.matmul(x, kernel) + bias
    # kernel and bias get gradients with norms far above the clip norm, small
    # one far below: both branches of the clip.
    return (
        0.5 * tf.reduce_sum(tf.square(out))
        + tf.reduce_sum(rows * tf.reduce_mean(out, axis=1, keepdims=True)[:, :1])
        + 1e-3 * tf.reduce_sum(small * small)
    )


def _train(optimizer, variables, steps: int = STEPS) -> None:
    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = _loss(variables)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    for _ in range(steps):
        step()


def _schedule() -> tf.keras.optimizers.schedules.LearningRateSchedule:
    return tf.keras.optimizers.schedules.CosineDecay(0.05, decay_steps=10)


@pytest.mark.parametrize(
    "keras_cls, fused_cls, kwargs",
    [
        (tf.keras.optimizers.AdamW, FusedAdamW, dict(weight_decay=0.1, clipnorm=0.5)),
        (tf.keras.optimizers.AdamW, FusedAdamW, dict(weight_decay=0.1)),
        (tf.keras.optimizers.Adam, FusedAdam, dict(clipnorm=0.5)),
        (tf.keras.optimizers.Adam, FusedAdam, dict()),
    ],
)
def test_fused_updates_match_keras(keras_cls, fused_cls, kwargs):
    reference, fused = _variables(), _variables()
    keras_opt = keras_cls(learning_rate=_schedule(), **kwargs)
    fused_opt = fused_cls(learning_rate=_schedule(), **kwargs)
    _train(keras_opt, reference)
    _train(fused_opt, fused)
    start = _variables()
    for want, got, init in zip(reference, fused, start):
        # The weights moved (by far more than the tolerance), and moved alike.
        assert np.max(np.abs(want.numpy() - init.numpy())) > 100 * ATOL
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=ATOL, err_msg=want.name)
    for want, got in zip(keras_opt.variables, fused_opt.variables):
        assert got.name == want.name
        np.testing.assert_allclose(
            got.numpy(), want.numpy(), rtol=STATE_RTOL, atol=ATOL, err_msg=want.name
        )


def test_dense_variables_take_the_fused_kernels():
    variables = _variables()
    optimizer = FusedAdamW(learning_rate=0.01, weight_decay=0.1, clipnorm=0.5)

    def step():
        with tf.GradientTape() as tape:
            loss = _loss(variables)
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))

    optimizer.build(variables)
    graph = tf.function(step).get_concrete_function().graph
    types = [op.type for op in graph.get_operations()]
    # Three dense variables fused; the embedding's sparse gradient takes Keras' path.
    assert types.count("ResourceApplyAdam") == 3
    assert types.count("ResourceApplyGradientDescent") == 4  # decay: every variable
    assert types.count("Pow") == 2 + 2  # once per step, plus the sparse variable's own


def test_keras_checkpoint_resumes_in_the_fused_optimizer(tmp_path):
    """A backup written by Keras' AdamW (runs before the fused one) restores and continues."""
    reference, resumed = _variables(), _variables()
    keras_opt = tf.keras.optimizers.AdamW(learning_rate=0.05, weight_decay=0.1, clipnorm=0.5)
    _train(keras_opt, reference, steps=3)
    path = tf.train.Checkpoint(optimizer=keras_opt, weights=reference).write(str(tmp_path / "ck"))

    fused_opt = FusedAdamW(learning_rate=0.05, weight_decay=0.1, clipnorm=0.5)
    fused_opt.build(resumed)
    tf.train.Checkpoint(optimizer=fused_opt, weights=resumed).read(path).assert_consumed()
    assert int(fused_opt.iterations.numpy()) == 3
    _train(keras_opt, reference, steps=3)
    _train(fused_opt, resumed, steps=3)
    for want, got in zip(reference, resumed):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=ATOL, err_msg=want.name)
