"""tf.distribute for training: which strategy `--strategy` names, and who writes."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from typing import Any

from baselines.core.errors import PipelineError
from baselines.core.startup import available_cores

STRATEGIES = ("default", "mirrored", "multi_worker")


def add_strategy_flag(parser: argparse.ArgumentParser) -> None:
    """Adds `--strategy` to an entry script's parser; not in the run's args or hash."""
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="default",
        help="tf.distribute strategy: default (one device), mirrored (all local GPUs, "
        "else the CPU split into one device per core), "
        "multi_worker (MultiWorkerMirroredStrategy, needs TF_CONFIG); "
        "not part of the run hash",
    )


def check_strategy_environment(name: str, tf_config: str | None) -> None:
    """Refuses a strategy its environment cannot serve (multi_worker: TF_CONFIG); no TensorFlow."""
    if name == "multi_worker":
        check_tf_config(tf_config)


def make_strategy(name: str) -> Any:
    """The tf.distribute strategy `--strategy` names (CPU-only mirrored: a device per core)."""
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        if not tf.config.list_physical_devices("GPU"):
            split_cpu(available_cores())
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    if name == "multi_worker":
        check_tf_config(os.environ.get("TF_CONFIG"))
        return tf.distribute.MultiWorkerMirroredStrategy()
    raise PipelineError(f"--strategy: '{name}' is not one of {', '.join(STRATEGIES)}")


def split_cpu(count: int) -> None:
    """Splits the physical CPU into `count` logical devices, unless split or initialized already."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    if count < 2 or tf.config.get_logical_device_configuration(cpu):
        return
    with contextlib.suppress(RuntimeError):  # devices already initialized: keep them
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )


def check_tf_config(text: str | None) -> None:
    """TF_CONFIG must name a cluster and this process's task in it."""
    advice = (
        "set TF_CONFIG to e.g. "
        '\'{"cluster": {"worker": ["host1:port", "host2:port"]}, '
        '"task": {"type": "worker", "index": 0}}\' on every worker '
        '(docs/usage.md, "Training on N GPUs or N machines")'
    )
    if not text:
        raise PipelineError(f"--strategy=multi_worker: TF_CONFIG is not set; {advice}")
    try:
        config = json.loads(text)
        task_type, index = config["task"]["type"], int(config["task"]["index"])
        members = config["cluster"][task_type]
        if not 0 <= index < len(members):
            raise IndexError(f"task index {index} is not in cluster['{task_type}']")
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise PipelineError(f"--strategy=multi_worker: bad TF_CONFIG ({e}); {advice}") from None


def is_chief(strategy: Any) -> bool:
    """True for the one process that writes models, run files and logs."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief


def distributed(strategy: Any, batches: Any) -> Any:
    """`keras_fit.EpochBatches` as Keras `fit` takes them under `strategy`."""
    import tensorflow as tf

    if strategy.num_replicas_in_sync == 1 and not isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    ):
        return batches.dataset()
    return strategy.distribute_datasets_from_function(batches.dataset)
