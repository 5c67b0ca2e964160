"""The base classes every tile model builds on; the models themselves are in models.py.

A tile model maps a batch of kernels (a GraphTensor, graph.py) to one score per
configuration, [batch, num_configs], lower = predicted faster. The bases hold
what models share:

- `TileModel`: the constructor (the standard parts' kwargs), the op encoder,
  pooling, `build`, `call` and `get_config`; a subclass writes `forward`.
- `LateJoinModel`: message passing on ops only (`message_passing`, a no-op
  here), pooled per kernel, then joined with each config in the scoring head.
- `EarlyJoinModel`: config features joined onto every op node first (states
  [ops, configs, hidden]), then `num_layers` convolutions of `conv_class`.
- `GraphLayers`, `ConvStack`: mixins for models with message-passing layers.

Which kwargs a model takes is read off its classes (`model_builder.accepted_kwargs`,
and the same from the source in `model_catalog`): the standard parts each class
names in `takes` (inherited), plus the keyword parameters of any `__init__`
below `TileModel`. A subclass in models.py that adds a kwarg names it in its own
`__init__` and passes the rest on:

    class WideHead(LateJoinModel):
        def __init__(self, num_configs, num_ops=OPCODE_VOCAB_SIZE, head_scale=2, **kwargs):
            super().__init__(num_configs, num_ops, **kwargs)
            self.head_scale = head_scale

`get_config` returns the arguments the model was constructed with (Keras records
them), so `tf.keras.models.load_model` rebuilds a saved model with its kwargs.
"""

from __future__ import annotations

import inspect
from typing import Any

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.tiles.analytic import NUM_ESTIMATES
from baselines.tiles.data import CONFIG_FEAT_DIM, OPCODE_VOCAB_SIZE
from baselines.tiles.features import ANALYTIC_COLUMN, NORMALIZED_CONFIG_DIM
from baselines.tiles.layers import (
    ConfigScoringHead,
    KernelPooling,
    OpEncoder,
    PerDimConfigEncoder,
    PointwiseDense,
)
from baselines.tiles.model_catalog import POSITIONAL

# "flat": the 24 config columns as they are; "per_dim": PerDimConfigEncoder.
CONFIG_ENCODINGS = ("flat", "per_dim")
# Keras' registry name of every model class: "tpugraphs_tiles>MLP", ...
KERAS_PACKAGE = "tpugraphs_tiles"


def check_int(name: str, value: Any, least: int) -> None:
    """ValueError unless `value` is an int (not a bool) of at least `least`."""
    # bool is an int in Python; JSON true/false for a layer count is a mistake.
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")


def configs_per_kernel(graph: tfgnn.GraphTensor) -> tf.Tensor:
    """Number of configuration slots per kernel (batches have the same count each)."""
    return graph.node_sets["config"].total_size // graph.num_components


def config_features(graph: tfgnn.GraphTensor, num_configs) -> tf.Tensor:
    """The files' 24 config columns (normalized) as [batch, num_configs, 24]."""
    feats = graph.node_sets["config"]["feats"][:, :CONFIG_FEAT_DIM]
    return tf.reshape(feats, [-1, num_configs, CONFIG_FEAT_DIM])


def analytic_features(graph: tfgnn.GraphTensor, num_configs) -> tf.Tensor:
    """The analytic estimates of each config (`analytic.py`) as [batch, num_configs, 4]."""
    feats = graph.node_sets["config"]["feats"][:, ANALYTIC_COLUMN:NORMALIZED_CONFIG_DIM]
    return tf.reshape(feats, [-1, num_configs, NUM_ESTIMATES])


