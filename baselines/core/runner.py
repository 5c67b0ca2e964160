"""Fits a ranking trainer a collection hands over (`fit_run`), the same way for every collection:
tf.distribute, resumable early stopping on validation OPA, TensorBoard, timings, log lines."""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from baselines.core import distribution
from baselines.core.callbacks import EpochTimer, LearningRateLogger, StepProgress
from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_output, describe_write_error, write_failure_kind
from baselines.core.keras_fit import EpochBatches
from baselines.core.tensorboard import HParams

CURVE_KEYS = ("epoch", "train_loss", "train_opa", "val_loss", "val_opa")


def set_determinism(seed: int) -> None:
    """Same seed and data give the same run on CPU."""
    tf.keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


class ResumableEarlyStopping(tf.keras.callbacks.EarlyStopping):
    """Keras' early stopping on val OPA that ends on the best epoch's weights, stopped or not; its
    state goes to `state_dir` after every epoch (chief only), so a resumed run ends as an
    uninterrupted one. `average_from` (an epoch from 1): ends instead on the mean weights of
    every epoch from that one on (or on the best, if it stops before)."""

    def __init__(
        self,
        patience: int,
        state_dir: Path,
        *,
        writes_state: bool = True,
        extra_curve: Sequence[str] = (),
        average_from: int | None = None,
    ):
        super().__init__(
            monitor="val_opa", mode="max", patience=patience, restore_best_weights=True
        )
        self.state_dir = Path(state_dir)
        self.writes_state = writes_state
        # Log keys a callback listed before this one adds, e.g. "val_kendall_tau".
        self.extra_curve = tuple(extra_curve)
        self.average_from = average_from
        self._reset()

    def on_train_begin(self, logs=None) -> None:
        super().on_train_begin(logs)
        self._reset()

    def _reset(self) -> None:
        self.curve: dict[str, list] = {k: [] for k in CURVE_KEYS + self.extra_curve}
        self._first_epoch = None
        self._already_stopped = False
        self.last_validated = -1
        self.averaged_epochs = 0
        self._mean_weights: list[np.ndarray] | None = None

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        if self._first_epoch is None:
            self._first_epoch = epoch
            if epoch > 0:
                self._load(epoch - 1)
                # Killed after deciding to stop: Keras runs one more step, not recorded.
                self._already_stopped = self.stopped_epoch > 0
                self.model.stop_training = self._already_stopped

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        if self._already_stopped:
            return
        logs = logs or {}
        validated = "val_opa" in logs  # not every epoch with --eval_every > 1
        self.curve["epoch"].append(epoch)
        names = ("loss", "opa", "val_loss", "val_opa") + self.extra_curve
        for key, name in zip(CURVE_KEYS[1:] + self.extra_curve, names):
            value = logs.get(name)
            self.curve[key].append(None if value is None else float(value))
        if validated:
            # Keras counts `wait` in calls; patience here counts epochs.
            self.wait += epoch - self.last_validated - 1
            self.last_validated = epoch
            super().on_epoch_end(epoch, logs)
        if self.average_from is not None and epoch + 1 >= self.average_from:
            self._add_to_mean(self.model.get_weights())
        if self.writes_state:
            self._save(epoch)

    def _add_to_mean(self, weights: list[np.ndarray]) -> None:
        # A running mean in float64, so no sum of many epochs' weights is held.
        self.averaged_epochs += 1
        if self._mean_weights is None:
            self._mean_weights = [np.asarray(w, np.float64) for w in weights]
            return
        for mean, w in zip(self._mean_weights, weights):
            mean += (np.asarray(w, np.float64) - mean) / self.averaged_epochs

    def on_train_end(self, logs=None) -> None:
        if self._first_epoch is None:  # killed after the last epoch's backup: no epoch left
            saved = sorted(self.state_dir.glob("early_stopping_*.npz"), key=_epoch_of)
            if saved:
                self._load(_epoch_of(saved[-1]))
        super().on_train_end(logs)
        if self._mean_weights is not None:
            self.model.set_weights(
                [m.astype(w.dtype) for m, w in zip(self._mean_weights, self.model.get_weights())]
            )
        elif self.best_weights is not None:
            self.model.set_weights(self.best_weights)

    def _path(self, epoch: int) -> Path:
        return self.state_dir / f"early_stopping_{epoch}.npz"

    def _save(self, epoch: int) -> None:
        meta = {
            "wait": self.wait,
            "best": float(self.best),
            "best_epoch": self.best_epoch,
            "stopped_epoch": self.stopped_epoch,
            "last_validated": self.last_validated,
            "curve": self.curve,
            "averaged_epochs": self.averaged_epochs,
        }
        self.state_dir.mkdir(parents=True, exist_ok=True)
        weights = self.best_weights or []
        with atomic_output(self._path(epoch)) as tmp:
            arrays = {f"arr_{i}": w for i, w in enumerate(weights)}
            arrays.update({f"mean_{i}": w for i, w in enumerate(self._mean_weights or [])})
            np.savez(tmp, meta=np.array(json.dumps(meta)), **arrays)
        # The previous epoch's state stays: a kill before the model backup resumes from it.
        old = self._path(epoch - 2)
        if old.exists():
            old.unlink()

    def _load(self, epoch: int) -> None:
        path = self._path(epoch)
        try:
            with np.load(path, allow_pickle=False) as saved:
                meta = json.loads(str(saved["meta"]))
                count = {p: sum(f.startswith(p) for f in saved.files) for p in ("arr_", "mean_")}
                weights = [saved[f"arr_{i}"] for i in range(count["arr_"])]
                means = [saved[f"mean_{i}"] for i in range(count["mean_"])]
        except (OSError, ValueError, KeyError) as e:
            raise PipelineError(
                f"{path}: cannot resume, the early-stopping state of epoch {epoch} is "
                f"missing or damaged ({e}); remove {self.state_dir} to train from the start"
            ) from None
        self.wait, self.best, self.best_epoch = meta["wait"], meta["best"], meta["best_epoch"]
        self.stopped_epoch, self.last_validated = meta["stopped_epoch"], meta["last_validated"]
        self.curve = meta["curve"]
        self.best_weights = weights or None
        self.averaged_epochs = meta.get("averaged_epochs", 0)
        self._mean_weights = means or None


