"""The in-memory form of one layout file: a program graph and its configurations (a `Codebook`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from baselines.core.format import NodeRows
from baselines.layout.codebook import WIDTH, Codebook

NODE_CONFIG_FEAT_DIM = WIDTH

# Minor-to-major dimension numbers of tensors of rank <= 6; -1: none / compiler default.
CONFIG_VALUE_MIN = -1
CONFIG_VALUE_MAX = 5


# eq=False: a generated __eq__ would compare arrays elementwise and raise.
@dataclasses.dataclass(frozen=True, eq=False)
class LayoutGraph(NodeRows):
    """One program graph with `c` layout configurations of its `nc` configurable nodes.

    Arrays (n nodes, m edges, k computation boundaries):
      node_feat         float32 (n, 140)
      node_opcode       int32   (n,)
      edge_index        int32   (m, 2)   row [u, v]: node u consumes node v's output
      node_config_ids   int32   (nc,)    ids of the configurable nodes, unique
      configs           Codebook         the c configurations' minor-to-major orders, -1..5
      config_runtime    int64   (c,)     whole-program runtime; all 0 in test files
      node_splits       int64   (k,)     computation boundaries (flattened from (1, k))
      config_count      int64   (c,)     how often each configuration occurs in its file, as
                                         read (before duplicates are dropped); None: not counted
    """

    graph_id: str
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    node_config_ids: np.ndarray
    configs: Codebook
    config_runtime: np.ndarray
    node_splits: np.ndarray
    config_count: np.ndarray | None = None

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[0])

    @property
    def num_configurable(self) -> int:
        return int(self.node_config_ids.shape[0])

    @property
    def num_configs(self) -> int:
        return int(self.config_runtime.shape[0])

    @property
    def has_labels(self) -> bool:
        """False for test files, whose runtimes are all 0 (hidden)."""
        return bool(np.any(self.config_runtime != 0))

    @property
    def node_config_feat(self) -> np.ndarray:
        """int8 (c, nc, 18): every configuration's rows, decoded (for small graphs and tests)."""
        return self.configs.values()

    def select_configs(self, indices: np.ndarray) -> LayoutGraph:
        """The same graph with only the configurations at `indices`, in that order (lazy)."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)  # `select` keeps a copy
        count = None if self.config_count is None else self.config_count[indices]
        return dataclasses.replace(
            self,
            config_runtime=self.config_runtime[indices],
            configs=self.configs.select(indices),
            config_count=count,
        )

    def config_block(self, slots: np.ndarray) -> np.ndarray:
        """int8 (len(slots), nc, 18): the values of configurations `slots` (indices < c)."""
        return self.configs.values(slots)
