"""The core training loop (`baselines.core.keras_fit`) bound to tile kernels.

trainer = RankingTrainer(tile_model, loss_fn, num_configs=10)
train_batches = EpochBatches(train_split, batch=10, num_configs=10, seed=0)
"""

from __future__ import annotations

import tensorflow as tf

from baselines.core import keras_fit as core
from baselines.core.keras_fit import (  # noqa: F401 (the loop's other parts, for callers)
    STEPS_PER_EXECUTION,
    PooledOPA,
    compile_trainer,
    replica_chunks,
)
from baselines.core.runner import (  # noqa: F401 (the conductor's parts, for callers)
    CURVE_KEYS,
    EpochTimer,
    LearningRateLogger,
    ResumableEarlyStopping,
    StepProgress,
    resumable_fit,
)
from baselines.tiles.data import TileSplit
from baselines.tiles.graph import batch_source, graph_from_batch


class RankingTrainer(core.RankingTrainer):
    """`core.RankingTrainer` reading tile batches (`graph.graph_from_batch`)."""

    def __init__(self, tile_model: tf.keras.Model, loss_fn, num_configs: int):
        super().__init__(tile_model, loss_fn, num_configs, to_graph=graph_from_batch)


class EpochBatches(core.EpochBatches):
    """`core.EpochBatches` of a tile split's kernels (`graph.batch_source`)."""

    def __init__(self, split: TileSplit, batch: int, num_configs: int, seed: int, **kwargs):
        super().__init__(batch_source(split), batch, num_configs, seed, **kwargs)
        self.tile_split = split
