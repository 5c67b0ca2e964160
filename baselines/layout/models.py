"""Layout cost models: every public `LayoutModel` subclass here, `Class(num_configs, num_ops,
**kwargs)`, scores a batch (`batching.to_model_inputs`) as [graphs, K], lower = faster."""

from __future__ import annotations

import tensorflow as tf

from baselines.core.cost_model import CostModel
from baselines.core.format import OPCODE_VOCAB_SIZE
from baselines.core.layers import (
    ConfigScoringHead,
    KernelPooling,
    OpEncoder,
    PointwiseDense,
    ResGCNConv,
    SAGEConv,
    graph_ops,
)
from baselines.core.model_lookup import check_bool, check_int, reductions
from baselines.layout.batching import dummy_batch, to_model_inputs, to_tensors
from baselines.layout.graph import CONFIG_VALUE_MAX, CONFIG_VALUE_MIN, NODE_CONFIG_FEAT_DIM
from baselines.layout.relayout import relayout_copies as copy_features
from baselines.layout.tile_padding import tile_padding as padding_features

NUM_CONFIG_VALUES = CONFIG_VALUE_MAX - CONFIG_VALUE_MIN + 1  # -1..5: 7 values


class ConfigAttention(tf.keras.layers.Layer):
    """Self-attention across one graph's configurations (pre-norm, residual): x [G, K, d] ->
    x + MHA(LN(x), LN(x)), attending only to the same graph's real (mask 1) configurations."""

    def __init__(self, heads: int, key_dim: int, **kw):
        super().__init__(**kw)
        self.norm = tf.keras.layers.LayerNormalization(name="norm")
        self.attention = tf.keras.layers.MultiHeadAttention(heads, key_dim, name="mha")

    def call(self, x: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
        real = mask > 0  # [G, K]
        k = tf.shape(x)[1]
        keys = tf.broadcast_to(real[:, None, :], tf.stack([tf.shape(x)[0], k, k]))
        normed = self.norm(x)
        return x + self.attention(normed, normed, attention_mask=keys)


class LayoutModel(CostModel):
    """Shared parts: `call`, `create_variables` and the optional split of `forward` into
    `graph_part` and `config_part`; a subclass implements one or the other."""

    keras_package = "tpugraphs_layout"

    def call(self, batch: dict[str, tf.Tensor], training=None) -> tf.Tensor:
        return self.forward(to_model_inputs(batch), None, training=training)

    def create_variables(self) -> LayoutModel:
        """Creates every variable with one forward pass on a tiny graph (same order each time)."""
        self(to_tensors(dummy_batch(2)))
        return self

    @property
    def attends_across_configs(self) -> bool:
        """Whether a score depends on the configurations scored with it (scored in one call)."""
        return False

    def nodes_per_config(self, num_nodes: int, num_configurable: int) -> int:
        """Nodes a scoring call holds states of per configuration (sizes `GraphScorer`'s chunks)."""
        return num_nodes

    def forward(self, inputs: dict, num_configs=None, training=None) -> tf.Tensor:
        """Scores [graphs, K], lower = predicted faster; K is read from `config_values`."""
        return self.config_part(inputs, self.graph_part(inputs, training), training)

    # Optional split of `forward`: `scoring.GraphScorer` runs graph_part once per graph.
    def graph_part(self, inputs: dict, training=None):
        """The configuration-independent states of the batch's graphs, from their fields alone."""
        raise NotImplementedError

    def config_part(self, inputs: dict, graph_part, training=None) -> tf.Tensor:
        """Scores [graphs, K] of the batch's configurations, given `graph_part(inputs)`."""
        raise NotImplementedError

    @property
    def splits_graph_part(self) -> bool:
        """Whether `graph_part` and `config_part` compute `forward` (a subclass defines them)."""
        own = type(self)
        return (
            own.graph_part is not LayoutModel.graph_part
            and own.config_part is not LayoutModel.config_part
            and own.forward is LayoutModel.forward
        )


def backprop_segment(inputs: dict, states: tf.Tensor, training=None) -> tf.Tensor:
    """Segment training ("backpropdropout"): `states` [N, ...], gradient stopped outside
    `inputs["node_segment"]`; the value is unchanged. No segment or not training: `states`."""
    segment = inputs.get("node_segment")
    if segment is None or not training:
        return states
    rank = len(states.shape)
    keep = tf.reshape(segment, tf.concat([tf.shape(segment), tf.ones([rank - 1], tf.int32)], 0))
    return tf.where(keep, states, tf.stop_gradient(states))


class ResModel(LayoutModel):
    """Upstream's layout baseline (ResModel) in spirit: state[v, k] = act(W_op [embed(opcode_v) ;
    feats_v] + W_cfg values[v, k]), values the 18 layout values (-1..5) of configuration k on
    configurable v, else 0; then `mlp_layers - 1` Dense layers (`backprop_segment` after them),
    `num_gnns` ResGCN layers, `reduction` pooling and `final_mlp_layers` hidden head layers."""

    def __init__(
        self,
        num_configs: int | None = None,
        num_ops: int = OPCODE_VOCAB_SIZE,
        op_embed_dim: int = 32,
        hidden_dim: int = 32,
        num_gnns: int = 2,
        mlp_layers: int = 2,
        final_mlp_layers: int = 0,
        hidden_activation: str = "leaky_relu",
        reduction: str = "sum",
        directed: bool = False,
    ):
        super().__init__(num_configs, num_ops)
        for name, value, least in (
            ("op_embed_dim", op_embed_dim, 1),
            ("hidden_dim", hidden_dim, 1),
            ("num_gnns", num_gnns, 0),
            ("mlp_layers", mlp_layers, 1),
            ("final_mlp_layers", final_mlp_layers, 0),
        ):
            check_int(name, value, least)
        check_bool("directed", directed)
        self.activation = tf.keras.activations.get(hidden_activation)
        self.pool = KernelPooling(reductions(reduction))
        # Linear: the config part is added before the activation.
        self.op_encoder = OpEncoder(num_ops, op_embed_dim, hidden_dim, activation=None)
        self.config_proj = PointwiseDense(hidden_dim, use_bias=False, name="config_proj")
        self.prenet = [
            PointwiseDense(hidden_dim, activation=hidden_activation, name=f"prenet_{i}")
            for i in range(mlp_layers - 1)
        ]
        self.convs = [
            ResGCNConv(hidden_dim, hidden_activation, directed=directed, name=f"gcn_{i}")
            for i in range(num_gnns)
        ]
        self.head = ConfigScoringHead([hidden_dim] * final_mlp_layers, hidden_activation)

    def graph_part(self, inputs: dict, training=None) -> tf.Tensor:
        return self.op_encoder(inputs["graph"])  # [N, h]

    def config_part(self, inputs: dict, graph_part: tf.Tensor, training=None) -> tf.Tensor:
        graph, op_part = inputs["graph"], graph_part
        values = tf.cast(inputs["config_values"], tf.float32)  # [NC, K, 18]
        projected = self.config_proj(values)  # [NC, K, h], placed on their nodes: [N, K, h]
        shape = tf.concat([[graph.node_sets["op"].total_size], tf.shape(projected)[1:]], 0)
        placed = tf.scatter_nd(inputs["cfg_node"][:, None], projected, shape)  # 0 on other nodes
        states = self.activation(op_part[:, None, :] + placed)
        for layer in self.prenet:
            states = layer(states)
        states = backprop_segment(inputs, states, training)
        for conv in self.convs:
            states = conv(graph, states)
        return self.head(self.pool(graph, states), training=training)  # [G, K]


class LayoutSAGE(LayoutModel):
    """Config-independent GraphSAGE once per graph, then per-config work on configurable nodes.
    Per graph: h = SAGE^num_gnns(OpEncoder(graph)) [N, hidden], g = pool(h). Per
    configuration k and configurable node w: e[w, k] = `embed_values` (plus
    `tile_padding`, `relayout_copies` when asked), x[w, k] = MLP(W_n [h_w ; enc_w]
    + W_c e[w, k]); `config_layers` rounds x += act(W_s x + W_p mean_producers(x)
    + W_c mean_consumers(x)) over configurable-to-configurable edges; c[k] =
    pool_w x[w, k], then `ConfigAttention` if `config_attention_heads` > 0; score
    head([g ; c[k]]) (head(c[k]) with `graph_state_in_head=false`); `config_frequency` appends
    log(how often configuration k occurs in its file) to c[k].
    `relative_to_reference`: c[k] pools x[w, k] - x_ref[w] (x of `cfg_ref`).
    """

    def __init__(
        self,
        num_configs: int | None = None,
        num_ops: int = OPCODE_VOCAB_SIZE,
        op_embed_dim: int = 32,
        hidden_dim: int = 64,
        num_gnns: int = 2,
        config_embed_dim: int = 8,
        config_layers: int = 1,
        final_mlp_layers: int = 2,
        hidden_activation: str = "leaky_relu",
        reduction: str = "sum+mean",
        directed: bool = True,
        dropout: float = 0.0,
        config_attention_heads: int = 0,
        tile_padding: bool = False,
        relayout_copies: bool = False,
        graph_state_in_head: bool = True,
        relative_to_reference: bool = False,
        config_frequency: bool = False,
    ):
        super().__init__(num_configs, num_ops)
        for name, value, least in (
            ("op_embed_dim", op_embed_dim, 1),
            ("hidden_dim", hidden_dim, 1),
            ("num_gnns", num_gnns, 0),
            ("config_embed_dim", config_embed_dim, 1),
            ("config_layers", config_layers, 0),
            ("final_mlp_layers", final_mlp_layers, 0),
            ("config_attention_heads", config_attention_heads, 0),
        ):
            check_int(name, value, least)
        for name, value in (
            ("directed", directed),
            ("tile_padding", tile_padding),
            ("relayout_copies", relayout_copies),
            ("graph_state_in_head", graph_state_in_head),
            ("relative_to_reference", relative_to_reference),
            ("config_frequency", config_frequency),
        ):
            check_bool(name, value)
        self.hidden_dim = hidden_dim
        self.config_embed_dim = config_embed_dim
        self.tile_padding = tile_padding
        self.relayout_copies = relayout_copies
        self.graph_state_in_head = graph_state_in_head
        self.relative_to_reference = relative_to_reference
        self.config_frequency = config_frequency
        self.activation = tf.keras.activations.get(hidden_activation)
        self.reductions = reductions(reduction)
        self.graph_pool = KernelPooling(self.reductions, name="graph_pool")
        self.op_encoder = OpEncoder(num_ops, op_embed_dim, hidden_dim, hidden_activation)
        self.convs = [
            SAGEConv(hidden_dim, hidden_activation, directed=directed, name=f"sage_{i}")
            for i in range(num_gnns)
        ]
        self.value_embedding = tf.keras.layers.Embedding(
            NODE_CONFIG_FEAT_DIM * NUM_CONFIG_VALUES * 2, config_embed_dim, name="value_embed"
        )
        self.join_node = tf.keras.layers.Dense(hidden_dim, name="join_node")
        self.join_config = PointwiseDense(hidden_dim, use_bias=False, name="join_config")
        self.config_mlp = PointwiseDense(hidden_dim, hidden_activation, name="config_mlp")
        self.config_rounds = [
            {
                part: PointwiseDense(hidden_dim, use_bias=part == "self", name=f"cfg_{i}_{part}")
                for part in ("self", "producers", "consumers")
            }
            for i in range(config_layers)
        ]
        self.config_attention = (
            ConfigAttention(config_attention_heads, hidden_dim // config_attention_heads or 1)
            if config_attention_heads
            else None
        )
        self.head = ConfigScoringHead([hidden_dim] * final_mlp_layers, hidden_activation, dropout)

    @property
    def attends_across_configs(self) -> bool:
        return self.config_attention is not None

    def nodes_per_config(self, num_nodes: int, num_configurable: int) -> int:
        # Only the configurable nodes' states are held per configuration.
        return num_configurable

    def embed_values(self, values: tf.Tensor, inputs: dict) -> tf.Tensor:
        """[NC, K, 18 * (e + 1)]: per slot, embed(slot, value, value == `cfg_ref`'s) ; log1p of the
        size of the dimension the value names (0 for -1, from `cfg_dims`)."""
        values = tf.cast(values, tf.int32)  # [NC, K, 18], -1..5
        ref = tf.cast(inputs["cfg_ref"], tf.int32)[:, None, :]  # [NC, 1, 18]
        same = tf.cast(tf.equal(values, ref), tf.int32)
        slots = tf.range(NODE_CONFIG_FEAT_DIM, dtype=tf.int32) * (2 * NUM_CONFIG_VALUES)
        rows = slots + 2 * (values - CONFIG_VALUE_MIN) + same
        embedded = self.value_embedding(rows)  # [NC, K, 18, e]
        group_start = (tf.range(NODE_CONFIG_FEAT_DIM, dtype=tf.int32) // 6) * 6
        picked = tf.gather(
            inputs["cfg_dims"], group_start + tf.maximum(values, 0), batch_dims=1
        )  # [NC, K, 18]
        size = tf.where(values >= 0, picked, 0.0)[..., None]
        joined = tf.concat([embedded, size], axis=-1)
        shape = tf.shape(joined)
        width = NODE_CONFIG_FEAT_DIM * (self.config_embed_dim + 1)
        return tf.reshape(joined, [shape[0], shape[1], width])

    def _pool_configurable(self, graph, x: tf.Tensor) -> tf.Tensor:
        """[NC, K, d] -> [G, K, d * len(reductions)] over each graph's configurable nodes."""
        cfg = graph.node_sets["cfg"]
        graph_of = tf.searchsorted(
            tf.cumsum(cfg.sizes), tf.range(cfg.total_size), side="right", out_type=tf.int32
        )
        num_graphs = tf.shape(cfg.sizes)[0]
        total = tf.math.unsorted_segment_sum(x, graph_of, num_graphs)
        pooled = []
        for r in self.reductions:
            if r == "sum":
                pooled.append(total)
            elif r == "mean":
                count = tf.cast(tf.maximum(cfg.sizes, 1), x.dtype)[:, None, None]
                pooled.append(total / count)
            else:  # max; a graph without configurable nodes gets 0, not -inf
                top = tf.math.unsorted_segment_max(x, graph_of, num_graphs)
                pooled.append(tf.where(cfg.sizes[:, None, None] > 0, top, 0.0))
        return tf.concat(pooled, axis=-1)

    def graph_part(self, inputs: dict, training=None) -> dict[str, tf.Tensor]:
        """Op states pooled per graph ([G, h * r]) and joined on the configurable nodes [NC, h]."""
        graph = inputs["graph"]
        encoded = backprop_segment(inputs, self.op_encoder(graph), training)
        states = encoded
        for conv in self.convs:
            states = conv(graph, states)
        node_part = self.join_node(tf.gather(tf.concat([encoded, states], -1), inputs["cfg_node"]))
        return {"graph_state": self.graph_pool(graph, states), "node_part": node_part}

    def config_part(self, inputs: dict, graph_part: dict, training=None) -> tf.Tensor:
        graph = inputs["graph"]
        graph_state, node_part = graph_part["graph_state"], graph_part["node_part"]
        # Per distinct row, then gathered per slot (relayout copies read operands: every slot).
        per_row = not self.relayout_copies
        values = inputs["config_rows"] if per_row else inputs["config_values"]
        if self.relative_to_reference:
            # One more column, the reference layouts, whose states are subtracted below.
            reference = tf.cast(inputs["cfg_ref"], values.dtype)[:, None, :]
            values = tf.concat([values, reference], axis=1)
        embedded = self.embed_values(values, inputs)  # [NC, K, 18 * (e + 1)]
        if self.tile_padding:
            padding = padding_features(values, inputs["cfg_ref"], inputs["cfg_dims"])
            embedded = tf.concat([embedded, padding], axis=-1)
        if self.relayout_copies:
            copies = copy_features(
                values, inputs["cfg_ref"], inputs["cfg_operand"], inputs["cfg_dims"]
            )
            embedded = tf.concat([embedded, copies], axis=-1)
        x = self.activation(node_part[:, None, :] + self.join_config(embedded))
        x = self.config_mlp(x)  # [NC, R or K, h]
        if per_row:
            if self.relative_to_reference:
                x, reference_state = x[:, :-1, :], x[:, -1:, :]
            x = tf.gather(x, inputs["config_codes"], batch_dims=1)  # [NC, K, h]
            if self.relative_to_reference:
                x = tf.concat([x, reference_state], axis=1)
        if self.config_rounds:
            inverse_degree = 1.0 / tf.maximum(
                graph_ops.bidirectional_degree(graph, "cfg_feed"), 1.0
            )
            for parts in self.config_rounds:
                update = parts["self"](x)
                for direction in ("producers", "consumers"):
                    mean = graph_ops.adjacency(
                        graph, direction, row_weight=inverse_degree, edge_set="cfg_feed"
                    )
                    update += parts[direction](graph_ops.propagate(mean, x))
                x = x + self.activation(update)
        if self.relative_to_reference:
            x = x[:, :-1, :] - x[:, -1:, :]
        config_state = self._pool_configurable(graph, x)  # [G, K, h * r]
        if self.config_attention is not None:
            mask = tf.reshape(inputs["config_mask"], tf.shape(config_state)[:2])
            config_state = self.config_attention(config_state, mask)
        if self.config_frequency:
            frequency = tf.reshape(inputs["config_frequency"], tf.shape(config_state)[:2])
            config_state = tf.concat([config_state, frequency[..., None]], axis=-1)
        if not self.graph_state_in_head:
            return self.head(config_state, training=training)
        return self.head.score_joined(graph_state, config_state, training=training)
