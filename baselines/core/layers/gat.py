"""GATv2 attention over both directions of the op graph, with residual and LayerNorm."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn
from tensorflow_gnn.models import gat_v2

from baselines.core.layers.graph_ops import edge_set
from baselines.core.layers.pointwise import state_width


class HeadLogits(tf.keras.layers.EinsumDense):
    """Per-head attention logits `sum_c features[..., h, c] kernel[c, h]`, one multiply and sum."""

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(inputs * tf.transpose(self.kernel), axis=-1)


def gatv2_conv(**kwargs) -> gat_v2.GATv2Conv:
    """TF-GNN's `GATv2Conv(**kwargs)` with its attention logits computed by `HeadLogits`."""
    conv = gat_v2.GATv2Conv(**kwargs)
    einsum = conv._attention_logits_fn  # built on the conv's first call, not yet
    if einsum.get_config()["equation"] != "...ik,ki->...i" or einsum.bias_axes:
        raise ValueError(f"GATv2Conv's attention logits changed: {einsum.get_config()}")
    conv._attention_logits_fn = HeadLogits.from_config(einsum.get_config())
    return conv


class GATv2Block(tf.keras.layers.Layer):
    """Computes `LayerNorm(h + Dropout(W [gat_fwd(h) ; gat_bwd(h)]))` for op nodes: attention over
    consumers and over producers, each with its own weights (upstream's `directed=True`) and
    `num_heads` heads of `units // num_heads` channels."""

    def __init__(self, units: int, num_heads: int, dropout: float = 0.0, **kw):
        super().__init__(**kw)
        if units % num_heads:
            raise ValueError(f"hidden_dim {units} must be a multiple of num_heads {num_heads}")
        self.units = units
        per_head = units // num_heads
        conv_args = dict(num_heads=num_heads, per_head_channels=per_head, edge_dropout=dropout)
        self.forward_conv = gatv2_conv(receiver_tag=tfgnn.TARGET, name="gat_fwd", **conv_args)
        self.backward_conv = gatv2_conv(receiver_tag=tfgnn.SOURCE, name="gat_bwd", **conv_args)
        self.combine = tf.keras.layers.Dense(units, name="combine")
        self.dropout = tf.keras.layers.Dropout(dropout)
        self.norm = tf.keras.layers.LayerNormalization(name="norm")

    def build(self, input_shape=None) -> None:
        """Creates the weights for states [num_ops, units] by calling both convs on a 2-op graph."""
        width = state_width(input_shape)
        if width is not None:
            tiny = tfgnn.GraphTensor.from_pieces(
                node_sets={
                    "op": tfgnn.NodeSet.from_fields(
                        sizes=[2], features={tfgnn.HIDDEN_STATE: tf.zeros([2, width])}
                    )
                },
                edge_sets={"feed": edge_set([1], ("op", [1]), ("op", [0]))},
            )
            for conv in (self.forward_conv, self.backward_conv):
                conv(tiny, edge_set_name="feed")
            self.combine.build(tf.TensorShape([None, 2 * self.units]))
            self.norm.build(tf.TensorShape([None, self.units]))
        super().build(input_shape)

    def call(self, graph: tfgnn.GraphTensor, states: tf.Tensor, training=None) -> tf.Tensor:
        graph = graph.replace_features(node_sets={"op": {tfgnn.HIDDEN_STATE: states}})
        convs = (self.forward_conv, self.backward_conv)
        messages = tf.concat([c(graph, edge_set_name="feed", training=training) for c in convs], -1)
        update = self.dropout(self.combine(messages), training=training)
        return self.norm(states + update)
