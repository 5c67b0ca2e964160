"""Training under Keras `fit`: a ranking train step, resumable early stopping, tf.distribute input.

Keras carries the loop (epochs, validation, callbacks, tf.distribute); this module
adds only what is particular to ranking configurations of graphs (tile kernels
or whole layout programs):

- `RankingTrainer`: a Keras model around a cost model whose `train_step` and
  `test_step` apply a ranking loss to [graphs, configs] score lists and report
  the loss, the pooled OPA (`PooledOPA`) and top-K errors.
- `BatchSource`: what the batches are drawn from: each item's configuration
  count and how a batch of items and configuration slots is assembled.
- `EpochBatches`: a source's batches, epoch after epoch, each epoch drawn from
  its own seed (so a resumed run draws what an uninterrupted one would) and
  split into per-replica batches for `Strategy.distribute_datasets_from_function`.
- `ResumableEarlyStopping`: Keras' `EarlyStopping` on val OPA that always ends
  on the best weights (or on the mean of the weights from a given epoch on),
  and keeps its state beside `BackupAndRestore`'s backup, so that a resumed run
  stops and restores exactly as an uninterrupted one.
- `compile_trainer`: Keras `compile` running `STEPS_PER_EXECUTION` steps per
  call of the compiled train (and eval) function, with `StepProgress` as its
  step-accurate progress bar.
- `resumable_fit`: `fit` with those, live TensorBoard scalars (learning rate
  included) and `BackupAndRestore`, so that a killed run resumes at its last
  finished epoch; a failed log write is one line.

    trainer = RankingTrainer(tile_model, loss_fn, num_configs=10, to_graph=graph_from_batch)
    trainer.compile(optimizer=tf.keras.optimizers.Adam())
    trainer.fit(train_batches.dataset(), epochs=5, steps_per_epoch=train_batches.steps,
                validation_data=val_batches.dataset(), validation_steps=val_batches.steps,
                callbacks=[ResumableEarlyStopping(5, state_dir)])
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from baselines.core import distribution, metrics
from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_output, describe_write_error, write_failure_kind


def set_determinism(seed: int) -> None:
    """Same seed and data give the same run on CPU (Python, numpy and TF seeds; TF ops
    that always give the same result)."""
    tf.keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


def sample_config_slots(rng: np.random.Generator, num_available: int, k: int) -> np.ndarray:
    """K configuration indices without replacement, padded with -1 when fewer exist."""
    if num_available >= k:
        return np.sort(rng.choice(num_available, size=k, replace=False))
    return np.concatenate([np.arange(num_available), np.full(k - num_available, -1)])


@dataclasses.dataclass(frozen=True)
class BatchSource:
    """Items to rank configurations of: each item's configuration count, and how a
    batch is assembled from item ids and each item's configuration slots (-1 = padding)
    into a dict of arrays matching `signature`."""

    num_configs: np.ndarray
    assemble: Callable[[Sequence[int], Sequence[np.ndarray], int], dict]
    signature: dict

    def __len__(self) -> int:
        return int(len(self.num_configs))


CURVE_KEYS = ("epoch", "train_loss", "train_opa", "val_loss", "val_opa")


class PooledOPA(tf.keras.metrics.Metric):
    """Ordered-pair accuracy pooled over every list: correct pairs / comparable pairs.

    Both counts are summed over batches (and over replicas under tf.distribute),
    as TF-Ranking's OPAMetric pools them.

        opa = PooledOPA()
        opa.update_state(*metrics.pair_counts(runtimes, scores))
    """

    def __init__(self, name: str = "opa", **kwargs):
        super().__init__(name=name, dtype=tf.float64, **kwargs)
        self.correct = self.add_weight(name="correct", initializer="zeros", dtype=tf.float64)
        self.pairs = self.add_weight(name="pairs", initializer="zeros", dtype=tf.float64)

    def update_state(self, correct: tf.Tensor, pairs: tf.Tensor) -> None:
        self.correct.assign_add(tf.cast(correct, tf.float64))
        self.pairs.assign_add(tf.cast(pairs, tf.float64))

    def result(self) -> tf.Tensor:
        return self.correct / tf.maximum(self.pairs, 1.0)


class RankingTrainer(tf.keras.Model):
    """Trains `tile_model` (any cost model) under a ranking loss of its [graphs, configs] scores.

    `to_graph` turns a batch dict into the GraphTensor the model's `forward`
    reads. Each replica's loss is divided by the number of replicas, because Keras'
    optimizer sums the replicas' gradients: the update is then the gradient of
    the global batch's mean loss.
    """

    def __init__(
        self,
        tile_model: tf.keras.Model,
        loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
        num_configs: int,
        to_graph: Callable[[dict], object],
    ):
        super().__init__()
        self.to_graph = to_graph
        self.tile_model = tile_model
        self.loss_fn = loss_fn
        self.num_configs = num_configs
        self.loss_tracker = tf.keras.metrics.Mean(name="loss")
        self.opa = PooledOPA()
        # Mean over kernels of the top-k error among each list's sampled configs.
        self.top_k_errors = [tf.keras.metrics.Mean(name=f"top{k}_err") for k in metrics.TOP_KS]
        self.traces = {"train": 0, "eval": 0}  # Python side effects: traces, not steps

    @property
    def metrics(self) -> list[tf.keras.metrics.Metric]:
        return [self.loss_tracker, self.opa, *self.top_k_errors]

    def call(self, batch: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        return self.tile_model.forward(self.to_graph(batch), self.num_configs, training=training)

    def _update(self, batch, scores, loss) -> dict[str, tf.Tensor]:
        runtimes = tf.reshape(batch["config_runtimes"], [-1, self.num_configs])
        self.loss_tracker.update_state(loss)
        self.opa.update_state(*metrics.pair_counts(runtimes, scores))
        for k, metric in zip(metrics.TOP_KS, self.top_k_errors):
            metric.update_state(metrics.batch_top_k_errors(runtimes, scores, k))
        return {m.name: m.result() for m in self.metrics}

    def train_step(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        self.traces["train"] += 1
        runtimes = tf.reshape(batch["config_runtimes"], [-1, self.num_configs])
        with tf.GradientTape() as tape:
            scores = self(batch, training=True)
            loss = self.loss_fn(runtimes, scores)
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            scaled = loss / tf.cast(replicas, loss.dtype)
        variables = self.tile_model.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(scaled, variables), variables))
        return self._update(batch, scores, loss)

    def test_step(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        self.traces["eval"] += 1
        runtimes = tf.reshape(batch["config_runtimes"], [-1, self.num_configs])
        scores = self(batch, training=False)
        return self._update(batch, scores, self.loss_fn(runtimes, scores))

    def make_train_function(self, force: bool = False):
        if not self._looping():
            return super().make_train_function(force)
        if force or self.train_function is None:
            self.train_function = self._step_loop(self.train_step, self._train_counter)
        return self.train_function

    def make_test_function(self, force: bool = False):
        if not self._looping():
            return super().make_test_function(force)
        if force or self.test_function is None:
            self.test_function = self._step_loop(self.test_step, self._test_counter)
        return self.test_function

    def _looping(self) -> bool:
        spe = self._steps_per_execution
        return (
            spe is not None
            and int(spe.numpy()) > 1
            and self.distribute_strategy.num_replicas_in_sync == 1
        )

    def _step_loop(self, step: Callable, counter: tf.Variable) -> Callable:
        """`steps_per_execution` steps in one compiled call, `step` traced once.

        Keras' own loop starts with its outputs undefined, so AutoGraph traces
        the step once more to learn their structure (twice the tracing, which
        is seconds for a GNN); here they start as the metrics' current values,
        which have the step's structure. One replica only (`compile_trainer`),
        but not only the default strategy: a one-device MirroredStrategy's
        variables update only inside `strategy.run`, so the step runs there.
        """
        strategy = self.distribute_strategy

        def one_step(batch) -> dict[str, tf.Tensor]:
            outputs = strategy.run(step, args=(batch,))
            return tf.nest.map_structure(
                lambda x: strategy.experimental_local_results(x)[0], outputs
            )

        def run(iterator) -> dict[str, tf.Tensor]:
            outputs = {m.name: m.result() for m in self.metrics}
            for _ in tf.range(self._steps_per_execution):
                outputs = one_step(next(iterator))
                with tf.control_dependencies(list(outputs.values())):
                    counter.assign_add(1)
            return outputs

        return tf.function(run, reduce_retracing=True)


# Train (and eval) steps that Keras runs inside one call of its compiled
# function (a loop in the graph). Called once per step, Keras' `fit` spent as
# long between steps (Python, iterator hand-off) as in a recommended tile step
# itself on 2 cores (docs/performance.md); 32 steps per call leave that cost
# to one step in 32 and still return to Python (callbacks, progress, early
# stopping's check) every few seconds. The steps, their order and their
# arithmetic are unchanged.
STEPS_PER_EXECUTION = 32


def compile_trainer(trainer: tf.keras.Model, optimizer: tf.keras.optimizers.Optimizer) -> None:
    """`trainer.compile` with `STEPS_PER_EXECUTION` steps per call of the compiled loop.

    Same updates as one step per call: only the Python round trips between
    steps go. Under a strategy with several replicas it stays one step per
    call: in TF 2.15 the replicas' all-reduce of sparse (embedding) gradients
    inside Keras' step loop pairs up gathers of different shapes and fails.

        compile_trainer(trainer, tf.keras.optimizers.Adam())
    """
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    steps = STEPS_PER_EXECUTION if replicas == 1 else 1
    trainer.compile(optimizer=optimizer, steps_per_execution=steps)


class StepProgress(tf.keras.callbacks.Callback):
    """A tqdm bar of training steps per epoch, with the epoch's loss and OPA when it ends.

    tqdm's own Keras callback counts one step per batch callback; with several
    steps per call (`compile_trainer`) Keras reports the last step's index
    instead, so this bar advances by the steps actually run.

        trainer.fit(..., callbacks=[StepProgress("train LateJoinGAT")])
    """

    def __init__(self, desc: str):
        super().__init__()
        self.desc = desc
        self._bar = None
        self._done = 0

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        import tqdm

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
    """Wall seconds of each epoch's parts: training steps, validation, and the callbacks after.

    `train_s[i]` runs from epoch i's start to its validation (or its end), so
    the first epoch's holds the tracing of the train step; `val_s[i]` is 0.0
    for an epoch that does not validate; `callbacks_s[i]` runs from the
    epoch's end to the next epoch's start (the other callbacks' end-of-epoch
    work: backup, logs). Listed first, it sees the others' work as its own
    `callbacks_s`.

        timer = EpochTimer()
        trainer.fit(..., callbacks=[timer, ...])
        steady = statistics.median(timer.train_s[1:])
    """

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
    """Adds the optimizer's learning rate at the epoch's end to the logs (`learning_rate`).

    Keras' TensorBoard callback logs it only for a schedule; listed before it,
    this callback puts it in the logs of every run, so TensorBoard plots it.
    """

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        if logs is None:
            return
        optimizer = self.model.optimizer
        rate = optimizer.learning_rate
        if isinstance(rate, tf.keras.optimizers.schedules.LearningRateSchedule):
            rate = rate(optimizer.iterations)
        logs["learning_rate"] = float(tf.convert_to_tensor(rate).numpy())


def replica_chunks(order: np.ndarray, batch: int, num_replicas: int) -> list[list[np.ndarray]]:
    """Positions of `order` per global step and replica: each global batch split evenly.

    With one replica the steps are the plain batches of `batch` kernels. With
    more, a last global batch smaller than the replica count is topped up from
    the start of the epoch, because every replica must take every step.
    """
    steps = []
    for start in range(0, len(order), batch):
        positions = np.arange(start, min(start + batch, len(order)))
        if len(positions) < num_replicas:
            positions = np.resize(np.concatenate([positions, np.arange(len(order))]), num_replicas)
        steps.append(np.array_split(positions, num_replicas))
    return steps


class EpochBatches:
    """A `BatchSource`'s batches, epoch after epoch, each drawn from its own seed [seed, epoch].

    The stream never ends; Keras takes `steps` batches per epoch
    (`steps_per_epoch`). It starts at the epoch `first_epoch()` names when its
    first batch is drawn, i.e. after `BackupAndRestore` restored the optimizer,
    so a resumed run draws exactly the batches an uninterrupted run draws
    there. With `fixed_epoch`, every epoch draws the same batches (validation).

        train_batches = EpochBatches(source, batch=10, num_configs=10, seed=0)
        trainer.fit(train_batches.dataset(), steps_per_epoch=train_batches.steps, ...)
    """

    def __init__(
        self,
        split: BatchSource,
        batch: int,
        num_configs: int,
        seed: int,
        *,
        weights: np.ndarray | None = None,
        fixed_epoch: int | None = None,
        max_steps: int = -1,
        num_replicas: int = 1,
        first_epoch: Callable[[], int] = lambda: 0,
    ):
        self.split, self.batch, self.num_configs, self.seed = split, batch, num_configs, seed
        self.weights, self.fixed_epoch, self.num_replicas = weights, fixed_epoch, num_replicas
        self.first_epoch = first_epoch
        self._fixed_batches: dict[tuple[int, int], list[dict]] = {}
        self.steps = -(-len(split) // batch)
        if max_steps > 0:
            self.steps = min(self.steps, max_steps)

    def plan(self, epoch: int) -> tuple[np.ndarray, list[np.ndarray], list[list[np.ndarray]]]:
        """The epoch's kernel order, config slots per position, and per-replica steps."""
        rng = np.random.default_rng([self.seed, epoch])
        n = len(self.split)
        if self.weights is None:
            order = rng.permutation(n)
        else:
            order = rng.choice(n, size=n, replace=True, p=self.weights)
        # Slots are drawn in global order, so they do not depend on the replicas.
        slots = [
            sample_config_slots(rng, int(self.split.num_configs[i]), self.num_configs)
            for i in order
        ]
        steps = replica_chunks(order, self.batch, self.num_replicas)[: self.steps]
        return order, slots, steps

    def batches(self, epoch: int, pipeline: int = 0, num_pipelines: int = 1) -> Iterator[dict]:
        """One epoch of this input pipeline's per-replica batches, step by step."""
        if self.fixed_epoch is None:
            return self._assemble(epoch, pipeline, num_pipelines)
        # The same batches every epoch (validation): drawn and assembled once.
        key = (pipeline, num_pipelines)
        if key not in self._fixed_batches:
            self._fixed_batches[key] = list(
                self._assemble(self.fixed_epoch, pipeline, num_pipelines)
            )
        return iter(self._fixed_batches[key])

    def _assemble(self, epoch: int, pipeline: int, num_pipelines: int) -> Iterator[dict]:
        order, slots, steps = self.plan(epoch)
        local = self.num_replicas // num_pipelines
        for chunks in steps:
            for positions in chunks[pipeline * local : (pipeline + 1) * local]:
                ids = order[positions].tolist()
                yield self.split.assemble(ids, [slots[p] for p in positions], self.num_configs)

    def stream(self, pipeline: int = 0, num_pipelines: int = 1) -> Iterator[dict]:
        epoch = self.first_epoch()
        while True:
            yield from self.batches(epoch, pipeline, num_pipelines)
            epoch += 1

    def dataset(self, context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        """For `distribute_datasets_from_function`; assembles batches on a background thread."""
        pipeline = context.input_pipeline_id if context else 0
        num_pipelines = context.num_input_pipelines if context else 1
        # No tf.data autotuning: the pipeline is one generator and a fixed prefetch,
        # so there is nothing to tune, and its tuning thread sleeps up to a minute
        # between rounds while deleting the iterator waits for it to wake: fit
        # returned 25-58 s after its last epoch in 2- to 45-epoch runs
        # (docs/performance.md).
        options = tf.data.Options()
        options.autotune.enabled = False
        return (
            tf.data.Dataset.from_generator(
                lambda: self.stream(pipeline, num_pipelines),
                output_signature=self.split.signature,
            )
            .prefetch(2)
            .with_options(options)
        )


class ResumableEarlyStopping(tf.keras.callbacks.EarlyStopping):
    """Keras' early stopping on val OPA that ends on the best epoch's weights.

    Keras 2 restores the best weights only when it stops early; here a run that
    uses all its epochs ends on them too. With validation every few epochs
    (Keras `validation_freq`), patience still counts epochs. The state (best OPA, wait, best
    weights, learning curve) is written after every epoch to `state_dir`, before
    `BackupAndRestore` backs up the model, and read back when Keras resumes at a
    later epoch, so a resumed run ends exactly as an uninterrupted one. Only the
    chief writes; every worker reads (the backup folder is shared, as Keras'
    own backup is).

    With `average_from` (an epoch counted from 1, as `epochs` counts them), the
    run ends instead on the mean of the weights at the end of every epoch from
    that one to the last it trained (stochastic weight averaging over epochs);
    `averaged_epochs` counts them. A run that stops before that epoch ends on
    the best weights, as without it.
    """

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
        # Further log keys the curve records under their own names (None when absent),
        # e.g. "val_kendall_tau" that a callback listed before this one adds.
        self.extra_curve = tuple(extra_curve)
        self.average_from = average_from
        self.curve: dict[str, list] = self._empty_curve()
        self._first_epoch: int | None = None
        self._already_stopped = False
        self.last_validated = -1
        self.averaged_epochs = 0
        self._mean_weights: list[np.ndarray] | None = None

    def on_train_begin(self, logs=None) -> None:
        super().on_train_begin(logs)
        self.curve = self._empty_curve()
        self._first_epoch = None
        self._already_stopped = False
        self.last_validated = -1
        self.averaged_epochs = 0
        self._mean_weights = None

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        if self._first_epoch is None:
            self._first_epoch = epoch
            if epoch > 0:
                self._load(epoch - 1)
                # Killed after deciding to stop but before the end of `fit`:
                # Keras runs one more step before it looks; the best weights
                # are restored at the end all the same, and nothing is recorded.
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
            # Keras counts `wait` in calls; patience here counts epochs, also
            # when validation runs only every few epochs.
            self.wait += epoch - self.last_validated - 1
            self.last_validated = epoch
            super().on_epoch_end(epoch, logs)
        if self.average_from is not None and epoch + 1 >= self.average_from:
            self._add_to_mean(self.model.get_weights())
        if self.writes_state:
            self._save(epoch)

    def _add_to_mean(self, weights: list[np.ndarray]) -> None:
        # A running mean in float64: the n-th epoch's weights move it by 1/n of
        # their distance, so no sum of many epochs' weights is ever held.
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

    def _empty_curve(self) -> dict[str, list]:
        return {k: [] for k in CURVE_KEYS + self.extra_curve}

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
        # The previous epoch's state stays: a kill between this write and the
        # model backup resumes at this epoch again and needs it.
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
        # States written before weight averaging existed hold no mean.
        self.averaged_epochs = meta.get("averaged_epochs", 0)
        self._mean_weights = means or None


def _epoch_of(path: Path) -> int:
    return int(path.stem.rpartition("_")[2])


def resumable_fit(
    trainer: tf.keras.Model,
    train_batches: EpochBatches,
    val_batches: EpochBatches,
    *,
    strategy: tf.distribute.Strategy,
    epochs: int,
    early_stopping: ResumableEarlyStopping,
    tb_dir: Path | None,
    backup_dir: Path | None,
    validation_freq: int | Sequence[int] = 1,
    first: Sequence[tf.keras.callbacks.Callback] = (),
    last: Sequence[tf.keras.callbacks.Callback] = (),
    log: Callable[[str], None] = print,
) -> float:
    """Runs Keras `fit` with live TensorBoard and a per-epoch backup; returns the seconds it took.

        seconds = resumable_fit(trainer, train_batches, val_batches, strategy=strategy,
                                epochs=5, early_stopping=stopping,
                                tb_dir=out / "tb_abc", backup_dir=out / "backup_abc")

    Callbacks, in this order: `first` (which may add to the logs: early stopping
    and TensorBoard see what they add), `early_stopping` (its state reaches the
    disk before the backup), `LearningRateLogger`, Keras' `TensorBoard` into
    `tb_dir` (scalars after every epoch: train/ and validation/ runs), Keras'
    `BackupAndRestore` into `backup_dir/keras`, then `last`. A `backup_dir`
    that exists is resumed from (said in a line): Keras restores weights,
    optimizer and epoch, `early_stopping` its own state, and `train_batches`
    must start at the restored epoch (its `first_epoch`). None leaves out
    TensorBoard or the backup. Keras writes both from the chief only. A write
    that fails (full disk) is one line, a PipelineError.
    """
    callbacks: list[tf.keras.callbacks.Callback] = [
        *first,
        early_stopping,
        LearningRateLogger(),  # before TensorBoard, which writes the logs
    ]
    if tb_dir is not None:
        callbacks.append(
            tf.keras.callbacks.TensorBoard(str(tb_dir), write_graph=False, profile_batch=0)
        )
    if backup_dir is not None:
        callbacks.append(tf.keras.callbacks.BackupAndRestore(str(backup_dir / "keras")))
        if backup_dir.exists():
            log(f"resuming from {backup_dir} (remove it to train from the start)")
    callbacks.extend(last)
    started = time.perf_counter()
    try:
        trainer.fit(
            distribution.distributed(strategy, train_batches),
            epochs=epochs,
            steps_per_epoch=train_batches.steps,
            validation_data=distribution.distributed(strategy, val_batches),
            validation_steps=val_batches.steps,
            validation_freq=validation_freq,
            callbacks=callbacks,
            verbose=0,
        )
    except (OSError, tf.errors.OpError) as e:
        # TensorBoard's writer and the backup report a full disk as
        # ResourceExhaustedError; running out of (GPU) memory is not a write.
        folders = [d for d in (tb_dir, backup_dir) if d is not None]
        if write_failure_kind(e) is None or not folders:
            raise
        names = ", ".join(f"{d.name}/" for d in folders)
        raise PipelineError(
            f"cannot write the training logs in {folders[0].parent} ({names}): "
            f"{describe_write_error(e)}; free space or choose another --out_dir"
        ) from None
    return time.perf_counter() - started
