"""The optimizers a task picks from: Adam or AdamW, at a constant rate or along a schedule."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from baselines.core.fused_adam import FusedAdam, FusedAdamW


def learning_rate(
    lr: float, schedule: str, epochs: int, steps_per_epoch: int, warmup_epochs: int = 0
) -> float | tf.keras.optimizers.schedules.LearningRateSchedule:
    """`lr`, or Keras' cosine decay over every training step: with warm-up, linear from lr / 100
    to lr over `warmup_epochs`, then down to lr / 100 at the last step."""
    if schedule != "cosine":
        return lr
    total = max(2, epochs * steps_per_epoch)
    warmup = min(warmup_epochs * steps_per_epoch, total - 1)
    return tf.keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=lr / 100 if warmup else lr,
        decay_steps=total - warmup,
        alpha=0.01,
        warmup_target=lr if warmup else None,
        warmup_steps=warmup,
    )


def make_optimizer(rate, clip_norm: float | None, weight_decay: float | None = None):
    """Adam, or AdamW with `weight_decay`, at `rate` (float or schedule), fused (`fused_adam`)."""
    if weight_decay is not None:
        return FusedAdamW(learning_rate=rate, weight_decay=weight_decay, clipnorm=clip_norm)
    return FusedAdam(learning_rate=rate, clipnorm=clip_norm)


def effective_epochs(
    epochs: int, max_train_steps: int, steps_per_epoch: int, log: Callable[[str], None]
) -> int:
    """`epochs`, or the fewest whole epochs that reach `max_train_steps` (said in a line)."""
    if not max_train_steps:
        return epochs
    capped = -(-max_train_steps // steps_per_epoch)
    if capped >= epochs:
        return epochs
    log(
        f"note: --max_train_steps={max_train_steps} caps this run at {capped} epochs of "
        f"{steps_per_epoch} steps (--epochs={epochs}); the schedule spans the {capped}"
    )
    return capped
