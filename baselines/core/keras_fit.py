"""Training under Keras `fit`: a ranking train step and its batches, for any collection."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from baselines.core import metrics


def sample_config_slots(rng: np.random.Generator, num_available: int, k: int) -> np.ndarray:
    """K configuration indices without replacement, padded with -1 when fewer exist."""
    if num_available >= k:
        return np.sort(rng.choice(num_available, size=k, replace=False))
    return np.concatenate([np.arange(num_available), np.full(k - num_available, -1)])


def vector_specs(dtype: tf.DType, *names: str) -> dict[str, tf.TensorSpec]:
    """A batch signature's [None] vectors of `dtype` (per item, node or slot), by name."""
    return {name: tf.TensorSpec([None], dtype) for name in names}


@dataclasses.dataclass(frozen=True)
class BatchSource:
    """Items to rank: their configuration counts and how a batch of `signature` is assembled."""

    num_configs: np.ndarray
    assemble: Callable[[Sequence[int], Sequence[np.ndarray], int], dict]
    signature: dict

    def __len__(self) -> int:
        return int(len(self.num_configs))


class PooledOPA(tf.keras.metrics.Metric):
    """Ordered-pair accuracy pooled over every list (and replica), as TF-Ranking's OPAMetric."""

    def __init__(self, name: str = "opa", **kwargs):
        super().__init__(name=name, dtype=tf.float64, **kwargs)
        self.correct = self.add_weight(name="correct", initializer="zeros", dtype=tf.float64)
        self.pairs = self.add_weight(name="pairs", initializer="zeros", dtype=tf.float64)

    def update_state(self, correct: tf.Tensor, pairs: tf.Tensor) -> None:
        self.correct.assign_add(tf.cast(correct, tf.float64))
        self.pairs.assign_add(tf.cast(pairs, tf.float64))

    def result(self) -> tf.Tensor:
        return self.correct / tf.maximum(self.pairs, 1.0)


# A batch's fields when a training step is split into passes (`EpochBatches(micro=...)`): the
# pass's share of the step's lists, and whether it is the step's last pass.
PASS_SIGNATURE = {
    "pass_weight": tf.TensorSpec([], tf.float32),
    "step_end": tf.TensorSpec([], tf.bool),
}


class RankingTrainer(tf.keras.Model):
    """Trains `tile_model` (any cost model) under a ranking loss; `to_graph` makes its inputs.
    `accumulate`: each batch is one pass of a step (`PASS_SIGNATURE`); the passes' gradients,
    weighted by their share, are summed and applied once at the step's end: the update of the
    whole step for a loss that is a mean over lists, with one pass's activations in memory."""

    def __init__(
        self,
        tile_model: tf.keras.Model,
        loss_fn: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
        num_configs: int,
        to_graph: Callable[[dict], object],
        accumulate: bool = False,
    ):
        super().__init__()
        self.to_graph = to_graph
        self.tile_model = tile_model
        self.loss_fn = loss_fn
        self.num_configs = num_configs
        self.gradient_sums = (
            [
                tf.Variable(tf.zeros_like(v), trainable=False, name="gradient_sum")
                for v in tile_model.trainable_variables
            ]
            if accumulate
            else None
        )
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
        # A pass counts by its share, so an epoch's mean loss is the unsplit steps' mean.
        self.loss_tracker.update_state(loss, sample_weight=batch.get("pass_weight"))
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
            if self.gradient_sums is not None:
                scaled *= batch["pass_weight"]
        variables = self.tile_model.trainable_variables
        gradients = tape.gradient(scaled, variables)
        if self.gradient_sums is None:
            self.optimizer.apply_gradients(zip(gradients, variables))
        else:
            self._accumulate(gradients, batch)
        return self._update(batch, scores, loss)

    def _accumulate(self, gradients: list, batch: dict[str, tf.Tensor]) -> None:
        """Adds a pass's gradients to the sums; at the step's end applies and clears them."""
        variables = self.tile_model.trainable_variables
        for total, gradient in zip(self.gradient_sums, gradients):
            if gradient is not None:
                total.assign_add(tf.convert_to_tensor(gradient))

        def apply() -> tf.Tensor:
            sums = [tf.identity(total) for total in self.gradient_sums]
            self.optimizer.apply_gradients(zip(sums, variables))
            with tf.control_dependencies(sums):
                for total in self.gradient_sums:
                    total.assign(tf.zeros_like(total))
            return tf.constant(True)

        tf.cond(batch["step_end"], apply, lambda: tf.constant(False))

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
        """`steps_per_execution` steps in one compiled call (`strategy.run`), `step` traced once."""
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


