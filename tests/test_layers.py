"""Layers against plain numpy versions of their formulas, on a tiny graph."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from baselines.core.layers.readout import folding_pays
from baselines.tiles.kernel_batches import dummy_batch, graph_from_batch, to_tensors
from baselines.tiles.layers import (
    ChebConv,
    ConfigScoringHead,
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


def producer_adjacency():
    """p[u, v] = 1 when u reads v's output (v is one of u's producers)."""
    p = np.zeros((4, 4))
    for u, v in EDGES:
        p[u, v] = 1
    return p


def randomize(layer, rng) -> None:
    """Random values for every weight, biases included, so that every term shows."""
    for v in layer.weights:
        v.assign(rng.normal(size=v.shape).astype(np.float32))


def packed_graph(kernels: list[tuple[int, list[tuple[int, int]]]], num_configs: int = 2):
    """One GraphTensor of several kernels: (op count, local edges u -> v) each."""
    batch = dummy_batch(num_configs)
    b, n = len(kernels), sum(k[0] for k in kernels)
    edges, base = [], 0
    for size, local in kernels:
        edges += [(u + base, v + base) for u, v in local]
        base += size
    edges = np.array(edges, np.int32).reshape(-1, 2)
    batch.update(
        op_sizes=np.array([k[0] for k in kernels], np.int32),
        feed_sizes=np.array([len(k[1]) for k in kernels], np.int32),
        config_sizes=np.full(b, num_configs, np.int32),
        op_opcode=np.zeros(n, np.int32),
        op_feats=np.zeros((n, 140), np.float32),
        feed_source=edges[:, 0],
        feed_target=edges[:, 1],
        config_feats=np.zeros((b * num_configs, 24), np.float32),
        config_runtimes=np.ones(b * num_configs, np.float32),
        config_normalizers=np.ones(b * num_configs, np.float32),
        config_mask=np.ones(b * num_configs, np.float32),
        config_index=np.tile(np.arange(num_configs, dtype=np.int32), b),
        tile_id=np.array([b"k%d" % i for i in range(b)], object),
    )
    return graph_from_batch(to_tensors(batch)), n, edges


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


def test_directed_sage_matches_formula_and_ties_back_to_the_undirected_layer():
    rng = np.random.default_rng(5)
    conv = SAGEConv(5, activation="relu", directed=True)
    graph = tiny_graph()
    states = rng.normal(size=(4, 3, 6)).astype(np.float32)
    conv.build(tf.TensorShape([None, 6]))
    randomize(conv, rng)
    out = conv(graph, tf.constant(states)).numpy()
    p = producer_adjacency()
    degree = np.maximum((p + p.T).sum(1, keepdims=True), 1)
    w_self, b = (v.numpy() for v in conv.self_dense.weights)
    w_prod = conv.neighbour_denses["producers"].kernel.numpy()
    w_cons = conv.neighbour_denses["consumers"].kernel.numpy()
    producers = np.einsum("uv,vkd->ukd", p / degree, states)
    consumers = np.einsum("uv,vkd->ukd", p.T / degree, states)
    expected = np.maximum(states @ w_self + b + producers @ w_prod + consumers @ w_cons, 0)
    expected /= np.maximum(np.linalg.norm(expected, axis=-1, keepdims=True), 1e-6)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    # Reversing the edges swaps the two parts: the output moves.
    reversed_graph = packed_graph([(4, [(v, u) for u, v in EDGES])], 2)[0]
    assert not np.allclose(conv(reversed_graph, tf.constant(states)).numpy(), out, atol=1e-3)
    # Tied direction weights give the undirected layer.
    undirected = SAGEConv(5, activation="relu")
    undirected.build(tf.TensorShape([None, 6]))
    undirected.self_dense.set_weights(conv.self_dense.get_weights())
    undirected.neighbour_dense.set_weights([w_prod])
    conv.neighbour_denses["consumers"].set_weights([w_prod])
    np.testing.assert_allclose(
        conv(graph, tf.constant(states)).numpy(),
        undirected(graph, tf.constant(states)).numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_directed_res_gcn_matches_formula():
    rng = np.random.default_rng(6)
    conv = ResGCNConv(6, activation="relu", directed=True)
    conv.build(tf.TensorShape([None, 6]))
    randomize(conv, rng)
    states = rng.normal(size=(4, 2, 6)).astype(np.float32)
    out = conv(tiny_graph(), tf.constant(states)).numpy()
    p = producer_adjacency()
    d = 1 / np.sqrt((p + p.T).sum(1) + 1)
    parts = {"producers": d[:, None] * p * d, "consumers": d[:, None] * p.T * d}
    parts["self"] = np.diag(d * d)
    update = conv.part_denses["self"].bias.numpy()
    for name, matrix in parts.items():
        update = (
            update
            + np.einsum("uv,vkd->ukd", matrix, states) @ conv.part_denses[name].kernel.numpy()
        )
    np.testing.assert_allclose(out, states + np.maximum(update, 0), rtol=1e-4, atol=1e-4)


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


def test_gat_block_computes_what_tf_gnns_einsum_logits_compute():
    """HeadLogits (a multiply and a sum) against TF-GNN's EinsumDense, same weights.

    Both sum 4 float32 products per head; tolerances are a few ulps of the
    O(1) outputs. A wrong transpose or reduced axis changes them by O(1).
    """
    rng = np.random.default_rng(5)
    block = GATv2Block(8, num_heads=2)
    graph = tiny_graph()
    states = tf.constant(rng.normal(size=(4, 8)).astype(np.float32))
    out = block(graph, states).numpy()
    reference = GATv2Block(8, num_heads=2)
    for conv in (reference.forward_conv, reference.backward_conv):
        conv._attention_logits_fn = tf.keras.layers.EinsumDense(
            "...ik,ki->...i", output_shape=(2,), name="attn_logits"
        )
    reference(graph, states)
    reference.set_weights(block.get_weights())

    def inner(weights):  # names below the block's own (which Keras numbers per instance)
        return [w.name.split("/", 1)[1] for w in weights]

    assert inner(reference.weights) == inner(block.weights)
    np.testing.assert_allclose(out, reference(graph, states).numpy(), rtol=1e-5, atol=1e-6)
    # The heads' kernels differ, so a swapped head would show.
    kernel = block.forward_conv._attention_logits_fn.kernel.numpy()
    assert kernel.shape == (4, 2) and not np.allclose(kernel[:, 0], kernel[:, 1])
    ops = tf.function(lambda s: block(graph, s)).get_concrete_function(states).graph
    assert not [op.type for op in ops.get_operations() if "Einsum" in op.type]


def test_kernel_pooling_per_component():
    graph = tiny_graph()
    states = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))
    pooled = KernelPooling(("sum", "max")).call(graph, states).numpy()
    np.testing.assert_allclose(pooled, [[12, 16, 6, 7]])
    graph = packed_graph([(3, [(1, 0)]), (2, [(1, 0)])])[0]
    states = np.array([[1, -2], [3, 0], [5, 4], [-1, 7], [2, 2]], np.float32)
    pooled = KernelPooling(("mean", "max", "sum")).call(graph, tf.constant(states)).numpy()
    first, second = states[:3], states[3:]
    want = [np.concatenate([part.mean(0), part.max(0), part.sum(0)]) for part in (first, second)]
    np.testing.assert_allclose(pooled, want, rtol=1e-6)
    with pytest.raises(ValueError, match="reduction must be one or more of sum, mean, max"):
        KernelPooling(("sum", "median"))


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
        lambda: SAGEConv(8, directed=True),
        lambda: ResGCNConv(8),
        lambda: ResGCNConv(8, directed=True),
        lambda: GATv2Block(8, num_heads=2),
        lambda: ChebConv(8, order=3),
    ):
        called, built = make(), make()
        called(graph, states)
        built.build(tf.TensorShape([None, 8]))
        assert [tuple(v.shape) for v in built.weights] == [tuple(v.shape) for v in called.weights]
        graph_shaped = make()
        graph_shaped.build(graph.shape)  # what Keras passes on a first call: no width yet
        assert not graph_shaped.weights


def python_layout_positions(raw_feats):
    """Per op, the position of each dimension d in minor_to_major (-1 past the rank)."""
    out = []
    for row in raw_feats:
        dims = [int(x) for x in row[21:27]]
        rank = max((i + 1 for i, x in enumerate(dims) if x > 0), default=0)
        minor_to_major = [int(x) for x in row[134:140]][:rank]
        out.append([minor_to_major.index(d) if d in minor_to_major else -1 for d in range(6)])
    return np.array(out, np.float32)


def numpy_per_dim_encoding(encoder, feats, kernel_of_op, op_states, configs, layout_cols=None):
    """PerDimConfigEncoder's formula in numpy (relu activation).

    `layout_cols` [ops, 6]: what each token sees of the layout (default: the
    normalized file columns 134..139, minor_to_major).
    """
    layout_cols = feats[:, 134:140] if layout_cols is None else layout_cols
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
            layout.append(a @ layout_cols[ops])
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


@pytest.mark.parametrize("heads, dim_layout", [(1, "minor_to_major"), (3, "position")])
def test_per_dim_config_encoder_matches_its_formula(sample_root, heads, dim_layout):
    """On the toy set and the real samples: tuple roots, all-zero configs, 1-config kernels."""
    from baselines.tiles import data
    from baselines.tiles.features import FeatureStats
    from baselines.tiles.kernel_batches import assemble_batch
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
    configs = batch["config_feats"][:, :24].reshape(len(ids), k, 24)
    encoder = PerDimConfigEncoder(
        units=5, activation="relu", num_heads=heads, dim_layout=dim_layout
    )
    encoder.build(tf.TensorShape([None, 8]))
    for v in encoder.weights:  # away from zero biases, so that every term shows
        v.assign(rng.normal(size=v.shape).astype(np.float32))
    got = encoder(graph, tf.constant(op_states), tf.constant(configs)).numpy()
    kernel_of_op = np.repeat(np.arange(len(ids)), batch["op_sizes"])
    layout_cols = None
    if dim_layout == "position":  # from the raw files' columns, by a plain loop
        raw_batch = assemble_batch(raw_test, ids, [np.arange(k)] * len(ids), k)
        layout_cols = python_layout_positions(raw_batch["op_feats"])
        assert np.any(layout_cols[:, 0] > 0)  # some dim 0 is not the most minor
    want = numpy_per_dim_encoding(
        encoder, batch["op_feats"], kernel_of_op, op_states, configs, layout_cols
    )
    assert got.shape == (len(ids), k, encoder.output_width)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert max(roots) >= 2  # a kernel with several roots (a tuple output) is in the batch


def test_per_dim_tokens_from_distinct_rows_match_every_token_computed_alone():
    """Repeated bounds within a kernel, and the same bounds in two kernels with other dims."""
    from baselines.tiles.layers import PerDimConfigEncoder

    rng = np.random.default_rng(7)
    heads = 2
    encoder = PerDimConfigEncoder(units=4, activation="relu", num_heads=heads)
    encoder.build(tf.TensorShape([None, 8]))
    for v in encoder.weights:
        v.assign(rng.normal(size=v.shape).astype(np.float32))
    # Kernel 1's configs are kernel 0's (so the key must hold the kernel), two
    # configs repeat (so rows are shared), and -0.0 / 0.0 both occur.
    first = rng.integers(0, 3, size=(4, 6, 3)).astype(np.float32)
    first[3] = first[1]
    first[2, 0, 0] = -0.0
    bounds = np.stack([first, first])  # [b=2, k=4, 6, 3]
    kernel_dims = rng.normal(size=(2, 6, 2 * heads)).astype(np.float32)
    got = encoder.encode_tokens(tf.constant(bounds), tf.constant(kernel_dims)).numpy()
    assert got.shape == (6, 2, 4, 4)  # dimension-major
    got = got.transpose(1, 2, 0, 3)  # [b, k, 6, units], as `want` is built

    (w0, b0), (w1, b1) = ((la.kernel.numpy(), la.bias.numpy()) for la in encoder.token_layers)
    want = np.zeros((2, 4, 6, 4), np.float32)
    for b in range(2):
        for c in range(4):
            for d in range(6):  # every token on its own, in the documented input order
                token = np.concatenate([bounds[b, c, d], kernel_dims[b, d], np.eye(6)[d]])
                want[b, c, d] = np.maximum(np.maximum(token @ w0 + b0, 0) @ w1 + b1, 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert not np.allclose(got[0], got[1])  # same bounds, other kernel dims: other tokens


def test_distinct_rows_numbers_each_group_and_bit_pattern_once_from_its_first_row():
    from baselines.tiles.layers.config_encoder import distinct_rows

    rng = np.random.default_rng(3)
    group = rng.integers(0, 4, size=500).astype(np.int32)
    # Few values per column, so rows repeat and rows that share two columns differ in one.
    values = rng.choice(np.array([0.0, -0.0, 0.5, -1.25, 3.0], np.float32), size=(500, 3))
    values[7] = values[3]  # same values, maybe another group
    first, index = (t.numpy() for t in distinct_rows(tf.constant(group), tf.constant(values)))

    numbers: dict[tuple, int] = {}
    firsts = []
    for row, key in enumerate(zip(group.tolist(), *values.view(np.int32).T.tolist())):
        if key not in numbers:
            numbers[key] = len(firsts)
            firsts.append(row)
    want_index = [numbers[k] for k in zip(group.tolist(), *values.view(np.int32).T.tolist())]
    # Numbering may differ in order; the partition of rows and the first rows may not.
    assert len(set(index.tolist())) == len(firsts) == len(first)
    assert len(set(zip(index.tolist(), want_index))) == len(firsts)
    assert sorted(first.tolist()) == firsts
    np.testing.assert_array_equal(group[first][index], group)
    np.testing.assert_array_equal(values[first][index].view(np.int32), values.view(np.int32))


# --- ChebConv against a dense numpy ChebNet ------------------------------------------------

# A 2-node kernel, the 4-node graph above, and a kernel whose op 3 is isolated
# (its only edge is a self loop, which the Laplacian drops, as PyG does).
CHEB_KERNELS = [
    (2, [(1, 0)]),
    (4, [tuple(e) for e in EDGES]),
    (4, [(1, 0), (2, 1), (3, 3)]),
]


def dense_scaled_laplacian(n: int, edges: np.ndarray) -> np.ndarray:
    """L~ = 2 L / 2 - I for L = I - D^-1/2 A D^-1/2 of the undirected graph, built densely."""
    a = np.zeros((n, n))
    for u, v in edges:
        if u != v:
            a[u, v] = a[v, u] = 1.0
    degree = a.sum(1)
    inv_sqrt = np.where(degree > 0, 1 / np.sqrt(np.maximum(degree, 1e-12)), 0.0)
    laplacian = np.eye(n) - inv_sqrt[:, None] * a * inv_sqrt[None, :]
    return 2.0 * laplacian / 2.0 - np.eye(n)


def dense_cheb(conv: ChebConv, scaled: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sum_k T_k(L~) x W_k + b with T_0 = I, T_1 = L~, T_k = 2 L~ T_(k-1) - T_(k-2)."""
    x = x.astype(np.float64)
    polys = [np.eye(len(scaled)), scaled]
    while len(polys) < conv.order:
        polys.append(2 * scaled @ polys[-1] - polys[-2])
    out = conv.order_denses[0].bias.numpy().astype(np.float64)
    for t, dense in zip(polys, conv.order_denses):
        out = out + np.einsum("uv,v...->u...", t, x) @ dense.kernel.numpy()
    return out