class TileModel(tf.keras.Model):
    """Shared constructor, `build`, `call` and `get_config`; subclasses implement `forward`.

    The constructor takes the kwargs of every standard part (op encoder,
    pooling, head, graph layers, config tokens); `takes` says which of them a
    class uses, and `build_model` refuses the others. Every subclass is
    registered with Keras under its class name when it is defined.

        class MeanPooled(LateJoinModel):
            default_reduction = "mean"
    """

    # The standard parts' kwargs this class uses (a subclass adds to its bases').
    takes = (
        "hidden_dim",
        "op_embedding_dim",
        "activation",
        "dropout",
        "final_mlp_layers",
        "reduction",
    )
    default_dropout = 0.0
    # Pooling of op states per kernel: TF-GNN reductions joined by "+", concatenated.
    default_reduction = "sum"
    # Separate weights per edge direction in message passing (upstream's `directed`).
    default_directed = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Saved models keep only the class name and its config (no traced
        # functions, see run_files.py); Keras finds the class by that name.
        tf.keras.utils.register_keras_serializable(package=KERAS_PACKAGE)(cls)

    def __init__(
        self,
        num_configs: int,
        num_ops: int = OPCODE_VOCAB_SIZE,
        hidden_dim: int = 64,
        config_dim: int | None = None,
        op_embedding_dim: int = 64,
        activation: str = "leaky_relu",
        num_layers: int = 3,
        num_heads: int = 4,
        dropout: float | None = None,
        config_encoding: str = "flat",
        tiled_op_heads: int = 1,
        dim_layout: str = "minor_to_major",
        final_mlp_layers: int = 2,
        reduction: str | None = None,
        directed: bool | None = None,
        cheb_order: int = 3,
        cheb_layout: str = "interleaved",
        analytic_inputs: bool = False,
    ):
        super().__init__(name=type(self).__name__.lower())
        check_int("final_mlp_layers", final_mlp_layers, 0)
        if config_dim is not None:
            check_int("config_dim", config_dim, 1)
        reduction = self.default_reduction if reduction is None else reduction
        if not isinstance(reduction, str):
            raise ValueError(
                f"reduction must be a string such as 'sum' or 'sum+max', got {reduction!r}"
            )
        directed = self.default_directed if directed is None else directed
        if not isinstance(directed, bool):
            raise ValueError(f"directed must be true or false, got {directed!r}")
        if not isinstance(analytic_inputs, bool):
            raise ValueError(f"analytic_inputs must be true or false, got {analytic_inputs!r}")
        if tiled_op_heads < 1 or (tiled_op_heads != 1 and config_encoding != "per_dim"):
            raise ValueError(
                f"tiled_op_heads {tiled_op_heads} needs config_encoding 'per_dim' and a value >= 1"
            )
        if dim_layout != "minor_to_major" and config_encoding != "per_dim":
            raise ValueError(f"dim_layout {dim_layout!r} needs config_encoding 'per_dim'")
        if config_encoding not in CONFIG_ENCODINGS:
            raise ValueError(
                f"config_encoding must be one of {', '.join(CONFIG_ENCODINGS)}, "
                f"got {config_encoding!r}"
            )
        dropout = self.default_dropout if dropout is None else dropout
        # The standard parts' values, defaults resolved (get_config reports them).
        self._standard_config = dict(
            hidden_dim=hidden_dim,
            config_dim=config_dim,
            op_embedding_dim=op_embedding_dim,
            activation=activation,
            num_layers=num_layers,
            num_heads=num_heads,
            dropout=dropout,
            config_encoding=config_encoding,
            tiled_op_heads=tiled_op_heads,
            dim_layout=dim_layout,
            final_mlp_layers=final_mlp_layers,
            reduction=reduction,
            directed=directed,
            cheb_order=cheb_order,
            cheb_layout=cheb_layout,
            analytic_inputs=analytic_inputs,
        )
        self.num_configs = num_configs
        self.num_ops = num_ops
        self.hidden_dim = hidden_dim
        # Width of the layers applied once per configuration (late-join models'
        # config encoder, interaction and head): what prediction pays per config.
        self.config_dim = hidden_dim if config_dim is None else config_dim
        self.activation = activation
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.dropout_rate = dropout
        self.config_encoding = config_encoding
        self.tiled_op_heads = tiled_op_heads
        self.dim_layout = dim_layout
        self.final_mlp_layers = final_mlp_layers
        self.directed = directed
        self.cheb_order = cheb_order
        self.cheb_layout = cheb_layout
        self.analytic_inputs = analytic_inputs
        self.pool = KernelPooling(tuple(reduction.split("+")))
        self.reductions = self.pool.reductions
        self.op_encoder = OpEncoder(num_ops, op_embedding_dim, hidden_dim, activation)
        self.head = ConfigScoringHead([self.config_dim] * final_mlp_layers, activation, dropout)

    def build(self, input_shape=None) -> None:
        """Creates the standard parts' variables from the constructor arguments.

        No kernel is needed (Keras passes the graph's shape, which says nothing
        here). Layers are built in the order `forward` first calls them, so a
        seed gives the same initial weights as building by a forward pass.
        Layers this method does not know (a subclass's own) are built by the
        first forward pass; `model_builder.create_variables` runs one when any
        layer is left unbuilt.
        """
        self.op_encoder.build(None)
        self.build_body()
        self.head.build(tf.TensorShape([None, None, self.head_input_dim()]))
        self.built = True

    def build_body(self) -> None:
        """Builds the layers between the op encoder and the head."""
        for layer in self.message_passing_layers():
            layer.build(tf.TensorShape([None, self.hidden_dim]))

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return []

    def state_dim(self) -> int:
        """Width of the op states that message passing hands to pooling."""
        return self.hidden_dim

    def pooled_dim(self) -> int:
        return self.state_dim() * len(self.reductions)

    def head_input_dim(self) -> int:
        raise NotImplementedError

    def call(self, graph: tfgnn.GraphTensor, training=None) -> tf.Tensor:
        return self.forward(graph, configs_per_kernel(graph), training=training)

    @classmethod
    def kwarg_names(cls) -> tuple[str, ...]:
        """The kwargs this class takes: `takes` of it and its bases, and its constructors' params.

        Bases first. The parameters of every `__init__` below TileModel count
        (a subclass's own kwargs), not `num_configs` and `num_ops`.
        """
        mro = cls.__mro__[: cls.__mro__.index(TileModel) + 1]
        names: list[str] = []
        for klass in reversed(mro):
            own = list(klass.__dict__.get("takes", ()))
            if klass is not TileModel and "__init__" in klass.__dict__:
                params = inspect.signature(klass.__dict__["__init__"]).parameters.values()
                own += [
                    p.name
                    for p in params
                    if p.name not in POSITIONAL and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                ]
            names += [k for k in own if k not in names]
        return tuple(names)

    def get_config(self) -> dict[str, Any]:
        """What rebuilds the model: its standard kwargs' values and every argument given.

        Keras records the arguments a model is constructed with (a subclass's
        own kwargs included), so `from_config` rebuilds it as it was.
        """
        if not getattr(self, "_auto_get_config", False):
            raise ValueError(
                f"{type(self).__name__} was constructed with arguments other than numbers, "
                "strings, booleans or None, so it cannot be saved and rebuilt"
            )
        takes = type(self).kwarg_names()
        config = {k: v for k, v in self._standard_config.items() if k in takes}
        config.update(num_configs=self.num_configs, num_ops=self.num_ops)
        config.update(self._auto_config.config)
        return config

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        """Scores [batch, num_configs], lower = predicted faster."""
        raise NotImplementedError


class GraphLayers:
    """Mixin: the model has message-passing layers (`num_layers` deep, `directed` or not)."""

    takes = ("num_layers", "directed")


class ConvStack(GraphLayers):
    """Mixin: `num_layers` convolutions of `conv_class` applied in sequence.

    The class using it calls `build_convs()` in its constructor.
    """

    conv_class: type

    def build_convs(self) -> None:
        self.convs = [
            self.conv_class(
                self.hidden_dim, self.activation, directed=self.directed, name=f"conv_{i}"
            )
            for i in range(self.num_layers)
        ]

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return list(self.convs)

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        for conv in self.convs:
            states = conv(graph, states)
        return states


class LateJoinModel(TileModel):
    """Op-only message passing, pooled per kernel, then joined with each config.

    A subclass overrides `message_passing(graph, states, training)` ([ops,
    hidden] -> [ops, state_dim()]) and lists its layers in
    `message_passing_layers()` so `build` creates them.
    """

    takes = ("config_dim", "analytic_inputs")
    # Adds a multiplicative kernel x config term to the head's input (see LateJoinGAT).
    config_interaction = False

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        if self.config_encoding == "per_dim":
            self.config_encoder = PerDimConfigEncoder(
                self.config_dim,
                self.activation,
                self.tiled_op_heads,
                self.dim_layout,
                name="config_encoder",
            )
        if self.config_interaction:
            self.kernel_gate = tf.keras.layers.Dense(self.config_dim, name="kernel_gate")
            self.config_projection = PointwiseDense(self.config_dim, name="config_proj")

    def config_width(self) -> int:
        width = CONFIG_FEAT_DIM
        if self.config_encoding == "per_dim":
            width = self.config_encoder.output_width
        return width + (NUM_ESTIMATES if self.analytic_inputs else 0)

    def build_body(self) -> None:
        super().build_body()
        if self.config_encoding == "per_dim":
            self.config_encoder.build(tf.TensorShape([None, self.state_dim()]))
        if self.config_interaction:
            self.kernel_gate.build(tf.TensorShape([None, self.pooled_dim()]))
            self.config_projection.build(tf.TensorShape([None, None, self.config_width()]))

    def head_input_dim(self) -> int:
        extra = self.config_dim if self.config_interaction else 0
        return self.pooled_dim() + self.config_width() + extra

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        return states

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        states = self.message_passing(graph, self.op_encoder(graph), training=training)
        kernel_states = self.pool(graph, states)  # [b, d]
        configs = config_features(graph, num_configs)  # [b, k, 24]
        if self.config_encoding == "per_dim":
            configs = self.config_encoder(graph, states, configs)
        if self.analytic_inputs:  # the analytic estimates beside the learned encoding
            configs = tf.concat([configs, analytic_features(graph, num_configs)], axis=-1)
        # The head's input is [kernel_states ; configs (; interaction)] per config.
        if self.config_interaction:
            gate = self.kernel_gate(kernel_states)  # [b, d]
            return self.head.score_gated(
                kernel_states, configs, gate, self.config_projection, training=training
            )
        return self.head.score_joined(kernel_states, configs, training=training)


class EarlyJoinModel(ConvStack, TileModel):
    """Config features joined onto every op node before message passing.

    A subclass sets `conv_class` (a convolution over [ops, configs, hidden] states).
    """

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        # Dense([op ; config]) computed as Dense(op) + Dense(config): the op part
        # once per op and the config part once per config, not once per pair.
        self.join_op = tf.keras.layers.Dense(self.hidden_dim, name="join_op")
        self.join_config = PointwiseDense(self.hidden_dim, use_bias=False, name="join_config")
        self.join_activation = tf.keras.activations.get(self.activation)
        self.build_convs()

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
