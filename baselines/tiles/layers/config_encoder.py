"""Per-dimension config encoding: each tile bound beside the matching dim of the kernel."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.layers.pointwise import PointwiseDense
from baselines.tiles.data import CONFIG_FEAT_DIM
from baselines.tiles.features import LAYOUT_COLUMN, LAYOUT_POSITION_COLUMN, NUM_DIMS, SHAPE_COLUMN

# Config columns of dim d: kernel (d), output (8 + d) and input (16 + d) bounds.
BOUND_GROUPS = (0, 8, 16)
# A token's layout: column 134 + d ("minor_to_major") or `layout_positions` ("position").
DIM_LAYOUTS = ("minor_to_major", "position")


def distinct_rows(group: tf.Tensor, values: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(first row of each, row -> its number) of the distinct (group [n] int32, values [n, m]
    float32 by bits) rows, values[first][index] == values: a unique per column."""
    index = tf.cast(group, tf.int64)
    bits = tf.bitwise.bitwise_and(tf.cast(tf.bitcast(values, tf.int32), tf.int64), 0xFFFFFFFF)
    for column in range(values.shape[-1]):
        key = tf.bitwise.bitwise_or(tf.bitwise.left_shift(index, 32), bits[:, column])
        distinct, index = tf.unique(key, out_idx=tf.int64)
    first = tf.math.unsorted_segment_min(
        tf.range(tf.shape(index, out_type=tf.int64)[0]), index, tf.size(distinct, tf.int64)
    )
    return first, index


class PerDimConfigEncoder(tf.keras.layers.Layer):
    """Encodes a config as six per-dimension tokens, pooled by sum and max: token d holds the
    config's kernel, output and input bound of d (columns d, 8 + d, 16 + d), the kernel's
    shape dim d (node column 21 + d), its layout (`dim_layout`) and a one-hot of d. The
    kernel's dims come from attention over its ops' states, one per head. Output
    `[sum_d MLP(token) ; max_d MLP(token) ; configs]`, [b, k, 2 * units + 24]."""

    def __init__(
        self,
        units: int,
        activation="leaky_relu",
        num_heads: int = 1,
        dim_layout: str = "minor_to_major",
        **kw,
    ):
        super().__init__(**kw)
        if num_heads < 1:
            raise ValueError(f"tiled_op_heads must be at least 1, got {num_heads}")
        if dim_layout not in DIM_LAYOUTS:
            raise ValueError(
                f"dim_layout must be one of {', '.join(DIM_LAYOUTS)}, got {dim_layout!r}"
            )
        self.units = units
        self.num_heads = num_heads
        self.dim_layout = dim_layout
        self.tiled_op_score = tf.keras.layers.Dense(num_heads, name="tiled_op_score")
        self.token_layers = [
            PointwiseDense(units, activation=activation, name=f"token_{i}") for i in range(2)
        ]

    @property
    def output_width(self) -> int:
        return 2 * self.units + CONFIG_FEAT_DIM

    def build(self, input_shape=None) -> None:
        """Creates the weights for op states of shape `input_shape` ([num_ops, d])."""
        if input_shape is not None and tf.TensorShape(input_shape).rank == 2:
            self.tiled_op_score.build(tf.TensorShape(input_shape))
            width = len(BOUND_GROUPS) + 2 * self.num_heads + NUM_DIMS
            for layer in self.token_layers:
                layer.build(tf.TensorShape([None, width]))
                width = layer.units
        super().build(input_shape)

    def encode_tokens(self, bounds: tf.Tensor, kernel_dims: tf.Tensor) -> tf.Tensor:
        """The token MLP of every (kernel, config, dim), once per distinct row: bounds [b, k, 6, 3],
        kernel_dims [b, 6, 2 * heads] -> [6, b, k, units] (dimension-major)."""
        shape = tf.shape(bounds)
        # Row key: kernel * 6 + d, then the bounds (exact equality of their bits).
        group = tf.reshape(
            tf.broadcast_to(
                tf.reshape(tf.range(shape[0] * NUM_DIMS), [shape[0], 1, NUM_DIMS]), shape[:3]
            ),
            [-1],
        )
        rows = tf.reshape(bounds, [-1, len(BOUND_GROUPS)])
        first, index = distinct_rows(group, rows)
        group = tf.gather(group, first)
        tokens = tf.concat(
            [
                tf.gather(rows, first),
                tf.gather(tf.reshape(kernel_dims, [-1, 2 * self.num_heads]), group),
                tf.one_hot(group % NUM_DIMS, NUM_DIMS, dtype=tf.float32),
            ],
            axis=-1,
        )  # [distinct tokens, 9 + 2 heads]
        for layer in self.token_layers:
            tokens = layer(tokens)
        by_dim = tf.transpose(tf.reshape(index, [-1, NUM_DIMS]))  # [6, b * k]
        return tf.reshape(
            tf.gather(tokens, by_dim), tf.concat([[NUM_DIMS], shape[:2], [self.units]], 0)
        )

    def call(self, graph: tfgnn.GraphTensor, op_states: tf.Tensor, configs: tf.Tensor) -> tf.Tensor:
        feats = graph.node_sets["op"]["feats"]
        weights = tfgnn.softmax(
            graph, tfgnn.CONTEXT, node_set_name="op", feature_value=self.tiled_op_score(op_states)
        )
        columns = [SHAPE_COLUMN + d for d in range(NUM_DIMS)]
        layout = LAYOUT_POSITION_COLUMN if self.dim_layout == "position" else LAYOUT_COLUMN
        columns += [layout + d for d in range(NUM_DIMS)]
        # [ops, heads, 12] -> per kernel [b, heads, 12]
        picked = weights[:, :, None] * tf.gather(feats, columns, axis=1)[:, None, :]
        dims = tfgnn.pool_nodes_to_context(graph, "op", "sum", feature_value=picked)
        bounds = tf.stack(
            [configs[..., g : g + NUM_DIMS] for g in BOUND_GROUPS], axis=-1
        )  # [b, k, 6, 3]
        # [b, 6, 2 * heads]: shape dims of every head, then layout entries
        halves = (dims[:, :, :NUM_DIMS], dims[:, :, NUM_DIMS:])
        kernel_dims = tf.concat([tf.transpose(half, [0, 2, 1]) for half in halves], axis=-1)
        tokens = self.encode_tokens(bounds, kernel_dims)  # [6, b, k, units]
        return tf.concat(
            [tf.reduce_sum(tokens, axis=0), tf.reduce_max(tokens, axis=0), configs], axis=-1
        )
