"""Initial op node states from opcode and normalized node features."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.format import NODE_FEAT_DIM


class OpEncoder(tf.keras.layers.Layer):
    """Computes `act(W [embed(opcode) ; feats])`, the table fixed at `vocab_size` rows."""

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        hidden_dim: int,
        activation="leaky_relu",
        feature_dim: int = NODE_FEAT_DIM,
        **kw,
    ):
        super().__init__(**kw)
        self.embedding_dim = embedding_dim
        self.feature_dim = feature_dim
        self.embedding = tf.keras.layers.Embedding(vocab_size, embedding_dim, name="opcode_embed")
        self.dense = tf.keras.layers.Dense(hidden_dim, activation=activation, name="project")

    def build(self, input_shape=None) -> None:
        self.embedding.build(tf.TensorShape([None]))
        self.dense.build(tf.TensorShape([None, self.embedding_dim + self.feature_dim]))
        super().build(input_shape)

    def call(self, graph: tfgnn.GraphTensor) -> tf.Tensor:
        ops = graph.node_sets["op"]
        # The file's columns only: derived columns after them are for other layers.
        feats = ops["feats"][:, : self.feature_dim]
        return self.dense(tf.concat([self.embedding(ops["op"]), feats], axis=-1))
