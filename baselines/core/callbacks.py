"""The callbacks every run's fit has: progress, per-epoch timings, the learning rate."""

from __future__ import annotations

import time

import tensorflow as tf
import tqdm


class StepProgress(tf.keras.callbacks.Callback):
    """A tqdm bar of training steps per epoch, with the epoch's loss and OPA at its end."""

    def __init__(self, desc: str):
        super().__init__()
        self.desc = desc
        self._bar = None
        self._done = 0

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self._close()
        total = self.params.get("steps") if self.params else None
        self._bar = tqdm.tqdm(total=total, desc=f"{self.desc} epoch {epoch + 1}", unit="step")
        self._done = 0

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        if self._bar is not None:
            self._bar.update(batch + 1 - self._done)
            self._done = batch + 1

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        if self._bar is not None:
            shown = {k: logs[k] for k in ("loss", "opa", "val_opa") if logs and k in logs}
            self._bar.set_postfix({k: f"{v:.4f}" for k, v in shown.items()})
        self._close()

    def on_train_end(self, logs=None) -> None:
        self._close()

    def _close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class EpochTimer(tf.keras.callbacks.Callback):
    """Wall seconds per epoch of training steps, validation (0.0 without) and callbacks after."""

    def __init__(self):
        super().__init__()
        self.train_s: list[float] = []
        self.val_s: list[float] = []
        self.callbacks_s: list[float] = []
        self._mark = 0.0
        self._epoch_end: float | None = None

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        now = time.perf_counter()
        if self._epoch_end is not None:
            self.callbacks_s.append(now - self._epoch_end)
        self._mark = now
        self.val_s.append(0.0)
        self.train_s.append(0.0)

    def on_test_begin(self, logs=None) -> None:
        if self.train_s:  # inside fit (not a separate evaluate)
            now = time.perf_counter()
            self.train_s[-1] = now - self._mark
            self._mark = now

    def on_test_end(self, logs=None) -> None:
        if self.val_s:
            self.val_s[-1] = time.perf_counter() - self._mark

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        now = time.perf_counter()
        if not self.val_s[-1]:
            self.train_s[-1] = now - self._mark
        self._epoch_end = now

    def on_train_end(self, logs=None) -> None:
        if self._epoch_end is not None and len(self.callbacks_s) < len(self.train_s):
            self.callbacks_s.append(time.perf_counter() - self._epoch_end)

    def to_dict(self) -> dict[str, list[float]]:
        return {
            "epoch_train_s": [round(t, 3) for t in self.train_s],
            "epoch_val_s": [round(t, 3) for t in self.val_s],
            "epoch_callbacks_s": [round(t, 3) for t in self.callbacks_s],
        }


class LearningRateLogger(tf.keras.callbacks.Callback):
    """Adds the learning rate to the epoch's logs (`learning_rate`), for TensorBoard."""

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        if logs is None:
            return
        optimizer = self.model.optimizer
        rate = optimizer.learning_rate
        if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
            rate = rate(optimizer.iterations)
        logs["learning_rate"] = float(tf.convert_to_tensor(rate).numpy())
