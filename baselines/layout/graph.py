"""The in-memory form of one layout file: a program graph and its configurations.

`LayoutGraph` is what `baselines.layout.data.read_layout_file` returns and what the
config and pruning helpers in `baselines.layout.prune` take and give back:

    graph = read_layout_file("npz/layout/xla/default/train/unet3d.npz")
    print(graph.num_nodes, graph.num_configurable, graph.num_configs)
    first_ten = graph.select_configs(np.arange(10))
"""

from __future__ import annotations

import dataclasses

import numpy as np

NODE_CONFIG_FEAT_DIM = 18
# Layout groups hold minor-to-major dimension numbers of tensors of rank <= 6,
# and -1 for "no dimension" / "compiler default".
CONFIG_VALUE_MIN = -1
CONFIG_VALUE_MAX = 5


# eq=False: the fields are arrays, whose == is elementwise, so a generated
# __eq__ would raise; identity comparison is what callers get instead.
@dataclasses.dataclass(frozen=True, eq=False)
class LayoutGraph:
    """One program graph with `c` layout configurations of its `nc` configurable nodes.

    Arrays (n nodes, m edges, k computation boundaries):
      node_feat         float32 (n, 140)
      node_opcode       int32   (n,)
      edge_index        int32   (m, 2)   row [u, v]: node u consumes node v's output
      node_config_ids   int32   (nc,)    ids of the configurable nodes, unique
      node_config_feat  int8    (c, nc, 18) minor-to-major orders, -1..5 (exact)
      config_runtime    int64   (c,)     whole-program runtime; all 0 in test files
      node_splits       int64   (k,)     computation boundaries as stored in the file
                                         (flattened from (1, k); real files end with n)
    """

    graph_id: str
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    node_config_ids: np.ndarray
    node_config_feat: np.ndarray
    config_runtime: np.ndarray
    node_splits: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])

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

    def select_configs(self, indices: np.ndarray) -> LayoutGraph:
        """The same graph with only the configurations at `indices`, in that order."""
        indices = np.asarray(indices, dtype=np.int64)
        return dataclasses.replace(
            self,
            node_config_feat=self.node_config_feat[indices],
            config_runtime=self.config_runtime[indices],
        )