# Steps per call of Keras' compiled function (at one, `fit` spent as long between steps as in one).
STEPS_PER_EXECUTION = 32


def capped_configs(configs: int, most: int, unit: str, log: Callable[[str], None]) -> int:
    """`--configs`, capped (said in a line) at the most configurations a train `unit` has."""
    if configs <= most:
        return configs
    log(
        f"--configs={configs} is more than the largest train {unit} has ({most:,}); "
        f"sampling {most:,} per {unit} and step"
    )
    return most


def compile_trainer(trainer: tf.keras.Model, optimizer: tf.keras.optimizers.Optimizer) -> None:
    """`trainer.compile` with `STEPS_PER_EXECUTION` steps per call (one under several replicas)."""
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    steps = STEPS_PER_EXECUTION if replicas == 1 else 1
    trainer.compile(optimizer=optimizer, steps_per_execution=steps)


def replica_chunks(order: np.ndarray, batch: int, num_replicas: int) -> list[list[np.ndarray]]:
    """Positions of `order` per global step and replica, each global batch split evenly; a last
    batch smaller than the replica count is topped up from the epoch's start."""
    steps = []
    for start in range(0, len(order), batch):
        positions = np.arange(start, min(start + batch, len(order)))
        if len(positions) < num_replicas:
            positions = np.resize(np.concatenate([positions, np.arange(len(order))]), num_replicas)
        steps.append(np.array_split(positions, num_replicas))
    return steps


def pass_chunks(positions: np.ndarray, micro: int) -> list[np.ndarray]:
    """A step's positions as passes of at most `micro` items, in order."""
    return [positions[i : i + micro] for i in range(0, len(positions), micro)]


class EpochBatches:
    """A `BatchSource`'s batches epoch after epoch from `first_epoch()`, epoch e drawn from seed
    [seed, e] (a resumed run draws the same); `fixed_epoch`: the same batches every epoch.
    `micro` > 0: each step comes as passes of at most `micro` items (`PASS_SIGNATURE` fields),
    one Keras step each; `updates` counts the optimizer's steps, `steps` the batches."""

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
        micro: int = 0,
    ):
        if micro and (num_replicas > 1 or fixed_epoch is not None or max_steps > 0):
            raise ValueError("passes (micro) are for one replica's training batches only")
        self.split, self.batch, self.num_configs, self.seed = split, batch, num_configs, seed
        self.weights, self.fixed_epoch, self.num_replicas = weights, fixed_epoch, num_replicas
        self.first_epoch, self.micro = first_epoch, micro
        self._fixed_batches: dict[tuple[int, int], list[dict]] = {}
        self.updates = -(-len(split) // batch)
        if max_steps > 0:
            self.updates = min(self.updates, max_steps)
        self.steps = self.updates
        if micro:
            whole, rest = divmod(len(split), batch)
            self.steps = whole * -(-batch // micro) + -(-rest // micro)

    @property
    def signature(self) -> dict:
        """A batch's fields: the source's, and the pass fields when steps are split."""
        return {**self.split.signature, **(PASS_SIGNATURE if self.micro else {})}

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
                passes = pass_chunks(positions, self.micro or len(positions))
                for i, part in enumerate(passes):
                    ids = order[part].tolist()
                    batch = self.split.assemble(ids, [slots[p] for p in part], self.num_configs)
                    if self.micro:
                        batch["pass_weight"] = np.float32(len(part) / len(positions))
                        batch["step_end"] = np.bool_(i == len(passes) - 1)
                    yield batch

    def stream(self, pipeline: int = 0, num_pipelines: int = 1) -> Iterator[dict]:
        epoch = self.first_epoch()
        while True:
            yield from self.batches(epoch, pipeline, num_pipelines)
            epoch += 1

    def dataset(self, context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        """For `distribute_datasets_from_function`; assembles batches on a background thread."""
        pipeline = context.input_pipeline_id if context else 0
        num_pipelines = context.num_input_pipelines if context else 1
        # No autotuning: deleting the iterator waits for its sleeping thread (up to a minute).
        options = tf.data.Options()
        options.autotune.enabled = False
        return (
            tf.data.Dataset.from_generator(
                lambda: self.stream(pipeline, num_pipelines), output_signature=self.signature
            )
            .prefetch(2)
            .with_options(options)
        )
