"""The in-memory form of one layout file: a program graph and its configurations.

`LayoutGraph` is what `baselines.layout.data.read_layout_file` returns and what the
config and pruning helpers in `baselines.layout.prune` take and give back.

Selecting configurations never copies `node_config_feat` (for a cached split a
large read-only memory map): every reader goes through `config_block`, so a
pass over a split holds a block resident, not the split.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from baselines.core.array_cache import release_mapped_pages

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
      node_config_feat  int8    (s, nc, 18) the stored configurations' minor-to-major
                                         orders, -1..5 (exact); s >= c, read them with
                                         `config_block`
      config_runtime    int64   (c,)     whole-program runtime; all 0 in test files
      node_splits       int64   (k,)     computation boundaries as stored in the file
                                         (flattened from (1, k); real files end with n)
      config_rows       int64   (c,)     configuration i is node_config_feat[config_rows[i]];
                                         None: every stored row in order (c == s)
    """

    graph_id: str
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    node_config_ids: np.ndarray
    node_config_feat: np.ndarray
    config_runtime: np.ndarray
    node_splits: np.ndarray
    config_rows: np.ndarray | None = None

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
        """The same graph with only the configurations at `indices`, in that order.

        Lazy: the new graph shares `node_config_feat` and holds the composed row
        indices; only the runtimes are copied.
        """
        indices = np.array(indices, dtype=np.int64).reshape(-1)  # a copy: the caller's may change
        rows = indices if self.config_rows is None else self.config_rows[indices]
        return dataclasses.replace(
            self, config_runtime=self.config_runtime[indices], config_rows=rows
        )

    def config_block(self, slots: np.ndarray) -> np.ndarray:
        """int8 (len(slots), nc, 18): the values of configurations `slots` (indices < c)."""
        return read_config_rows(self.node_config_feat, self.config_rows, slots)

    def compact_configs(self) -> LayoutGraph:
        """The graph with its selected configurations copied into an array of their own.

        For graphs read into memory, whose stored array would otherwise be kept
        whole for the few rows selected.
        """
        if self.config_rows is None:
            return self
        values = self.config_block(np.arange(self.num_configs))
        return dataclasses.replace(self, node_config_feat=values, config_rows=None)


def read_config_rows(
    values: np.ndarray, config_rows: np.ndarray | None, slots: np.ndarray
) -> np.ndarray:
    """int8 (len(slots), nc, 18): `values[config_rows[slots]]`, reading only those rows.

    `config_rows` None selects every row of `values` in order. A contiguous run
    of rows is read as one slice; other rows are read in ascending order, each
    once (a memory map reads sorted rows faster), and then put in `slots`' order.
    """
    slots = np.asarray(slots, dtype=np.int64).reshape(-1)
    rows = slots if config_rows is None else np.asarray(config_rows)[slots]
    contiguous = rows.size and 0 <= rows[0] and rows[-1] < values.shape[0]
    if contiguous and np.all(np.diff(rows) == 1):
        span = values[rows[0] : rows[-1] + 1]
        block = np.asarray(span, dtype=np.int8).copy()
        release_mapped_pages(span)
        return block
    unique, inverse = np.unique(rows, return_inverse=True)
    block = np.asarray(values[unique], dtype=np.int8)
    if unique.size:
        # A memory map's pages, once read, stay resident: over an epoch that
        # would be every configuration a graph holds.
        release_mapped_pages(values[unique[0] : unique[-1] + 1])
    return block if unique.size == rows.size and np.array_equal(unique, rows) else block[inverse]
