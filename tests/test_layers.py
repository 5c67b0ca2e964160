"""Layers against plain numpy versions of their formulas, on a tiny graph."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from baselines.tiles.graph import dummy_batch, graph_from_batch, to_tensors
from baselines.tiles.layers import (
    GATv2Block,
    KernelPooling,
    PointwiseDense,
    ResGCNConv,
    SAGEConv,
)

EDGES = np.array([[1, 0], [2, 0], [2, 1], [3, 2]])  # u consumes v


def tiny_graph(num_configs=2):
    batch = dummy_batch(num_configs)
    batch.update(
        op_sizes=np.array([4], np.int32),
        feed_sizes=np.array([len(EDGES)], np.int32),
        op_opcode=np.zeros(4, np.int32),
        op_feats=np.zeros((4, 140), np.float32),
        feed_source=EDGES[:, 0].astype(np.int32),
        feed_target=EDGES[:, 1].astype(np.int32),
    )
    return graph_from_batch(to_tensors(batch))


def symmetric_adjacency():
    a = np.zeros((4, 4))
    for u, v in EDGES:
        a[u, v] = a[v, u] = 1
    return a


def test_sage_matches_formula_on_2d_and_3d_states():
    rng = np.random.default_rng(0)
    conv = SAGEConv(5, activation="relu")
    graph = tiny_graph()
    states = rng.normal(size=(4, 3, 6)).astype(np.float32)  # [n, k, d]
    out = conv(graph, tf.constant(states)).numpy()
    a = symmetric_adjacency()
    mean = np.einsum("uv,vkd->ukd", a / a.sum(1, keepdims=True), states)
    w_self, b = (v.numpy() for v in conv.self_dense.weights)
    w_neigh = conv.neighbour_dense.kernel.numpy()
    expected = np.maximum(states @ w_self + b + mean @ w_neigh, 0)
    expected /= np.maximum(np.linalg.norm(expected, axis=-1, keepdims=True), 1e-6)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    flat = conv(graph, tf.constant(states[:, 1])).numpy()  # [n, d]: same per config
    np.testing.assert_allclose(flat, out[:, 1], rtol=1e-5, atol=1e-6)


def test_res_gcn_matches_formula():
    rng = np.random.default_rng(1)
    conv = ResGCNConv(6, activation="relu")
    states = rng.normal(size=(4, 6)).astype(np.float32)
    out = conv(tiny_graph(), tf.constant(states)).numpy()
    a = symmetric_adjacency() + np.eye(4)
    d = 1 / np.sqrt(a.sum(1))
    w, b = (v.numpy() for v in conv.dense.weights)
    expected = states + np.maximum((d[:, None] * a * d[None, :]) @ states @ w + b, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_gat_block_keeps_width_and_uses_neighbours():
    rng = np.random.default_rng(2)
    block = GATv2Block(8, num_heads=2)
    graph = tiny_graph()
    states = tf.constant(rng.normal(size=(4, 8)).astype(np.float32))
    out = block(graph, states).numpy()
    assert out.shape == (4, 8)
    np.testing.assert_allclose(out.mean(-1), 0, atol=1e-5)  # LayerNorm output
    changed = states.numpy().copy()
    changed[3] += 5.0  # node 3 only neighbours node 2
    out2 = block(graph, tf.constant(changed)).numpy()
    assert not np.allclose(out2[2], out[2]) and np.allclose(out2[0], out[0], atol=1e-6)


def test_kernel_pooling_per_component():
    graph = tiny_graph()
    states = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    pooled = KernelPooling(("sum", "max")).call(graph, states).numpy()
    np.testing.assert_allclose(pooled, [[12, 16, 6, 7]])


def test_pointwise_dense_equals_keras_dense_on_any_rank():
    rng = np.random.default_rng(3)
    ours = PointwiseDense(5, activation="relu")
    keras = tf.keras.layers.Dense(5, activation="relu")
    for shape in [(7, 6), (4, 3, 6), (2, 4, 3, 6)]:
        x = tf.constant(rng.normal(size=shape).astype(np.float32))
        out = ours(x)
        if not keras.built:
            keras(x)
            keras.set_weights(ours.get_weights())
        assert out.shape == shape[:-1] + (5,)
        np.testing.assert_allclose(out.numpy(), keras(x).numpy(), rtol=1e-6, atol=1e-6)


def test_build_with_state_shape_makes_the_weights_a_first_call_makes():
    graph = tiny_graph()
    states = tf.constant(np.ones((4, 8), np.float32))
    for make in (
        lambda: SAGEConv(8),
        lambda: ResGCNConv(8),
        lambda: GATv2Block(8, num_heads=2),
    ):
        called, built = make(), make()
        called(graph, states)
        built.build(tf.TensorShape([None, 8]))
        assert [tuple(v.shape) for v in built.weights] == [tuple(v.shape) for v in called.weights]
        graph_shaped = make()
        graph_shaped.build(graph.shape)  # what Keras passes on a first call: no width yet
        assert not graph_shaped.weights


def numpy_per_dim_encoding(encoder, feats, kernel_of_op, op_states, configs):
    """PerDimConfigEncoder's formula in numpy (relu activation)."""
    w_score, b_score = (v.numpy() for v in encoder.tiled_op_score.weights)
    (w0, b0), (w1, b1) = (
        (layer.kernel.numpy(), layer.bias.numpy()) for layer in encoder.token_layers
    )
    logits = op_states @ w_score + b_score  # [ops, heads]
    out = []
    for b in range(configs.shape[0]):
        ops = np.flatnonzero(kernel_of_op == b)
        shape, layout = [], []
        for h in range(logits.shape[1]):
            a = np.exp(logits[ops, h] - logits[ops, h].max())
            a /= a.sum()
            shape.append(a @ feats[ops][:, 21:27])  # attention-weighted output dims 0..5
            layout.append(a @ feats[ops][:, 134:140])
        rows = []
        for cfg in configs[b]:
            tokens = np.array(
                [
                    [
                        cfg[d],
                        cfg[8 + d],
                        cfg[16 + d],
                        *[s[d] for s in shape],
                        *[lay[d] for lay in layout],
                        *np.eye(6)[d],
                    ]
                    for d in range(6)
                ]
            )
            t = np.maximum(np.maximum(tokens @ w0 + b0, 0) @ w1 + b1, 0)
            rows.append(np.concatenate([t.sum(0), t.max(0), cfg]))
        out.append(rows)
    return np.array(out)


