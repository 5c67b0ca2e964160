"""Compiled, chunked scoring of every configuration of every kernel.

One `tf.function` with a fully dynamic input signature scores a batch, so a
whole split runs through a single trace. Each kernel's configurations are cut
into chunks small enough that early-join models, whose states are
[ops, configs, hidden], keep memory bounded on kernels with thousands of
configurations.

    scorer = ConfigScorer(model)
    scores = scorer.score_split(split)     # list of [num_configs] arrays
    metrics.top_configs(scores[0], 5)
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tqdm

from baselines.tiles.data import TileSplit
from baselines.tiles.graph import BATCH_SIGNATURE, assemble_batch, graph_from_batch, to_tensors
from baselines.tiles.models import TileModel, configs_per_kernel


class ConfigScorer:
    """Scores configurations with `model.forward` under one compiled function.

    `max_elements` bounds ops x configs per call (the early-join state size);
    `max_configs` bounds configurations per call.
    """

    def __init__(self, model: TileModel, max_elements: int = 1 << 20, max_configs: int = 4096):
        self.model = model
        self.max_elements = max_elements
        self.max_configs = max_configs
        self.traces = 0
        self._score = tf.function(self._score_batch, input_signature=[BATCH_SIGNATURE])

    def _score_batch(self, batch: dict[str, tf.Tensor]) -> tf.Tensor:
        self.traces += 1  # Runs only while tracing.
        graph = graph_from_batch(batch)
        return self.model.forward(graph, configs_per_kernel(graph), training=False)

    def chunk_size(self, num_nodes: int) -> int:
        return int(max(1, min(self.max_configs, self.max_elements // max(num_nodes, 1))))

    def score_kernel(self, split: TileSplit, i: int) -> np.ndarray:
        """Scores of all configurations of kernel i, in file order."""
        num_configs = int(split.num_configs[i])
        step = self.chunk_size(int(split.num_nodes[i]))
        parts = []
        for start in range(0, num_configs, step):
            slots = np.arange(start, min(start + step, num_configs))
            batch = assemble_batch(split, [i], [slots], slots.shape[0])
            parts.append(self._score(to_tensors(batch)).numpy()[0])
        return np.concatenate(parts)

    def score_split(
        self, split: TileSplit, progress: bool = True, desc: str | None = None
    ) -> list[np.ndarray]:
        return [
            self.score_kernel(split, i)
            for i in tqdm.trange(
                len(split), desc=desc or f"rank {split.name}", unit="kernel", disable=not progress
            )
        ]
