"""Tile cost models: every public `TileModel` subclass defined here is a model, found by class
name (`--model=MyModel`). It takes `(num_configs, num_ops, **kwargs)` and
`forward(graph, num_configs)` returns scores [batch, num_configs], lower = predicted faster
(docs/adding_a_model.md)."""

from __future__ import annotations

import tensorflow as tf

from baselines.core.model_lookup import check_bool, check_int
from baselines.tiles.data import OPCODE_VOCAB_SIZE
from baselines.tiles.layers import (
    ChebConv,
    GATv2Block,
    PerDimConfigEncoder,
    PointwiseDense,
    ResGCNConv,
    SAGEConv,
)
from baselines.tiles.model_base import ConvStack, EarlyJoinModel, LateJoinModel

CHEB_LAYOUTS = ("parallel", "interleaved")
CONFIG_ENCODINGS = ("flat", "per_dim")


class MLP(LateJoinModel):
    """No message passing: the sum of op states joined with each config, then an MLP."""


class EarlyJoinSAGE(ConvStack, EarlyJoinModel):
    """Config features on every op node, then GraphSAGE layers, sum pooling, MLP."""

    conv_class = SAGEConv


class LateJoinSAGE(ConvStack, LateJoinModel):
    """GraphSAGE layers on the op graph, pooled, then joined with each config."""

    conv_class = SAGEConv


class EarlyJoinResGCN(ConvStack, EarlyJoinModel):
    """Config features on every op node, then residual GCN layers, sum pooling, MLP."""

    conv_class = ResGCNConv


class LateJoinResGCN(ConvStack, LateJoinModel):
    """Residual GCN layers on the op graph, pooled, then joined with each config."""

    conv_class = ResGCNConv


class LateJoinGAT(LateJoinModel):
    """GATv2 blocks (both edge directions, residual, LayerNorm), sum/mean/max pooling; the head
    sees [kernel ; config ; gate(kernel) * proj(config)], the product judging a tile for this
    kernel. `config_encoding="per_dim"`: six per-dimension config tokens beside the dims of
    `tiled_op_heads` ops picked by attention (`PerDimConfigEncoder`, `dim_layout`)."""

    def __init__(
        self,
        num_configs: int,
        num_ops: int = OPCODE_VOCAB_SIZE,
        num_layers: int = 3,
        num_heads: int = 4,
        directed: bool = True,
        config_encoding: str = "flat",
        tiled_op_heads: int = 1,
        dim_layout: str = "minor_to_major",
        dropout: float = 0.1,
        reduction: str = "sum+mean+max",
        **kwargs,
    ):
        super().__init__(num_configs, num_ops, dropout=dropout, reduction=reduction, **kwargs)
        check_bool("directed", directed)
        if not directed:
            raise ValueError(
                "directed=false: LateJoinGAT always attends along each edge direction "
                "with its own weights (directed); there is no shared-weight variant"
            )
        if config_encoding not in CONFIG_ENCODINGS:
            raise ValueError(
                f"config_encoding must be one of {', '.join(CONFIG_ENCODINGS)}, "
                f"got {config_encoding!r}"
            )
        if tiled_op_heads < 1 or (tiled_op_heads != 1 and config_encoding != "per_dim"):
            raise ValueError(
                f"tiled_op_heads {tiled_op_heads} needs config_encoding 'per_dim' and a value >= 1"
            )
        if dim_layout != "minor_to_major" and config_encoding != "per_dim":
            raise ValueError(f"dim_layout {dim_layout!r} needs config_encoding 'per_dim'")
        self.num_layers = num_layers
        self.directed = directed
        self.blocks = [
            GATv2Block(self.hidden_dim, num_heads, self.dropout_rate, name=f"gat_{i}")
            for i in range(num_layers)
        ]
        if config_encoding == "per_dim":
            self.config_encoder = PerDimConfigEncoder(
                self.config_dim, self.activation, tiled_op_heads, dim_layout, name="config_encoder"
            )
        self.kernel_gate = tf.keras.layers.Dense(self.config_dim, name="kernel_gate")
        self.config_projection = PointwiseDense(self.config_dim, name="config_proj")

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return list(self.blocks)

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        for block in self.blocks:
            states = block(graph, states, training=training)
        return states


class ChebSAGE(EarlyJoinModel):
    """Config features on every op node, then ChebNet and GraphSAGE layers: `num_layers`
    alternating (`cheb_layout="interleaved"`) or `num_layers` of each as two concatenated
    branches ("parallel"). Chebyshev order `cheb_order` - 1; `directed`: SAGE's."""

    def __init__(
        self,
        num_configs: int,
        num_ops: int = OPCODE_VOCAB_SIZE,
        num_layers: int = 3,
        directed: bool = False,
        cheb_order: int = 3,
        cheb_layout: str = "interleaved",
        **kwargs,
    ):
        super().__init__(num_configs, num_ops, **kwargs)
        check_bool("directed", directed)
        check_int("cheb_order", cheb_order, 1)
        if cheb_layout not in CHEB_LAYOUTS:
            raise ValueError(
                f"cheb_layout must be one of {', '.join(CHEB_LAYOUTS)}, got {cheb_layout!r}"
            )
        self.num_layers = num_layers
        self.directed = directed
        self.cheb_layout = cheb_layout

        def cheb(i: int) -> ChebConv:
            return ChebConv(self.hidden_dim, cheb_order, self.activation, name=f"cheb_{i}")

        def sage(i: int) -> SAGEConv:
            return SAGEConv(self.hidden_dim, self.activation, directed=directed, name=f"sage_{i}")

        # Attribute names are the variables' paths in saved models: keep them.
        if cheb_layout == "parallel":
            self.cheb_branch = [cheb(i) for i in range(num_layers)]
            self.sage_branch = [sage(i) for i in range(num_layers)]
        else:
            self.stack = [sage(i) if i % 2 else cheb(i) for i in range(num_layers)]

    @property
    def branches(self) -> list[list[tf.keras.layers.Layer]]:
        """The layer sequences that start from the early-join states, in concat order."""
        if self.cheb_layout == "parallel":
            return [self.cheb_branch, self.sage_branch]
        return [self.stack]

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return [conv for branch in self.branches for conv in branch]

    def state_dim(self) -> int:
        return len(self.branches) * self.hidden_dim

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        outputs = []
        for branch in self.branches:
            x = states
            for conv in branch:
                x = conv(graph, x)
            outputs.append(x)
        return outputs[0] if len(outputs) == 1 else tf.concat(outputs, axis=-1)