@pytest.mark.parametrize("heads", [1, 3])
def test_per_dim_config_encoder_matches_its_formula(sample_root, heads):
    """On the toy set and the real samples: tuple roots, all-zero configs, 1-config kernels."""
    from baselines.tiles import data
    from baselines.tiles.features import FeatureStats
    from baselines.tiles.graph import assemble_batch
    from baselines.tiles.layers import PerDimConfigEncoder

    raw = data.load_split(sample_root / "valid", progress=False)
    raw_test = data.load_split(sample_root / "test", progress=False)
    split = FeatureStats.fit_split(raw).normalize_split(raw_test)
    zero = [i for i in range(len(split)) if not np.any(raw_test.kernel(i).config_feat)]
    roots = [int(np.sum(raw_test.kernel(i).node_feat[:, 0] > 0)) for i in range(len(split))]
    ids = sorted({*zero[:1], int(np.argmax(roots)), 0, len(split) - 1})
    k = int(min(4, split.num_configs[ids].min()))
    batch = assemble_batch(split, ids, [np.arange(k)] * len(ids), k)
    graph = graph_from_batch(to_tensors(batch))
    rng = np.random.default_rng(4)
    op_states = rng.normal(size=(int(batch["op_sizes"].sum()), 8)).astype(np.float32)
    configs = batch["config_feats"].reshape(len(ids), k, 24)
    encoder = PerDimConfigEncoder(units=5, activation="relu", num_heads=heads)
    encoder.build(tf.TensorShape([None, 8]))
    for v in encoder.weights:  # away from zero biases, so that every term shows
        v.assign(rng.normal(size=v.shape).astype(np.float32))
    got = encoder(graph, tf.constant(op_states), tf.constant(configs)).numpy()
    kernel_of_op = np.repeat(np.arange(len(ids)), batch["op_sizes"])
    want = numpy_per_dim_encoding(encoder, batch["op_feats"], kernel_of_op, op_states, configs)
    assert got.shape == (len(ids), k, encoder.output_width)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert max(roots) >= 2  # a kernel with several roots (a tuple output) is in the batch