@pytest.mark.parametrize("order", [1, 2, 3])
def test_cheb_conv_matches_dense_chebnet_on_packed_kernels(order):
    rng = np.random.default_rng(10 + order)
    graph, n, edges = packed_graph(CHEB_KERNELS, num_configs=3)
    scaled = dense_scaled_laplacian(n, edges)
    # The isolated op's row of L is the identity's, so its row of L~ is zero.
    isolated = 2 + 4 + 3
    np.testing.assert_array_equal(scaled[isolated], np.zeros(n))
    conv = ChebConv(5, order=order)
    conv.build(tf.TensorShape([None, 6]))
    randomize(conv, rng)
    states = rng.normal(size=(n, 3, 6)).astype(np.float32)  # [ops, configs, hidden]
    out = conv(graph, tf.constant(states)).numpy()
    np.testing.assert_allclose(out, dense_cheb(conv, scaled, states), rtol=1e-4, atol=1e-4)
    flat = conv(graph, tf.constant(states[:, 1])).numpy()  # [ops, hidden]
    np.testing.assert_allclose(flat, dense_cheb(conv, scaled, states[:, 1]), rtol=1e-4, atol=1e-4)
    # Alone, each kernel gives its rows of the packed result: no edge crosses kernels.
    start = 0
    for size, local in CHEB_KERNELS:
        alone = conv(packed_graph([(size, local)])[0], tf.constant(states[start : start + size]))
        np.testing.assert_allclose(alone.numpy(), out[start : start + size], rtol=1e-5, atol=1e-5)
        start += size