def _epoch_of(path: Path) -> int:
    return int(path.stem.rpartition("_")[2])


@dataclasses.dataclass(frozen=True)
class FitPlan:
    """How long a fit runs, and when it validates, stops early and averages weights."""

    epochs: int
    validation_freq: int | Sequence[int] = 1  # Keras' `validation_freq`
    early_stop: int | None = None  # patience in epochs (None: never stops early)
    average_from: int | None = None  # first epoch (from 1) of the weight average


@dataclasses.dataclass(frozen=True)
class FitCallbacks:
    """`first` add to an epoch's logs (keys `extra_curve`) before early stopping; `last` after."""

    first: Sequence[tf.keras.callbacks.Callback] = ()
    extra_curve: Sequence[str] = ()
    last: Sequence[tf.keras.callbacks.Callback] = ()


@dataclasses.dataclass(frozen=True)
class RunFiles:
    """Where a fit writes (None: not at all): `backup_dir` the per-epoch backup, resumed from if
    it exists; `tb_dir` TensorBoard's logs, with `hparams`' session (the chief only)."""

    backup_dir: Path | None = None
    tb_dir: Path | None = None
    hparams: HParams | None = None


@dataclasses.dataclass(frozen=True)
class FitResult:
    """What `fit_run` returns; `seconds` is the time `fit` took."""

    trainer: tf.keras.Model
    stopping: ResumableEarlyStopping
    timer: EpochTimer
    seconds: float

    def record_fields(self) -> dict:
        """The run record's fields that every collection's fit has alike."""
        return {
            "train_curve": self.stopping.curve,
            "best_epoch": self.stopping.best_epoch,
            "best_val_opa": float(self.stopping.best),
            "averaged_epochs": self.stopping.averaged_epochs,
            "timings": {"train_s": self.seconds, **self.timer.to_dict()},
            "traces": dict(self.trainer.traces),
        }


