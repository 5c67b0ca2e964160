"""The base classes of tile models: a join type (`LateJoinModel`, `EarlyJoinModel`) x a backbone."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.cost_model import CostModel
from baselines.core.model_lookup import check_bool, check_int, reductions
from baselines.tiles.analytic import NUM_ESTIMATES
from baselines.tiles.architecture import NUM_ARCHITECTURE
from baselines.tiles.data import CONFIG_FEAT_DIM, OPCODE_VOCAB_SIZE
from baselines.tiles.kernel_batches import (
    analytic_features,
    architecture_features,
    config_features,
    configs_per_kernel,
)
from baselines.tiles.layers import ConfigScoringHead, KernelPooling, OpEncoder, PointwiseDense


class TileModel(CostModel):
    """The parts every tile model has (op encoder, pooling, `make_head`); subclasses `forward`."""

    # Saved models keep the class name and config: Keras finds "tpugraphs_tiles>MLP", ...
    keras_package = "tpugraphs_tiles"
    # Whether the model reads the analytic estimates (prediction computes them then).
    analytic_inputs = False
    # Whether it reads the architecture inputs (its batches carry their columns then).
    architecture_inputs = False

    def __init__(
        self,
        num_configs: int,
        num_ops: int = OPCODE_VOCAB_SIZE,
        hidden_dim: int = 64,
        op_embedding_dim: int = 64,
        activation: str = "leaky_relu",
        dropout: float = 0.0,
        final_mlp_layers: int = 2,
        reduction: str = "sum",
    ):
        super().__init__(num_configs, num_ops)
        check_int("final_mlp_layers", final_mlp_layers, 0)
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.dropout_rate = dropout
        self.final_mlp_layers = final_mlp_layers
        self.pool = KernelPooling(reductions(reduction))
        self.reductions = self.pool.reductions
        self.op_encoder = OpEncoder(num_ops, op_embedding_dim, hidden_dim, activation)

    def make_head(self, width: int) -> None:
        self.head = ConfigScoringHead(
            [width] * self.final_mlp_layers, self.activation, self.dropout_rate
        )

    def build(self, input_shape=None) -> None:
        """Creates the standard parts' variables in the order `forward` calls them."""
        self.op_encoder.build(None)
        self.build_body()
        self.head.build(tf.TensorShape([None, None, self.head_input_dim()]))
        self.built = True

    def build_body(self) -> None:
        for layer in self.message_passing_layers():
            layer.build(tf.TensorShape([None, self.hidden_dim]))

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return []

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        return states

    def state_dim(self) -> int:
        """Width of the op states that message passing hands to pooling."""
        return self.hidden_dim

    def pooled_dim(self) -> int:  # pooling concatenates one state per reduction
        return self.state_dim() * len(self.reductions)

    def head_input_dim(self) -> int:
        raise NotImplementedError

    def call(self, graph: tfgnn.GraphTensor, training=None) -> tf.Tensor:
        return self.forward(graph, configs_per_kernel(graph), training=training)

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        """Scores [batch, num_configs], lower = predicted faster."""
        raise NotImplementedError


class ConvStack:
    """Mixin backbone: `num_layers` convolutions of `conv_class` in sequence."""

    conv_class: type

    def __init__(self, num_configs, num_ops=OPCODE_VOCAB_SIZE, num_layers=3, directed=False, **kw):
        super().__init__(num_configs, num_ops, **kw)
        check_bool("directed", directed)
        self.num_layers = num_layers
        self.directed = directed
        self.convs = [
            self.conv_class(self.hidden_dim, self.activation, directed=directed, name=f"conv_{i}")
            for i in range(num_layers)
        ]

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return list(self.convs)

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        for conv in self.convs:
            states = conv(graph, states)
        return states


class LateJoinModel(TileModel):
    """Op-only message passing, pooled per kernel, then joined with each config (layers of
    `config_dim`); a subclass may set `config_encoder`, or `kernel_gate` and `config_projection`."""

    def __init__(
        self,
        num_configs: int,
        num_ops: int = OPCODE_VOCAB_SIZE,
        config_dim: int | None = None,
        analytic_inputs: bool = False,
        architecture_inputs: bool = False,
        **kwargs,
    ):
        super().__init__(num_configs, num_ops, **kwargs)
        if config_dim is not None:
            check_int("config_dim", config_dim, 1)
        check_bool("analytic_inputs", analytic_inputs)
        check_bool("architecture_inputs", architecture_inputs)
        self.config_dim = self.hidden_dim if config_dim is None else config_dim
        self.analytic_inputs = analytic_inputs
        self.architecture_inputs = architecture_inputs
        self.config_encoder = None
        self.kernel_gate = None
        self.make_head(self.config_dim)

    def config_width(self) -> int:
        width = CONFIG_FEAT_DIM
        if self.config_encoder is not None:
            width = self.config_encoder.output_width
        width += NUM_ESTIMATES if self.analytic_inputs else 0
        return width + (NUM_ARCHITECTURE if self.architecture_inputs else 0)

    def build_body(self) -> None:
        super().build_body()
        if self.config_encoder is not None:
            self.config_encoder.build(tf.TensorShape([None, self.state_dim()]))
        if self.kernel_gate is not None:
            self.kernel_gate.build(tf.TensorShape([None, self.pooled_dim()]))
            self.config_projection.build(tf.TensorShape([None, None, self.config_width()]))

    def head_input_dim(self) -> int:
        extra = self.config_dim if self.kernel_gate is not None else 0
        return self.pooled_dim() + self.config_width() + extra

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        states = self.message_passing(graph, self.op_encoder(graph), training=training)
        kernel_states = self.pool(graph, states)  # [b, d]
        configs = config_features(graph, num_configs)  # [b, k, 24]
        if self.config_encoder is not None:
            configs = self.config_encoder(graph, states, configs)
        if self.analytic_inputs:
            configs = tf.concat([configs, analytic_features(graph, num_configs)], axis=-1)
        if self.architecture_inputs:
            configs = tf.concat([configs, architecture_features(graph, num_configs)], axis=-1)
        if self.kernel_gate is not None:
            gate = self.kernel_gate(kernel_states)  # [b, d]
            return self.head.score_gated(
                kernel_states, configs, gate, self.config_projection, training=training
            )
        return self.head.score_joined(kernel_states, configs, training=training)


class EarlyJoinModel(TileModel):
    """Config features joined onto every op node before message passing; Dense([op ; config])
    as Dense(op) + Dense(config), each part computed once."""

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        self.join_op = tf.keras.layers.Dense(self.hidden_dim, name="join_op")
        self.join_config = PointwiseDense(self.hidden_dim, use_bias=False, name="join_config")
        self.join_activation = tf.keras.activations.get(self.activation)
        self.make_head(self.hidden_dim)

    def build_body(self) -> None:
        self.join_config.build(tf.TensorShape([None, None, CONFIG_FEAT_DIM]))
        self.join_op.build(tf.TensorShape([None, self.hidden_dim]))
        super().build_body()

    def head_input_dim(self) -> int:
        return self.pooled_dim()

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        op_states = self.op_encoder(graph)  # [n, d]
        configs = config_features(graph, num_configs)  # [b, k, 24]
        kernel_of_op = graph.edge_sets["g_op"].adjacency.source
        config_part = tf.gather(self.join_config(configs), kernel_of_op)  # [n, k, d]
        states = self.join_activation(self.join_op(op_states)[:, None, :] + config_part)
        states = self.message_passing(graph, states, training=training)
        return self.head(self.pool(graph, states), training=training)  # [b, k]