def test_cheb_conv_orders_reach_their_hops_and_activation_applies():
    """Order K mixes neighbours up to K - 1 hops away on a 4-op path, and no further."""
    rng = np.random.default_rng(20)
    graph = packed_graph([(4, [(1, 0), (2, 1), (3, 2)])])[0]
    states = rng.normal(size=(4, 3)).astype(np.float32)
    moved = states.copy()
    moved[3] += 1.0  # op 3 is 3 hops from op 0
    for order, reaches_op_0 in ((3, False), (4, True)):
        conv = ChebConv(2, order=order, activation="relu")
        conv.build(tf.TensorShape([None, 3]))
        randomize(conv, rng)
        before, after = (conv(graph, tf.constant(x)).numpy() for x in (states, moved))
        assert (np.abs(before[0] - after[0]).max() > 1e-4) == reaches_op_0
        assert before.min() >= 0  # relu
    with pytest.raises(ValueError, match="cheb_order must be an integer of at least 1, got 0"):
        ChebConv(2, order=0)


@pytest.mark.parametrize("hidden_dims", [(), (8,), (8, 4)])
def test_scoring_head_joined_equals_the_head_on_the_tiled_concatenation(hidden_dims):
    """score_joined(kernel, configs) == head([kernel repeated per config ; configs])."""
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(3, 5)).astype(np.float32)
    configs = rng.normal(size=(3, 7, 4)).astype(np.float32)
    head = ConfigScoringHead(hidden_dims)
    tiled = np.concatenate([np.repeat(kernel[:, None, :], 7, axis=1), configs], axis=-1)
    want = head(tf.constant(tiled)).numpy()
    got = head.score_joined(tf.constant(kernel), tf.constant(configs)).numpy()
    assert got.shape == (3, 7)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("num_configs", [2, 7])  # below / above the folding threshold (3.4)
