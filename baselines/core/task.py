"""What a collection hands the conductor (`core/conductor.py`): a task, and the data it read.
No TensorFlow at import: entry scripts import a task module before TensorFlow."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf

    from baselines.core.keras_fit import EpochBatches


@dataclasses.dataclass
class Loaded:
    """A run's data as its task read it: `identity` names the data (None: the flags name the
    run), `toy_fallback`: the toy set stood in, `notice`: said again when the run ends."""

    train: Any
    valid: Any
    test: Any = None
    facts: dict[str, Any] = dataclasses.field(default_factory=dict)
    identity: str | None = None
    toy_fallback: bool = False
    notice: str | None = None


class Task(abc.ABC):
    """What a collection hands the conductor; the hooks with a body are the usual defaults."""

    collection: str  # written into the run record: "tile" or "layout"
    unit: str  # what one ranked list is: "kernel" or "graph"
    # Scalars the HParams dashboard shows beside each run's flags: (tag, run, title).
    hparams_metrics: tuple[tuple[str, str, str], ...] = ()
    # Flags that name where things are, not what was trained: left out of HParams.
    not_hparams: tuple[str, ...] = ("out_dir", "cache_dir")

    @abc.abstractmethod
    def check(self, args: Any, log: Callable[[str], None]) -> None:
        """Checks the flags and the model's name and kwargs (PipelineError), before any data."""

    @abc.abstractmethod
    def load(self, args: Any, progress: bool, log: Callable[[str], None]) -> Loaded:
        """Reads the train, validation (and test) data of a run."""

    @abc.abstractmethod
    def most_configs(self, loaded: Loaded) -> int:
        """The most configurations any train graph has (`--configs` is capped at it)."""

    @abc.abstractmethod
    def batches(
        self, args: Any, loaded: Loaded, configs: int, replicas: int
    ) -> tuple[EpochBatches, EpochBatches]:
        """The train batches and the validation batches (one fixed sample per graph)."""

    @abc.abstractmethod
    def build_model(self, args: Any, configs: int) -> tf.keras.Model:
        """The model of `args`, scoring `configs` configurations per graph, its variables made."""

    @abc.abstractmethod
    def to_model_inputs(self, batch: dict[str, tf.Tensor]) -> Any:
        """What the model's `forward` reads, from a batch of tensors."""

    @abc.abstractmethod
    def evaluate(
        self, args: Any, model: tf.keras.Model, loaded: Loaded, record: dict, progress: bool, log
    ) -> tuple[dict[str, Any], Any]:
        """(the record's evaluation fields, with a `timings` dict; what `finish` needs)."""

    def schedule(
        self, args: Any, steps_per_epoch: int, log: Callable[[str], None]
    ) -> tuple[int, int | list[int]]:
        """(epochs to train, Keras `validation_freq`) by `--max_train_steps`, `--eval_every`."""
        from baselines.core.optimizers import effective_epochs

        epochs = effective_epochs(args.epochs, args.max_train_steps, steps_per_epoch, log)
        return epochs, args.validation_epochs(epochs)

    def optimizer(self, args: Any, epochs: int, steps_per_epoch: int):
        """Adam or AdamW (`--optimizer`) along `--lr_schedule`, clipped to `--clip_norm`."""
        from baselines.core.optimizers import learning_rate, make_optimizer

        rate = learning_rate(args.lr, args.lr_schedule, epochs, steps_per_epoch, args.warmup_epochs)
        decay = args.weight_decay if args.optimizer == "adamw" else None
        return make_optimizer(rate, args.clip_norm, decay)

    def callbacks(
        self, val_batches: EpochBatches
    ) -> tuple[list[tf.keras.callbacks.Callback], tuple[str, ...]]:
        """Callbacks that add to an epoch's logs, and the curve keys they add."""
        return [], ()

    def run_label(self, args: Any, run_hash: str) -> str:
        return f"{args.model}-{run_hash[:8]}"

    def finish(self, args: Any, record: dict, outputs: Any, loaded: Loaded, log) -> None:
        """What follows the saved run (e.g. a results CSV); may add to `record`."""
        return None
