"""Tile cost models: every class maps a kernel batch to one score per configuration.

All models take `(num_configs, num_ops, **kwargs)` and return, from
`forward(graph, num_configs)`, scores of shape [batch, num_configs] where lower
means predicted faster. `call(graph)` derives the number of configurations per
kernel from the graph (equal to `num_configs` for training batches).

- `MLP`: op states pooled (sum) over the kernel, joined with each config, MLP.
- `EarlyJoinSAGE`, `EarlyJoinResGCN`: config features joined onto every op node
  *before* message passing (states [ops, configs, hidden]).
- `LateJoinSAGE`, `LateJoinResGCN`, `LateJoinGAT`: message passing on ops only,
  pooled per kernel, then joined with each config's features.

Variables depend only on constructor arguments and the fixed feature widths and
opcode vocabulary, so a model can be rebuilt from its run file and its weights
copied in:

    model = build_model("LateJoinGAT", num_configs=10, model_kwargs={"num_heads": 8})
    scores = model.forward(graph, num_configs=10)   # [batch, 10]
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.tiles.data import CONFIG_FEAT_DIM, OPCODE_VOCAB_SIZE
from baselines.tiles.errors import PipelineError
from baselines.tiles.graph import BATCH_SIGNATURE, dummy_batch, graph_from_batch, to_tensors
from baselines.tiles.layers import (
    ConfigScoringHead,
    GATv2Block,
    KernelPooling,
    OpEncoder,
    PerDimConfigEncoder,
    PointwiseDense,
    ResGCNConv,
    SAGEConv,
)

# "flat": the 24 config columns as they are; "per_dim": PerDimConfigEncoder.
CONFIG_ENCODINGS = ("flat", "per_dim")


def configs_per_kernel(graph: tfgnn.GraphTensor) -> tf.Tensor:
    """Number of configuration slots per kernel (batches have the same count each)."""
    return graph.node_sets["config"].total_size // graph.num_components


def config_features(graph: tfgnn.GraphTensor, num_configs) -> tf.Tensor:
    """Config features as [batch, num_configs, 24]."""
    feats = graph.node_sets["config"]["feats"]
    return tf.reshape(feats, [-1, num_configs, feats.shape[-1]])


class TileModel(tf.keras.Model):
    """Shared constructor, `call` and `get_config`; subclasses implement `forward`.

    Every constructor argument is accepted here and recorded, so `get_config`
    returns exactly what rebuilds the model; `MODEL_KWARGS` says which kwargs
    each class uses (others are refused by `build_model`).
    """

    default_dropout = 0.0

    def __init__(
        self,
        num_configs: int,
        num_ops: int = OPCODE_VOCAB_SIZE,
        hidden_dim: int = 64,
        op_embedding_dim: int = 64,
        activation: str = "leaky_relu",
        num_layers: int = 3,
        num_heads: int = 4,
        dropout: float | None = None,
        config_encoding: str = "flat",
        tiled_op_heads: int = 1,
    ):
        super().__init__(name=type(self).__name__.lower())
        if tiled_op_heads < 1 or (tiled_op_heads != 1 and config_encoding != "per_dim"):
            raise ValueError(
                f"tiled_op_heads {tiled_op_heads} needs config_encoding 'per_dim' and a value >= 1"
            )
        if config_encoding not in CONFIG_ENCODINGS:
            raise ValueError(
                f"config_encoding must be one of {', '.join(CONFIG_ENCODINGS)}, "
                f"got {config_encoding!r}"
            )
        dropout = self.default_dropout if dropout is None else dropout
        self._config = dict(
            num_configs=num_configs,
            num_ops=num_ops,
            hidden_dim=hidden_dim,
            op_embedding_dim=op_embedding_dim,
            activation=activation,
            num_layers=num_layers,
            num_heads=num_heads,
            dropout=dropout,
            config_encoding=config_encoding,
            tiled_op_heads=tiled_op_heads,
        )
        self.num_configs = num_configs
        self.num_ops = num_ops
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.dropout_rate = dropout
        self.config_encoding = config_encoding
        self.tiled_op_heads = tiled_op_heads
        self.op_encoder = OpEncoder(num_ops, op_embedding_dim, hidden_dim, activation)
        self.head = ConfigScoringHead([hidden_dim, hidden_dim], activation, dropout)

    def build(self, input_shape=None) -> None:
        """Creates every variable from the constructor arguments and feature widths.

        No kernel is needed (Keras passes the graph's shape, which says nothing
        here). Layers are built in the order `forward` first calls them, so a
        seed gives the same initial weights as building by a forward pass.
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

    def head_input_dim(self) -> int:
        raise NotImplementedError

    def call(self, graph: tfgnn.GraphTensor, training=None) -> tf.Tensor:
        return self.forward(graph, configs_per_kernel(graph), training=training)

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments: what Keras needs to load the saved model."""
        return dict(self._config)

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        raise NotImplementedError


class LateJoinModel(TileModel):
    """Op-only message passing, pooled per kernel, then joined with each config."""

    reductions: tuple[str, ...] = ("sum",)
    # Adds a multiplicative kernel x config term to the head's input (see LateJoinGAT).
    config_interaction = False

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        self.pool = KernelPooling(self.reductions)
        if self.config_encoding == "per_dim":
            self.config_encoder = PerDimConfigEncoder(
                self.hidden_dim, self.activation, self.tiled_op_heads, name="config_encoder"
            )
        if self.config_interaction:
            self.kernel_gate = tf.keras.layers.Dense(self.hidden_dim, name="kernel_gate")
            self.config_projection = PointwiseDense(self.hidden_dim, name="config_proj")

    def pooled_dim(self) -> int:
        return self.hidden_dim * len(self.reductions)

    def config_width(self) -> int:
        if self.config_encoding == "per_dim":
            return self.config_encoder.output_width
        return CONFIG_FEAT_DIM

    def build_body(self) -> None:
        super().build_body()
        if self.config_encoding == "per_dim":
            self.config_encoder.build(tf.TensorShape([None, self.hidden_dim]))
        if self.config_interaction:
            self.kernel_gate.build(tf.TensorShape([None, self.pooled_dim()]))
            self.config_projection.build(tf.TensorShape([None, None, self.config_width()]))

    def head_input_dim(self) -> int:
        extra = self.hidden_dim if self.config_interaction else 0
        return self.pooled_dim() + self.config_width() + extra

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        return states

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        states = self.message_passing(graph, self.op_encoder(graph), training=training)
        kernel_states = self.pool(graph, states)  # [b, d]
        configs = config_features(graph, num_configs)  # [b, k, 24]
        if self.config_encoding == "per_dim":
            configs = self.config_encoder(graph, states, configs)
        tiled = tf.repeat(kernel_states[:, None, :], tf.shape(configs)[1], axis=1)
        joint = [tiled, configs]
        if self.config_interaction:
            gate = self.kernel_gate(kernel_states)[:, None, :]  # [b, 1, d]
            joint.append(gate * self.config_projection(configs))  # [b, k, d]
        return self.head(tf.concat(joint, axis=-1), training=training)


class MLP(LateJoinModel):
    """No message passing: sum of op states joined with each config, then an MLP."""


class _ConvStack:
    """Mixin: `num_layers` convolutions of `conv_class` applied in sequence."""

    conv_class: type

    def build_convs(self) -> None:
        self.convs = [
            self.conv_class(self.hidden_dim, self.activation, name=f"conv_{i}")
            for i in range(self.num_layers)
        ]

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return list(self.convs)

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        for conv in self.convs:
            states = conv(graph, states)
        return states


class LateJoinSAGE(_ConvStack, LateJoinModel):
    """GraphSAGE layers on the op graph, pooled, then joined with each config."""

    conv_class = SAGEConv

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        self.build_convs()


class LateJoinResGCN(_ConvStack, LateJoinModel):
    """Residual GCN layers on the op graph, pooled, then joined with each config."""

    conv_class = ResGCNConv

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        self.build_convs()


class EarlyJoinModel(_ConvStack, TileModel):
    """Config features joined onto every op node before message passing."""

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        # Dense([op ; config]) computed as Dense(op) + Dense(config): the op part
        # once per op and the config part once per config, not once per pair.
        self.join_op = tf.keras.layers.Dense(self.hidden_dim, name="join_op")
        self.join_config = PointwiseDense(self.hidden_dim, use_bias=False, name="join_config")
        self.join_activation = tf.keras.activations.get(self.activation)
        self.pool = KernelPooling(("sum",))
        self.build_convs()

    def build_body(self) -> None:
        self.join_config.build(tf.TensorShape([None, None, CONFIG_FEAT_DIM]))
        self.join_op.build(tf.TensorShape([None, self.hidden_dim]))
        super().build_body()

    def head_input_dim(self) -> int:
        return self.hidden_dim

    def forward(self, graph: tfgnn.GraphTensor, num_configs, training=None) -> tf.Tensor:
        op_states = self.op_encoder(graph)  # [n, d]
        configs = config_features(graph, num_configs)  # [b, k, 24]
        kernel_of_op = graph.edge_sets["g_op"].adjacency.source
        config_part = tf.gather(self.join_config(configs), kernel_of_op)  # [n, k, d]
        states = self.join_activation(self.join_op(op_states)[:, None, :] + config_part)
        states = self.message_passing(graph, states, training=training)
        return self.head(self.pool(graph, states), training=training)  # [b, k]


class EarlyJoinSAGE(EarlyJoinModel):
    """Config features on every op node, then GraphSAGE layers, sum pooling, MLP."""

    conv_class = SAGEConv


class EarlyJoinResGCN(EarlyJoinModel):
    """Config features on every op node, then residual GCN layers, sum pooling, MLP."""

    conv_class = ResGCNConv


class LateJoinGAT(LateJoinModel):
    """GATv2 blocks (both edge directions, residual, LayerNorm), sum/mean/max pooling.

    The head sees [kernel ; config ; gate(kernel) * proj(config)]: the product
    term lets a small MLP express how good a tile is *for this kernel* (a tile
    size matters relative to the kernel's shapes), which a concatenation alone
    learns slowly. On the toy set it cut validation top-5 error from 0.47 to
    0.21 at the default learning rate.
    """

    reductions = ("sum", "mean", "max")
    default_dropout = 0.1
    config_interaction = True

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        self.blocks = [
            GATv2Block(self.hidden_dim, self.num_heads, self.dropout_rate, name=f"gat_{i}")
            for i in range(self.num_layers)
        ]

    def message_passing_layers(self) -> list[tf.keras.layers.Layer]:
        return list(self.blocks)

    def message_passing(self, graph, states, training=None) -> tf.Tensor:
        for block in self.blocks:
            states = block(graph, states, training=training)
        return states


# Registered so that `tf.keras.models.load_model` can rebuild a saved model from
# its config (models are saved without traced functions; see run_files.py).
MODELS: dict[str, type[TileModel]] = {
    cls.__name__: tf.keras.utils.register_keras_serializable(package="tpugraphs_tiles")(cls)
    for cls in (MLP, EarlyJoinSAGE, LateJoinSAGE, EarlyJoinResGCN, LateJoinResGCN, LateJoinGAT)
}

COMMON_KWARGS = ("hidden_dim", "op_embedding_dim", "activation")
MODEL_KWARGS: dict[str, tuple[str, ...]] = {
    "MLP": COMMON_KWARGS + ("dropout",),
    "EarlyJoinSAGE": COMMON_KWARGS + ("num_layers", "dropout"),
    "LateJoinSAGE": COMMON_KWARGS + ("num_layers", "dropout"),
    "EarlyJoinResGCN": COMMON_KWARGS + ("num_layers", "dropout"),
    "LateJoinResGCN": COMMON_KWARGS + ("num_layers", "dropout"),
    "LateJoinGAT": COMMON_KWARGS
    + ("num_layers", "num_heads", "dropout", "config_encoding", "tiled_op_heads"),
}


# Upstream's kwarg names (its models and its sweep, SPEC §10) -> this project's
# names; None: upstream has it, these models have no part for it yet. A run
# file keeps the names the user passed; `build_model` maps them.
KWARG_ALIASES: dict[str, str | None] = {
    "num_gnns": "num_layers",
    "op_embed_dim": "op_embedding_dim",
    "hidden_activation": "activation",
    "mlp_layers": None,
    "final_mlp_layers": None,
    "directed": None,
    "reduction": None,
}


def create_variables(model: TileModel, compiled: bool = True) -> None:
    """Creates the model's variables, for training (`compiled`) or inference.

    With `compiled`, one forward pass on a tiny kernel runs under the fully
    dynamic batch signature, so Keras records a shape-agnostic input spec and a
    saved model accepts batches of any size: needed before `save_model`. Without
    it (a model that is only used for inference) `model.build()` creates the
    variables from the known widths, with no forward pass at all.
    """
    if not compiled:
        model.build()
        return
    batch = to_tensors(dummy_batch(model.num_configs))
    call = tf.function(
        lambda batch: model(graph_from_batch(batch)),
        input_signature=[BATCH_SIGNATURE],
        autograph=False,
    )
    call(batch)


def build_model(
    name: str, num_configs: int, model_kwargs: dict[str, Any] | None = None
) -> TileModel:
    """Instantiates a model class by name; bad names or kwargs raise PipelineError.

    Upstream's kwarg names (`KWARG_ALIASES`: `num_gnns`, `op_embed_dim`,
    `hidden_activation`) are taken for this project's; an alias given together
    with the name it stands for is refused.
    """
    if name not in MODELS:
        raise PipelineError(f"--model: unknown model '{name}'; choose one of {', '.join(MODELS)}")
    given = dict(model_kwargs or {})
    missing = sorted(k for k in given if k in KWARG_ALIASES and KWARG_ALIASES[k] is None)
    if missing:
        raise PipelineError(
            f"--model_kwargs_json: upstream's {', '.join(missing)} has no counterpart in "
            f"these models yet; {name} takes {', '.join(MODEL_KWARGS[name])}"
        )
    kwargs: dict[str, Any] = {}
    for key, value in given.items():
        canonical = KWARG_ALIASES.get(key) or key
        if canonical != key and canonical in given:
            raise PipelineError(
                f"--model_kwargs_json: {key} is upstream's name for {canonical}; "
                f"give one of them, not both"
            )
        kwargs[canonical] = value
    unknown = sorted(
        k if k == c else f"{k} (= {c})"
        for k, c in ((k, KWARG_ALIASES.get(k) or k) for k in given)
        if c not in MODEL_KWARGS[name]
    )
    if unknown:
        raise PipelineError(
            f"--model_kwargs_json: {name} does not take {', '.join(unknown)}; "
            f"it takes {', '.join(MODEL_KWARGS[name])}"
        )
    try:
        return MODELS[name](num_configs, OPCODE_VOCAB_SIZE, **kwargs)
    except (TypeError, ValueError) as e:
        raise PipelineError(f"--model_kwargs_json: bad value for {name}: {e}") from None
