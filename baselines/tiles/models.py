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
- `ChebSAGE`: early join, then a ChebNet branch and a GraphSAGE branch, concatenated.

Common kwargs shape the parts every model has: `hidden_dim`, `op_embedding_dim`,
`activation`, `final_mlp_layers` (hidden layers of the scoring head),
`reduction` (how op states are pooled per kernel); graph models add
`num_layers` and `directed` (separate weights per edge direction); late-join
models add `config_dim`, the width of the layers they apply once per
configuration (config encoder, kernel x config interaction, head; default
`hidden_dim`), so the op graph can be encoded wider than each config is scored.
Upstream's names are taken too (`KWARG_ALIASES`).

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
    ChebConv,
    ConfigScoringHead,
    GATv2Block,
    KernelPooling,
    OpEncoder,
    PerDimConfigEncoder,
    PointwiseDense,
    ResGCNConv,
    SAGEConv,
)
from baselines.tiles.model_kwargs import (  # noqa: F401 (re-exported for callers)
    KWARG_ALIASES,
    MODEL_KWARGS,
    MODEL_NAMES,
    UPSTREAM_KWARGS,
    resolve_model_kwargs,
)

# "flat": the 24 config columns as they are; "per_dim": PerDimConfigEncoder.
CONFIG_ENCODINGS = ("flat", "per_dim")
CHEB_LAYOUTS = ("parallel", "interleaved")


def _check_int(name: str, value: Any, least: int) -> None:
    # bool is an int in Python; JSON true/false for a layer count is a mistake.
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")


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
    # Pooling of op states per kernel: TF-GNN reductions joined by "+", concatenated.
    default_reduction = "sum"
    # Separate weights per edge direction in message passing (upstream's `directed`).
    default_directed = False

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
    ):
        super().__init__(name=type(self).__name__.lower())
        _check_int("final_mlp_layers", final_mlp_layers, 0)
        if config_dim is not None:
            _check_int("config_dim", config_dim, 1)
        reduction = self.default_reduction if reduction is None else reduction
        if not isinstance(reduction, str):
            raise ValueError(
                f"reduction must be a string such as 'sum' or 'sum+max', got {reduction!r}"
            )
        directed = self.default_directed if directed is None else directed
        if not isinstance(directed, bool):
            raise ValueError(f"directed must be true or false, got {directed!r}")
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
        self._config = dict(
            num_configs=num_configs,
            num_ops=num_ops,
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
        self.pool = KernelPooling(tuple(reduction.split("+")))
        self.reductions = self.pool.reductions
        self.op_encoder = OpEncoder(num_ops, op_embedding_dim, hidden_dim, activation)
        self.head = ConfigScoringHead([self.config_dim] * final_mlp_layers, activation, dropout)

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

    def state_dim(self) -> int:
        """Width of the op states that message passing hands to pooling."""
        return self.hidden_dim

    def pooled_dim(self) -> int:
        return self.state_dim() * len(self.reductions)

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
        if self.config_encoding == "per_dim":
            return self.config_encoder.output_width
        return CONFIG_FEAT_DIM

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
        # The head's input is [kernel_states ; configs (; interaction)] per config.
        if self.config_interaction:
            gate = self.kernel_gate(kernel_states)  # [b, d]
            return self.head.score_gated(
                kernel_states, configs, gate, self.config_projection, training=training
            )
        return self.head.score_joined(kernel_states, configs, training=training)


class MLP(LateJoinModel):
    """No message passing: sum of op states joined with each config, then an MLP."""


class _ConvStack:
    """Mixin: `num_layers` convolutions of `conv_class` applied in sequence."""

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

    default_reduction = "sum+mean+max"
    default_dropout = 0.1
    default_directed = True
    config_interaction = True

    def __init__(self, num_configs: int, num_ops: int = OPCODE_VOCAB_SIZE, **kwargs):
        super().__init__(num_configs, num_ops, **kwargs)
        if not self.directed:
            raise ValueError(
                "directed=false: LateJoinGAT always attends along each edge direction with "
                "its own weights (directed); there is no shared-weight variant"
            )
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


class ChebSAGE(EarlyJoinModel):
    """Config features on every op node, then ChebNet and GraphSAGE layers.

    `cheb_layout="interleaved"` (the default): one stack of `num_layers` layers
    alternating ChebConv and SAGEConv (Cheb, SAGE, Cheb, ...) on the early-join
    states [ops, configs, hidden]. ChebConv applies Chebyshev polynomials up to
    order `cheb_order` - 1 of the symmetrized graph's scaled Laplacian.
    `cheb_layout="parallel"`: two branches from the same states, `num_layers`
    ChebConv layers and `num_layers` SAGEConv layers, concatenated ([ops,
    configs, 2 hidden]); twice the convolutions. Either way the states are
    pooled per kernel and scored by the MLP head. `directed` applies to the
    SAGE layers (ChebConv's Laplacian is undirected by definition).

    The default is what `bench/quality.py` favours (`--size small`, 3 seeds,
    held-out programs; README "Models"): interleaved val/test top-5 error
    0.062/0.075 against parallel 0.087/0.087, in the same training time. (The
    toy benchmark, `bench/toy_models.py`, had favoured parallel: 0.076 vs
    0.200 val top-5 on 30 toy kernels.) Runs saved with parallel branches
    before this kwarg existed rebuild as parallel (`run_files.with_saved_layout`).
    """

    def build_convs(self) -> None:
        _check_int("cheb_order", self.cheb_order, 1)
        if self.cheb_layout not in CHEB_LAYOUTS:
            raise ValueError(
                f"cheb_layout must be one of {', '.join(CHEB_LAYOUTS)}, got {self.cheb_layout!r}"
            )

        def cheb(i: int) -> ChebConv:
            return ChebConv(self.hidden_dim, self.cheb_order, self.activation, name=f"cheb_{i}")

        def sage(i: int) -> SAGEConv:
            return SAGEConv(
                self.hidden_dim, self.activation, directed=self.directed, name=f"sage_{i}"
            )

        # Attribute names are the variables' paths in saved models: keep them.
        if self.cheb_layout == "parallel":
            self.cheb_branch = [cheb(i) for i in range(self.num_layers)]
            self.sage_branch = [sage(i) for i in range(self.num_layers)]
        else:
            self.stack = [sage(i) if i % 2 else cheb(i) for i in range(self.num_layers)]

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


# Registered so that `tf.keras.models.load_model` can rebuild a saved model from
# its config (models are saved without traced functions; see run_files.py).
MODELS: dict[str, type[TileModel]] = {
    cls.__name__: tf.keras.utils.register_keras_serializable(package="tpugraphs_tiles")(cls)
    for cls in (
        MLP,
        EarlyJoinSAGE,
        LateJoinSAGE,
        EarlyJoinResGCN,
        LateJoinResGCN,
        LateJoinGAT,
        ChebSAGE,
    )
}

if set(MODELS) != set(MODEL_NAMES):  # model_kwargs.py lists them without TensorFlow
    raise ImportError(f"model_kwargs.MODEL_NAMES {MODEL_NAMES} != models {tuple(MODELS)}")


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

    Kwarg names, upstream's included, are resolved by
    `model_kwargs.resolve_model_kwargs`; values are checked by the constructor.
    """
    kwargs = resolve_model_kwargs(name, model_kwargs or {})
    try:
        return MODELS[name](num_configs, OPCODE_VOCAB_SIZE, **kwargs)
    except (TypeError, ValueError) as e:
        raise PipelineError(f"--model_kwargs_json: bad value for {name}: {e}") from None