@pytest.mark.parametrize("hidden_dims", [(8,), (8, 4)])
def test_scoring_head_gated_equals_the_head_on_the_gated_concatenation(num_configs, hidden_dims):
    """score_gated == head([kernel ; configs ; gate * (configs P + b)]), folded or not."""
    rng = np.random.default_rng(1)
    kernel = rng.normal(size=(3, 5)).astype(np.float32)
    configs = rng.normal(size=(3, num_configs, 6)).astype(np.float32)
    gate = rng.normal(size=(3, 4)).astype(np.float32)
    projection = PointwiseDense(4)
    projection.build(tf.TensorShape([None, 6]))
    projection.bias.assign(rng.normal(size=4).astype(np.float32))
    head = ConfigScoringHead(hidden_dims)
    gated = gate[:, None, :] * (configs @ projection.kernel.numpy() + projection.bias.numpy())
    joined = np.concatenate(
        [np.repeat(kernel[:, None, :], num_configs, axis=1), configs, gated], axis=-1
    )
    got = head.score_gated(*map(tf.constant, (kernel, configs, gate)), projection).numpy()
    want = head(tf.constant(joined)).numpy()
    assert got.shape == (3, num_configs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # Traced with the config count unknown (ranking's calls): the choice is made in the graph.
    dynamic = tf.function(
        lambda k, c, g: head.score_gated(k, c, g, projection),
        input_signature=[
            tf.TensorSpec([None, 5]),
            tf.TensorSpec([None, None, 6]),
            tf.TensorSpec([None, 4]),
        ],
    )
    traced = dynamic(*map(tf.constant, (kernel, configs, gate))).numpy()
    np.testing.assert_allclose(traced, want, rtol=1e-4, atol=1e-5)
    assert folding_pays(num_configs, 6, hidden_dims[0]) == (num_configs == 7)
    with pytest.raises(ValueError, match="linear projection"):
        head.score_gated(kernel, configs, gate, PointwiseDense(4, activation="relu"))


@pytest.mark.parametrize("config_width, units", [(6, 8), (280, 128), (24, 64)])
def test_folding_pays_exactly_when_it_costs_fewer_multiply_adds(config_width, units):
    gate_width = 5
    for num_configs in range(1, 400):
        unfolded = num_configs * (config_width * gate_width + (config_width + gate_width) * units)
        folded = config_width * gate_width * units + num_configs * config_width * units
        assert folding_pays(num_configs, config_width, units) == (folded < unfolded)