def fit_run(
    build_trainer: Callable[[], tf.keras.Model],
    train_batches: EpochBatches,
    val_batches: EpochBatches,
    plan: FitPlan,
    callbacks: FitCallbacks = FitCallbacks(),
    files: RunFiles = RunFiles(),
    *,
    strategy: tf.distribute.Strategy,
    progress: str | None = None,
    log: Callable[[str], None] = print,
) -> FitResult:
    """Builds the trainer under `strategy` (optimizer slots before the first step, else it traces
    twice), fits it and says how the run ended. Callbacks in order: the epoch timer,
    `callbacks.first`, early stopping, the learning rate, TensorBoard, the backup, HParams,
    `callbacks.last`, the progress bar."""
    with strategy.scope():
        trainer = build_trainer()
        trainer.optimizer.build(trainer.trainable_variables)
    # Read at the first batch, after BackupAndRestore: a resumed run continues at its epoch.
    updates = train_batches.updates  # the optimizer counts updates, not passes
    train_batches.first_epoch = lambda: int(trainer.optimizer.iterations.numpy()) // updates
    chief = distribution.is_chief(strategy)
    timer = EpochTimer()
    with tempfile.TemporaryDirectory() as scratch:
        stopping = ResumableEarlyStopping(
            plan.early_stop or plan.epochs,
            files.backup_dir if files.backup_dir is not None else Path(scratch),
            writes_state=chief,
            extra_curve=callbacks.extra_curve,
            average_from=plan.average_from,
        )
        order = [timer, *callbacks.first, stopping, LearningRateLogger()]
        order += _file_callbacks(files, chief, log)
        order += [*callbacks.last, *([StepProgress(progress)] if progress else [])]
        started = time.perf_counter()
        _fit_writing(trainer, (train_batches, val_batches), plan, strategy, order, files)
        seconds = time.perf_counter() - started
    _log_ending(stopping, trainer, plan, log)
    return FitResult(trainer, stopping, timer, seconds)


def _file_callbacks(files: RunFiles, chief: bool, log: Callable[[str], None]) -> list:
    """TensorBoard (after the learning rate it writes), the backup, the HParams session."""
    found: list[tf.keras.callbacks.Callback] = []
    if files.tb_dir is not None:
        found.append(
            tf.keras.callbacks.TensorBoard(str(files.tb_dir), write_graph=False, profile_batch=0)
        )
    if files.backup_dir is not None:
        found.append(tf.keras.callbacks.BackupAndRestore(str(files.backup_dir / "keras")))
        if files.backup_dir.exists():
            log(f"resuming from {files.backup_dir} (remove it to train from the start)")
    if files.hparams is not None and chief and files.tb_dir is not None:
        found.extend(files.hparams.callbacks(files.tb_dir))
    return found


def _fit_writing(trainer, batches, plan: FitPlan, strategy, callbacks, files: RunFiles) -> None:
    """Keras `fit`; a write that fails (full disk) is a PipelineError naming the folders."""
    train_batches, val_batches = batches
    try:
        trainer.fit(
            distribution.distributed(strategy, train_batches),
            epochs=plan.epochs,
            steps_per_epoch=train_batches.steps,
            validation_data=distribution.distributed(strategy, val_batches),
            validation_steps=val_batches.steps,
            validation_freq=plan.validation_freq,
            callbacks=callbacks,
            verbose=0,
        )
    except (OSError, tf.errors.OpError) as e:
        # A full disk can be ResourceExhaustedError; running out of memory is not a write.
        folders = [d for d in (files.tb_dir, files.backup_dir) if d is not None]
        if write_failure_kind(e) is None or not folders:
            raise
        names = ", ".join(f"{d.name}/" for d in folders)
        raise PipelineError(
            f"cannot write the training logs in {folders[0].parent} ({names}): "
            f"{describe_write_error(e)}; free space or choose another --out_dir"
        ) from None


def _log_ending(stopping: ResumableEarlyStopping, trainer, plan: FitPlan, log) -> None:
    if stopping.stopped_epoch:
        log(
            f"early stop after epoch {stopping.stopped_epoch}: "
            f"no val OPA gain for {plan.early_stop} epochs"
        )
    log(
        f"best val OPA {stopping.best:.4f} at epoch {stopping.best_epoch}; "
        f"train step traced {trainer.traces['train']}x, eval step {trainer.traces['eval']}x"
    )
    if stopping.averaged_epochs:
        log(
            f"ends on the mean of the weights of {stopping.averaged_epochs} epochs "
            f"from epoch {plan.average_from} (--average_from), not the best epoch's"
        )
