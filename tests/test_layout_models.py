"""Layout batching and models: hand-computed batches, sampling, per-config invariance, configs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from baselines.core.keras_fit import EpochBatches
from baselines.layout.batching import (
    BATCH_SIGNATURE,
    SEGMENT_KEY,
    assemble_batch,
    batch_source,
    prepare_graphs,
    segment_mask,
    segment_source,
    to_model_inputs,
    to_tensors,
)
from baselines.layout.codebook import Codebook
from baselines.layout.data import load_layout_split
from baselines.layout.graph import LayoutGraph
from baselines.layout.models import ConfigAttention, LayoutSAGE, ResModel
from baselines.layout.scoring import SCORE_CHUNK, SCORE_SLOT_BUDGET, GraphScorer

MODEL_CLASSES = (ResModel, LayoutSAGE)
TOY = Path(__file__).resolve().parents[1] / "data" / "layout_toy" / "xla" / "default"


def feat_rows(rows: dict[int, dict[int, float]], n: int) -> np.ndarray:
    feat = np.zeros((n, 140), np.float32)
    for node, cols in rows.items():
        for col, value in cols.items():
            feat[node, col] = value
    return feat


def hand_graphs() -> list[LayoutGraph]:
    """Two small graphs: g0 (3 nodes, node 1 configurable), g1 (4 nodes, nodes 1 and 3)."""
    g0 = LayoutGraph(
        graph_id="g0",
        # node 0: shape (8, 128), layout (1, 0); node 2: is_root, a -2 in column 5.
        node_feat=feat_rows({0: {21: 8, 22: 128, 134: 1, 135: 0}, 2: {0: 1, 5: -2}}, 3),
        node_opcode=np.array([7, 26, 9], np.int32),
        edge_index=np.array([[1, 0], [2, 1]], np.int32),
        node_config_ids=np.array([1], np.int32),
        configs=Codebook.from_values(
            np.stack(
                [np.full((1, 18), -1, np.int8), np.arange(-1, 17).reshape(1, 18) % 7 - 1]
            ).astype(np.int8)
        ),
        config_runtime=np.array([300, 200], np.int64),
        node_splits=np.array([0, 3], np.int64),
    )
    values1 = np.arange(3 * 2 * 18).reshape(3, 2, 18) % 7 - 1
    g1 = LayoutGraph(
        graph_id="g1",
        # node 2: shape (4, 2, 3), layout (2, 0, 1); node 3 is the 3-operand consumer.
        node_feat=feat_rows({2: {21: 4, 22: 2, 23: 3, 134: 2, 135: 0, 136: 1}}, 4),
        node_opcode=np.array([1, 34, 3, 75], np.int32),
        edge_index=np.array([[1, 0], [3, 2], [2, 0], [3, 1], [3, 0]], np.int32),
        node_config_ids=np.array([3, 1], np.int32),
        configs=Codebook.from_values(values1.astype(np.int8)),
        config_runtime=np.array([50, 40, 80], np.int64),
        node_splits=np.array([0, 4], np.int64),
    )
    return [g0, g1]


def test_hand_made_batch_equals_hand_computed_arrays():
    g0, g1 = hand_graphs()
    prepared = prepare_graphs([g0, g1])
    # g1 first with configs 2 and 0; g0 with config 1 only: one padding slot.
    batch = assemble_batch(prepared, [1, 0], [np.array([2, 0]), np.array([1])], 2)
    assert set(batch) == set(BATCH_SIGNATURE)
    np.testing.assert_array_equal(batch["node_sizes"], [4, 3])
    np.testing.assert_array_equal(batch["edge_sizes"], [5, 2])
    np.testing.assert_array_equal(batch["cfg_sizes"], [2, 1])
    np.testing.assert_array_equal(batch["cfg_edge_sizes"], [1, 0])
    np.testing.assert_array_equal(batch["node_opcode"], [1, 34, 3, 75, 7, 26, 9])
    np.testing.assert_array_equal(batch["edge_source"], [1, 3, 2, 3, 3, 5, 6])
    np.testing.assert_array_equal(batch["edge_target"], [0, 2, 0, 1, 0, 4, 5])
    np.testing.assert_array_equal(batch["cfg_node"], [3, 1, 5])
    # g1's edge [3, 1] joins configurable node 0 (node 3) to configurable node 1 (node 1).
    np.testing.assert_array_equal(batch["cfg_source"], [0])
    np.testing.assert_array_equal(batch["cfg_target"], [1])

    feats = batch["node_feats"]
    assert feats.shape == (7, 140) and feats.dtype == np.float32
    # Row 4 is g0's node 0: log1p of its dims; minor_to_major (1, 0) then -1 padding.
    np.testing.assert_allclose(feats[4, 21:23], [np.log(9), np.log(129)], rtol=1e-6)
    np.testing.assert_array_equal(feats[4, 134:140], [1, 0, -1, -1, -1, -1])
    # Row 6 is g0's node 2: sign * log1p, and no shape: all six layout columns -1.
    np.testing.assert_allclose(feats[6, [0, 5]], [np.log(2), -np.log(3)], rtol=1e-6)
    np.testing.assert_array_equal(feats[6, 134:140], [-1] * 6)
    # Row 2 is g1's node 2: layout (2, 0, 1) kept, the rest -1.
    np.testing.assert_array_equal(feats[2, 134:140], [2, 0, 1, -1, -1, -1])
    np.testing.assert_array_equal(feats[0, 134:140], [-1] * 6)  # rank 0

    rows, codes = batch["config_rows"], batch["config_codes"]
    assert rows.dtype == np.int8 and codes.shape == (3, 2) and rows.shape[:1] == (3,)
    values = np.take_along_axis(rows, codes[:, :, None], axis=1)
    assert values.shape == (3, 2, 18)
    expected = np.empty((3, 2, 18), np.int8)
    expected[0] = g1.node_config_feat[[2, 0], 0]  # node 3 under configs 2 and 0
    expected[1] = g1.node_config_feat[[2, 0], 1]  # node 1
    expected[2, 0] = g0.node_config_feat[1, 0]
    expected[2, 1] = -1  # padding slot
    np.testing.assert_array_equal(values, expected)

    np.testing.assert_allclose(batch["config_runtimes"], [80 / 40, 50 / 40, 200 / 200, -1])
    np.testing.assert_array_equal(batch["config_mask"], [1, 1, 1, 0])
    np.testing.assert_array_equal(batch["config_index"], [2, 0, 1, -1])
    assert batch["graph_id"].tolist() == [b"g1", b"g0"]

    # Reference layouts: node 3 reads node 2 (operand 0) then node 1 (operand 1);
    # node 1 reads node 0 only; g0's node 1 reads g0's node 0.
    ref = batch["cfg_ref"]
    np.testing.assert_array_equal(ref[0], [-1] * 6 + [2, 0, 1, -1, -1, -1] + [-1] * 6)
    np.testing.assert_array_equal(ref[1], [-1] * 18)
    np.testing.assert_array_equal(ref[2], [-1] * 6 + [1, 0, -1, -1, -1, -1] + [-1] * 6)
    np.testing.assert_allclose(batch["cfg_dims"][0, 6:9], np.log1p([4, 2, 3]), rtol=1e-6)
    np.testing.assert_allclose(batch["cfg_dims"][2, 6:8], np.log1p([8, 128]), rtol=1e-6)
    np.testing.assert_array_equal(batch["cfg_dims"][1], np.zeros(18))
    # Configurable operands: node 3's operand 1 is node 1 (configurable id 1 of the
    # batch); every other operand is not configurable or missing.
    np.testing.assert_array_equal(batch["cfg_operand"], [[-1, 1], [-1, -1], [-1, -1]])
    # With g0 first, g1's ids move up by g0's one configurable node.
    swapped = assemble_batch(prepared, [0, 1], [np.array([1]), np.array([2, 0])], 2)
    np.testing.assert_array_equal(swapped["cfg_operand"], [[-1, -1], [-1, 2], [-1, -1]])


def many_config_graph(c: int, graph_id: str) -> LayoutGraph:
    rng = np.random.default_rng(len(graph_id) + c)
    return LayoutGraph(
        graph_id=graph_id,
        node_feat=np.zeros((2, 140), np.float32),
        node_opcode=np.array([1, 26], np.int32),
        edge_index=np.array([[1, 0]], np.int32),
        node_config_ids=np.array([1], np.int32),
        configs=Codebook.from_values(rng.integers(-1, 6, size=(c, 1, 18)).astype(np.int8)),
        config_runtime=rng.integers(100, 200, size=c).astype(np.int64),
        node_splits=np.array([0, 2], np.int64),
    )


def test_config_sample_is_deterministic_by_seed_differs_by_epoch_and_pads():
    graphs = [many_config_graph(60, "big"), many_config_graph(2, "small")]
    source = batch_source(prepare_graphs(graphs))
    np.testing.assert_array_equal(source.num_configs, [60, 2])

    def epoch(seed, e):
        batches = list(EpochBatches(source, batch=2, num_configs=4, seed=seed).batches(e))
        assert len(batches) == 1
        return batches[0]

    a, b = epoch(0, 0), epoch(0, 0)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    big = {0: 0, 1: 0}
    for e in (0, 1):
        batch = epoch(0, e)
        row = batch["graph_id"].tolist().index(b"big")
        big[e] = batch["config_index"].reshape(2, 4)[row]
        small = batch["config_index"].reshape(2, 4)[1 - row]
        np.testing.assert_array_equal(small, [0, 1, -1, -1])  # padded, never dropped
        mask = batch["config_mask"].reshape(2, 4)[1 - row]
        np.testing.assert_array_equal(mask, [1, 1, 0, 0])
        runtimes = batch["config_runtimes"].reshape(2, 4)[1 - row]
        assert np.all(runtimes[2:] == -1) and np.all(runtimes[:2] >= 1)
        assert len(set(big[e].tolist())) == 4 and big[e].min() >= 0
    assert not np.array_equal(big[0], big[1])  # a new sample each epoch
    other_seed = epoch(1, 0)
    row = other_seed["graph_id"].tolist().index(b"big")
    assert not np.array_equal(other_seed["config_index"].reshape(2, 4)[row], big[0])


@pytest.fixture(scope="module")
def toy_graphs(layout_toy_train):
    return prepare_graphs(layout_toy_train[:2])


@pytest.fixture(scope="module")
def layout_toy_train():
    return load_layout_split(TOY / "train", log=None)


def score(model, graphs, ids, slots):
    k = max(len(s) for s in slots)
    return model(to_tensors(assemble_batch(graphs, ids, slots, k))).numpy()


@pytest.mark.parametrize("cls", MODEL_CLASSES)
def test_config_score_does_not_depend_on_batch_companions(cls, toy_graphs):
    """Scores for config j: alone (K=1), among 8, among others, with another graph beside.

    Neither model mixes configurations, so only float32 rounding may differ: the
    same products are summed over the same nodes, but matmul and segment-sum
    kernels may block a [N, K * d] operand differently for another K, changing
    the summation order. Relative error per op is ~1e-7 and the scores are sums
    of at most a few thousand terms, so 1e-5 relative (1e-4 absolute) is wide
    enough; a config leaking into another's score moves it by far more.
    """
    tf.keras.utils.set_random_seed(3)
    model = cls(8).create_variables()
    eight = score(model, toy_graphs, [0], [np.arange(8)])[0]
    assert np.ptp(eight) > 1e-3  # configs do get different scores
    for j in range(8):
        alone = score(model, toy_graphs, [0], [np.array([j])])[0, 0]
        np.testing.assert_allclose(alone, eight[j], rtol=1e-5, atol=1e-4)
    others = score(model, toy_graphs, [0], [np.array([3, 40, 41, 42])])[0]
    np.testing.assert_allclose(others[0], eight[3], rtol=1e-5, atol=1e-4)
    pair = score(model, toy_graphs, [1, 0], [np.arange(20, 28), np.arange(8)])
    np.testing.assert_allclose(pair[1], eight, rtol=1e-5, atol=1e-4)
    # Padding slots do not change the real slots' scores either.
    padded = score(model, toy_graphs, [1, 0], [np.arange(20, 28), np.arange(3)])
    np.testing.assert_allclose(padded[1, :3], eight[:3], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (ResModel, {"hidden_dim": 16, "num_gnns": 1, "reduction": "sum+mean", "directed": True}),
        (ResModel, {"final_mlp_layers": 1, "mlp_layers": 1}),
        (LayoutSAGE, {"hidden_dim": 16, "config_layers": 2, "reduction": "sum+mean+max"}),
        (LayoutSAGE, {"num_gnns": 1, "directed": False, "config_embed_dim": 3}),
        (LayoutSAGE, {"hidden_dim": 16, "config_attention_heads": 2}),
        (LayoutSAGE, {"hidden_dim": 16, "tile_padding": True, "relayout_copies": True}),
        (LayoutSAGE, {"hidden_dim": 16, "graph_state_in_head": False}),
        (LayoutSAGE, {"hidden_dim": 16, "relative_to_reference": True, "tile_padding": True}),
        (LayoutSAGE, {"hidden_dim": 16, "config_frequency": True}),
    ],
)
def test_get_config_round_trip_scores_identically(cls, kwargs, toy_graphs):
    tf.keras.utils.set_random_seed(5)
    model = cls(8, **kwargs).create_variables()
    config = json.loads(json.dumps(model.get_config()))  # what a run file would hold
    for key, value in kwargs.items():
        assert config[key] == value
    assert config["num_configs"] == 8
    tf.keras.utils.set_random_seed(6)  # other initial weights: the copy must matter
    rebuilt = cls.from_config(config).create_variables()
    assert rebuilt.get_config() == config
    before = score(rebuilt, toy_graphs, [0, 1], [np.arange(6), np.arange(6)])
    rebuilt.set_weights(model.get_weights())
    expected = score(model, toy_graphs, [0, 1], [np.arange(6), np.arange(6)])
    got = score(rebuilt, toy_graphs, [0, 1], [np.arange(6), np.arange(6)])
    assert not np.allclose(before, expected)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("cls", MODEL_CLASSES)
@pytest.mark.parametrize(
    "kwargs", [{"hidden_dim": 0}, {"num_gnns": True}, {"reduction": 3}, {"directed": "yes"}]
)
def test_bad_kwargs_are_refused(cls, kwargs):
    with pytest.raises(ValueError):
        cls(8, **kwargs)


def test_graph_without_configurable_nodes_scores_finite(toy_graphs):
    graph = many_config_graph(3, "none")
    bare = LayoutGraph(
        graph_id="bare",
        node_feat=graph.node_feat,
        node_opcode=graph.node_opcode,
        edge_index=graph.edge_index,
        node_config_ids=np.zeros(0, np.int32),
        configs=Codebook.from_values(np.zeros((3, 0, 18), np.int8)),
        config_runtime=graph.config_runtime,
        node_splits=graph.node_splits,
    )
    prepared = [*toy_graphs, *prepare_graphs([bare])]
    for cls in MODEL_CLASSES:
        model = cls(3).create_variables()
        scores = score(model, prepared, [2, 0], [np.arange(3), np.arange(3)])
        assert scores.shape == (2, 3) and np.all(np.isfinite(scores))
        assert np.ptp(scores[0]) == 0  # nothing to configure: one score for all


def test_segment_mask_is_one_run_of_keep_nodes_per_graph_with_every_start_drawn():
    sizes = np.array([6, 2, 4])
    starts = set()
    for seed in range(60):
        mask = segment_mask(sizes, 3, np.random.default_rng(seed))
        assert mask.dtype == bool and mask.shape == (12,)
        first, second, third = mask[:6], mask[6:8], mask[8:]
        kept = np.flatnonzero(first)
        assert kept.size == 3 and kept[-1] - kept[0] == 2  # one contiguous run of 3
        starts.add(int(kept[0]))
        assert second.all()  # 2 nodes <= 3: the whole graph
        assert third.sum() == 3 and (third[:3].all() or third[1:].all())
    assert starts == {0, 1, 2, 3}  # every start 0..6-3 occurs
    np.testing.assert_array_equal(
        segment_mask(sizes, 3, np.random.default_rng(5)),
        segment_mask(sizes, 3, np.random.default_rng(5)),
    )


def test_segment_source_adds_a_seeded_segment_to_each_batch(toy_graphs):
    slots = [np.arange(4), np.arange(4)]
    batch = segment_source(toy_graphs, 50, seed=0).assemble([0, 1], slots, 4)
    again = segment_source(toy_graphs, 50, seed=0).assemble([0, 1], slots, 4)
    other = segment_source(toy_graphs, 50, seed=1).assemble([0, 1], slots, 4)
    sizes = batch["node_sizes"]
    segment = batch[SEGMENT_KEY]
    assert segment.shape == (sizes.sum(),)
    assert segment[: sizes[0]].sum() == 50 and segment[sizes[0] :].sum() == 50
    np.testing.assert_array_equal(segment, again[SEGMENT_KEY])
    assert not np.array_equal(segment, other[SEGMENT_KEY])
    plain = assemble_batch(toy_graphs, [0, 1], slots, 4)
    for key, value in plain.items():
        np.testing.assert_array_equal(batch[key], value)


def node_feat_and_weight_gradients(model, batch):
    tensors = to_tensors(batch)
    with tf.GradientTape() as tape:
        tape.watch(tensors["node_feats"])
        scores = model(tensors, training=True)
        runtimes = tf.reshape(tensors["config_runtimes"], tf.shape(scores))
        loss = tf.reduce_sum(scores * runtimes)
    grads = tape.gradient(loss, [tensors["node_feats"], *model.trainable_variables])
    return [tf.convert_to_tensor(g).numpy() for g in grads]


@pytest.mark.parametrize("cls", MODEL_CLASSES)
def test_segment_training_stops_the_gradient_outside_the_segment_only(cls, toy_graphs):
    """The node states are per node below the cut, so d loss / d feats[v] is the full
    gradient's row for a node v inside the segment and exactly 0 outside it."""
    tf.keras.utils.set_random_seed(4)
    model = cls(4).create_variables()
    batch = assemble_batch(toy_graphs, [0, 1], [np.arange(4), np.arange(4)], 4)
    full = node_feat_and_weight_gradients(model, batch)
    n = int(batch["node_sizes"].sum())
    whole = node_feat_and_weight_gradients(model, {**batch, SEGMENT_KEY: np.ones(n, bool)})
    for got, expected in zip(whole, full):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)
    # A segment of 40 nodes in each graph.
    inside = np.zeros(n, bool)
    first = int(batch["node_sizes"][0])
    inside[10:50] = inside[first + 30 : first + 70] = True
    seg = node_feat_and_weight_gradients(model, {**batch, SEGMENT_KEY: inside})
    assert np.abs(full[0][~inside]).max() > 0  # the full gradient reaches those nodes
    np.testing.assert_array_equal(seg[0][~inside], 0.0)
    np.testing.assert_allclose(seg[0][inside], full[0][inside], rtol=1e-4, atol=1e-6)
    assert any(not np.allclose(a, b) for a, b in zip(seg[1:], full[1:]))
    # Outside training the segment changes nothing.
    scored = model(to_tensors({**batch, SEGMENT_KEY: inside})).numpy()
    np.testing.assert_array_equal(scored, model(to_tensors(batch)).numpy())


def test_config_attention_equals_a_numpy_softmax_over_the_graphs_real_configs():
    """x + MHA(LN(x)) recomputed from the layer's weights, padding keys left out."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4, 6)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], np.float32)
    layer = ConfigAttention(heads=2, key_dim=3)
    got = layer(tf.constant(x), tf.constant(mask)).numpy()
    ln = layer.norm
    mha = layer.attention
    gamma, beta = ln.gamma.numpy(), ln.beta.numpy()
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    normed = (x - mean) / np.sqrt(var + ln.epsilon) * gamma + beta
    wq, bq = mha._query_dense.kernel.numpy(), mha._query_dense.bias.numpy()
    wk, bk = mha._key_dense.kernel.numpy(), mha._key_dense.bias.numpy()
    wv, bv = mha._value_dense.kernel.numpy(), mha._value_dense.bias.numpy()
    wo, bo = mha._output_dense.kernel.numpy(), mha._output_dense.bias.numpy()
    expected = np.empty_like(x)
    for g in range(2):
        real = mask[g] > 0
        out = np.zeros((4, 6))
        for h in range(2):
            q = normed[g] @ wq[:, h] + bq[h]  # [4, 3]
            k = normed[g] @ wk[:, h] + bk[h]
            v = normed[g] @ wv[:, h] + bv[h]
            logits = q @ k.T / np.sqrt(3.0)
            logits[:, ~real] = -np.inf
            weights = np.exp(logits - logits.max(1, keepdims=True))
            weights /= weights.sum(1, keepdims=True)
            out += (weights @ v) @ wo[h]
        expected[g] = x[g] + out + bo
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_attending_model_scores_a_graph_the_same_however_it_is_chunked(toy_graphs):
    """Attention mixes a graph's configurations (so companions matter inside one
    call), never two graphs' or padding; GraphScorer scores it in one call."""
    tf.keras.utils.set_random_seed(7)
    model = LayoutSAGE(8, hidden_dim=16, config_attention_heads=2).create_variables()
    assert model.attends_across_configs and not LayoutSAGE(8).attends_across_configs
    eight = score(model, toy_graphs, [0], [np.arange(8)])[0]
    others = score(model, toy_graphs, [0], [np.array([0, 40, 41, 42])])[0]
    assert abs(others[0] - eight[0]) > 1e-5  # the context is other configurations
    beside = score(model, toy_graphs, [1, 0], [np.arange(20, 28), np.arange(8)])[1]
    np.testing.assert_allclose(beside, eight, rtol=1e-5, atol=1e-5)
    padded = score(model, toy_graphs, [1, 0], [np.arange(20, 28), np.arange(3)])[1, :3]
    alone = score(model, toy_graphs, [0], [np.arange(3)])[0]
    np.testing.assert_allclose(padded, alone, rtol=1e-5, atol=1e-5)
    graph = toy_graphs[0]
    whole = score(model, toy_graphs, [0], [np.arange(graph.num_configs)])[0]
    for chunk in (5, 256):
        np.testing.assert_allclose(
            GraphScorer(model, chunk=chunk).score(graph), whole, rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (LayoutSAGE, {}),
        (LayoutSAGE, {"config_layers": 2, "reduction": "sum+mean+max"}),
        (LayoutSAGE, {"tile_padding": True, "relayout_copies": True}),
        (ResModel, {}),
    ],
)
def test_once_per_graph_scores_equal_one_configuration_per_call(cls, kwargs, toy_graphs):
    """Every configuration of two graphs scored in ONE batch (the config-independent
    node states computed once per graph, broadcast over all K slots) equals the same
    configuration scored alone (a batch of one graph and one slot per call).

    Tolerance: both paths evaluate the same float32 expression; only the order of
    summation inside matmul and segment-sum kernels may differ with K. The longest
    accumulation is a matmul over the 18 * (8 + 1) = 162 embedded layout values (the
    pooling sums at most 16 configurable nodes, the hidden width is 16): one op is
    off by at most L * eps = 162 * 1.2e-7 = 2e-5 of its operands' magnitude, and
    rounding errors of two orders do not all align, so in practice about
    sqrt(L) * eps = 1.5e-6 per op, a few times that over the few chained layers.
    2e-5 of the largest score (one op's worst case) is the bound.
    A slot that read another configuration's values, another graph's states or its
    neighbours' pooling moves a score by a sizeable part of the scores' spread,
    which the test requires to be far above the bound.
    """
    tf.keras.utils.set_random_seed(11)
    model = cls(8, hidden_dim=16, **kwargs).create_variables()
    counts = [g.num_configs for g in toy_graphs]
    batch = assemble_batch(toy_graphs, [0, 1], [np.arange(c) for c in counts], max(counts))
    together = GraphScorer(model).score_batch(batch)  # [2, K]
    one_at_a_time = GraphScorer(model, chunk=1)
    for row, (graph, count) in enumerate(zip(toy_graphs, counts, strict=True)):
        alone = one_at_a_time.score(graph)  # one assemble and forward per configuration
        assert alone.shape == (count,)
        bound = 2e-5 * float(np.max(np.abs(alone)))
        assert np.ptp(alone) > 50 * bound  # the configurations are told apart
        np.testing.assert_allclose(together[row, :count], alone, rtol=0, atol=bound)


@pytest.mark.parametrize("cls", MODEL_CLASSES)
def test_graph_scorer_never_assembles_more_than_score_chunk_slots(cls, monkeypatch):
    """A model that does not attend across configurations is scored in chunks of at
    most SCORE_CHUNK slots, whatever the graph's count, and every configuration
    exactly once, in order; an attending one in one call of all of them."""
    count = 2 * SCORE_CHUNK + 37
    (graph,) = prepare_graphs([many_config_graph(count, "big")])
    assembled: list[tuple[int, int, list[int]]] = []
    real = GraphScorer._call

    def spy(self, tensors, part):
        index = tensors["config_index"].numpy().tolist()
        k = tensors["config_mask"].shape[0]
        assembled.append((k, tensors["config_codes"].shape[1], index))
        return real(self, tensors, part)

    monkeypatch.setattr(GraphScorer, "_call", spy)
    tf.keras.utils.set_random_seed(5)
    model = cls(8, hidden_dim=8).create_variables()
    assert not model.attends_across_configs
    scores = GraphScorer(model).score(graph)
    assert scores.shape == (count,) and np.all(np.isfinite(scores))
    assert max(slots for _, slots, _ in assembled) <= SCORE_CHUNK
    assert max(k for k, _, _ in assembled) <= SCORE_CHUNK
    assert len(assembled) == -(-count // SCORE_CHUNK)  # 3 calls
    assert [i for _, _, index in assembled for i in index] == list(range(count))

    assembled.clear()
    attending = LayoutSAGE(8, hidden_dim=8, config_attention_heads=2).create_variables()
    GraphScorer(attending).score(graph)
    assert [(k, slots) for k, slots, _ in assembled] == [(count, count)]


def wide_graph(nodes: int, configurable: int, configs: int) -> LayoutGraph:
    """A chain of `nodes` ops, `configurable` of them spread along it, random features
    and layouts: many nodes per configuration, as the release's whole graphs."""
    rng = np.random.default_rng(nodes + configs)
    return LayoutGraph(
        graph_id=f"wide_{nodes}",
        node_feat=rng.integers(0, 4, size=(nodes, 140)).astype(np.float32),
        node_opcode=rng.integers(0, 100, size=nodes).astype(np.int32),
        edge_index=np.stack([np.arange(1, nodes), np.arange(nodes - 1)], 1).astype(np.int32),
        node_config_ids=np.linspace(0, nodes - 1, configurable).astype(np.int32),
        configs=Codebook.from_values(
            rng.integers(-1, 6, size=(configs, configurable, 18)).astype(np.int8)
        ),
        config_runtime=rng.integers(100, 200, size=configs).astype(np.int64),
        node_splits=np.array([0, nodes], np.int64),
    )


# (model, slot budget, expected configurations per call) for a graph of 300 nodes, 12 of
# them configurable: ResModel holds states of every node per configuration, LayoutSAGE
# of the configurable ones only (its op states are per graph).
WIDE_NODES, WIDE_CONFIGURABLE, WIDE_CONFIGS = 300, 12, 37


@pytest.mark.parametrize(
    "cls, budget, per_call",
    [
        (ResModel, 1000, 3),  # 1000 // 300 node slots
        (ResModel, 299, 1),  # fewer slots than nodes: still one configuration a call
        (ResModel, SCORE_SLOT_BUDGET, 37),  # 2**18 // 300 = 873 > 37: all in one call
        (LayoutSAGE, 1000, 37),  # 1000 // 12 = 83 > 37 configurable-node slots
        (LayoutSAGE, 60, 5),  # 60 // 12
    ],
)
def test_graph_scorer_sizes_chunks_to_the_graph_within_the_slot_budget(
    cls, budget, per_call, monkeypatch
):
    """A graph's chunks hold at most `slot_budget` node-configuration slots (nodes as the
    model holds them per configuration), and never fewer than one configuration; every
    configuration once, in order. Catches a chunk that ignores the node count (the
    ResModel cases assemble 37 slots of 300 nodes per call), that can fall to 0 (range()
    refuses a step of 0) or that counts every node for LayoutSAGE (chunks of 3, not 37)."""
    (graph,) = prepare_graphs([wide_graph(WIDE_NODES, WIDE_CONFIGURABLE, WIDE_CONFIGS)])
    assembled: list[dict[str, np.ndarray]] = []
    real = GraphScorer._call

    def spy(self, tensors, part):
        assembled.append({key: value.numpy() for key, value in tensors.items()})
        return real(self, tensors, part)

    monkeypatch.setattr(GraphScorer, "_call", spy)
    tf.keras.utils.set_random_seed(5)
    model = cls(8, hidden_dim=8).create_variables()
    # Every node per call: the reach path's chunks (ResModel) are tests/test_layout_reach.py's.
    scores = GraphScorer(model, slot_budget=budget, reach=False).score(graph)
    assert scores.shape == (WIDE_CONFIGS,) and np.all(np.isfinite(scores))
    held = "node_sizes" if cls is ResModel else "cfg_sizes"
    configs = [b["config_codes"].shape[1] for b in assembled]
    slots = [int(b[held].sum()) * k for b, k in zip(assembled, configs, strict=True)]
    assert configs == [per_call] * (WIDE_CONFIGS // per_call) + (
        [WIDE_CONFIGS % per_call] if WIDE_CONFIGS % per_call else []
    )
    assert per_call == 1 or max(slots) <= budget
    index = [i for b in assembled for i in b["config_index"].tolist()]
    assert index == list(range(WIDE_CONFIGS))


@pytest.mark.parametrize("cls", MODEL_CLASSES)
def test_graph_scorer_scores_do_not_depend_on_the_slot_budget(cls):
    """Scores of a 300-node graph's 37 configurations are the same whether they are
    scored in one call (the default budget), 3 to a call with a last call of one
    (budget 1000 for ResModel), or one per call (a budget below the node count).

    Tolerance as in test_once_per_graph_scores_equal_one_configuration_per_call: each
    configuration goes through the same float32 ops on the same values in every chunk;
    only the summation order inside matmul kernels (picked by the call's row count: a
    chunk of one configuration makes the head a [1, d] x [d, 1] dot) may differ. The
    longest such sum is over the 162 embedded layout values (LayoutSAGE; ResModel's
    widest is the hidden width 16), off by at most 162 * 1.2e-7 = 2e-5 of its
    operands' magnitude: 2e-5 of the largest score bounds it. A slot scored with
    another configuration's values or in the wrong place moves a score by a sizeable
    part of the spread, which is required to be far above the bound: a chunk's slots
    read in reverse (`np.arange(start, ...)[::-1]` in `GraphScorer.score`) fail.
    """
    (graph,) = prepare_graphs([wide_graph(WIDE_NODES, WIDE_CONFIGURABLE, WIDE_CONFIGS)])
    tf.keras.utils.set_random_seed(13)
    model = cls(8, hidden_dim=16).create_variables()
    whole = GraphScorer(model).score(graph)
    bound = 2e-5 * float(np.max(np.abs(whole)))
    assert np.ptp(whole) > 50 * bound  # the configurations are told apart
    for budget in (1000, 60, 1):
        chunked = GraphScorer(model, slot_budget=budget).score(graph)
        np.testing.assert_allclose(chunked, whole, rtol=0, atol=bound)


class ForwardOnlyResModel(ResModel):
    """A model written as most are: `forward` only, no split into graph and config parts."""

    def forward(self, inputs: dict, num_configs=None, training=None) -> tf.Tensor:
        return self.config_part(inputs, self.op_encoder(inputs["graph"]), training)


@pytest.mark.parametrize(
    "cls, budget, calls",
    [(ResModel, 1000, 13), (LayoutSAGE, 60, 8), (ForwardOnlyResModel, 1000, 13)],
)
def test_graph_part_is_computed_once_per_graph_and_chunks_score_as_one_forward(
    cls, budget, calls, monkeypatch
):
    """A model split in two (`graph_part`, `config_part`) has its graph part computed
    once per graph however many calls its configurations take, and every chunk scores
    as one `forward` over all 37 configurations does; a model with only `forward` is
    scored through it, in the same chunks, with the same scores.

    The reference is the model called once on a batch of all 37 configurations,
    assembled by `assemble_batch`, not by the scorer. Tolerance as in
    test_graph_scorer_scores_do_not_depend_on_the_slot_budget (same float32 ops on the
    same values, only matmul summation order may differ with a call's row count).
    Catches a graph part recomputed per chunk, a chunk scored with the first chunk's
    configurations (fields not replaced), and a forward-only model scored through
    `config_part` (`splits_graph_part` ignoring an overridden `forward`).
    """
    (graph,) = prepare_graphs([wide_graph(WIDE_NODES, WIDE_CONFIGURABLE, WIDE_CONFIGS)])
    tf.keras.utils.set_random_seed(17)
    model = cls(8, hidden_dim=16).create_variables()
    assert model.splits_graph_part == (cls is not ForwardOnlyResModel)
    batch = assemble_batch([graph], [0], [np.arange(WIDE_CONFIGS)], WIDE_CONFIGS)
    reference = model(to_tensors(batch)).numpy()[0]
    bound = 2e-5 * float(np.max(np.abs(reference)))
    assert np.ptp(reference) > 50 * bound

    scorer = GraphScorer(model, slot_budget=budget, reach=False)  # the reach path: no graph part
    graph_parts, scored = [], []
    real_part, real_call = scorer._graph_part, GraphScorer._call
    scorer._graph_part = lambda tensors: graph_parts.append(1) or real_part(tensors)

    def spy(self, tensors, part):
        scored.append(part is not None)
        return real_call(self, tensors, part)

    monkeypatch.setattr(GraphScorer, "_call", spy)
    for _ in range(2):  # the same graph twice: once per scoring, never per chunk
        np.testing.assert_allclose(scorer.score(graph), reference, rtol=0, atol=bound)
    assert len(scored) == 2 * calls
    assert len(graph_parts) == (2 if model.splits_graph_part else 0)
    assert all(scored) == model.splits_graph_part and any(scored) == model.splits_graph_part


def test_without_the_graph_state_the_head_reads_the_configuration_state_only(toy_graphs):
    joined = LayoutSAGE(8, hidden_dim=16, reduction="sum+mean").create_variables()
    alone = LayoutSAGE(
        8, hidden_dim=16, reduction="sum+mean", graph_state_in_head=False
    ).create_variables()
    rows = [m.head.hidden[0].kernel.shape[0] for m in (joined, alone)]
    assert rows == [2 * 16 * 2, 16 * 2]  # [graph ; config] states, each 16 wide x 2 poolings
    assert [w.shape for w in joined.weights if w is not joined.head.hidden[0].kernel] == [
        w.shape for w in alone.weights if w is not alone.head.hidden[0].kernel
    ]
    with pytest.raises(ValueError, match="graph_state_in_head"):
        LayoutSAGE(8, graph_state_in_head=0)


def test_relative_to_reference_scores_the_reference_layouts_as_an_empty_change(toy_graphs):
    """A configuration that keeps every reference layout pools to a zero state.

    Its score must be the head's on [graph state ; 0], computed here directly;
    the same weights without the subtraction score it otherwise, and the other
    configurations still get scores of their own. The zero comes from
    subtracting two states computed from identical rows, so only float32
    rounding of differently blocked matmul rows may remain: 1e-5 of the score.
    """
    kwargs = {"hidden_dim": 16, "reduction": "sum+mean+max", "config_layers": 1}
    tf.keras.utils.set_random_seed(9)
    relative = LayoutSAGE(8, relative_to_reference=True, **kwargs).create_variables()
    plain = LayoutSAGE(8, **kwargs).create_variables()
    plain.set_weights(relative.get_weights())  # same variables: the flag adds none
    batch = assemble_batch(toy_graphs, [0], [np.arange(6)], 6)
    # Slot 2 keeps the reference layouts: one more row per node, which slot 2 uses.
    width = batch["config_rows"].shape[1]
    batch["config_rows"] = np.concatenate([batch["config_rows"], batch["cfg_ref"][:, None]], 1)
    batch["config_codes"][:, 2] = width
    tensors = to_tensors(batch)
    scores = relative(tensors).numpy()[0]
    inputs = to_model_inputs(tensors)
    graph_state = relative.graph_part(inputs)["graph_state"]
    empty = tf.zeros([1, 1, 16 * 3])
    expected = float(relative.head.score_joined(graph_state, empty).numpy()[0, 0])
    np.testing.assert_allclose(scores[2], expected, rtol=1e-5, atol=1e-5 * abs(expected))
    assert abs(plain(tensors).numpy()[0, 2] - expected) > 1e-3
    assert np.ptp(np.delete(scores, 2)) > 1e-3
    with pytest.raises(ValueError, match="relative_to_reference"):
        LayoutSAGE(8, relative_to_reference=1)


def test_a_layout_model_is_found_by_class_name_and_rebuilt_from_its_config():
    """The layout lookup is the tiles' one: the base is not a model, a misspelt name or
    kwarg gets a suggestion, and `get_config` (with num_configs) rebuilds the class."""
    from baselines.core.errors import PipelineError
    from baselines.layout.run_data import build_model

    with pytest.raises(PipelineError, match="LayoutModel is a base class, not a model"):
        build_model("LayoutModel", {})
    with pytest.raises(PipelineError, match="unknown model 'LayoutSAG'; did you mean LayoutSAGE"):
        build_model("LayoutSAG", {})
    with pytest.raises(PipelineError, match=r"does not take num_gnn \(did you mean num_gnns\?\)"):
        build_model("ResModel", {"num_gnn": 2})
    model = build_model("LayoutSAGE", {"hidden_dim": 16, "config_layers": 2})
    again = build_model("LayoutSAGE", model.get_config())
    assert type(again) is LayoutSAGE and again.get_config() == model.get_config()
    assert again.get_config()["config_layers"] == 2


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"tile_padding": True}, {"relative_to_reference": True}, {"relayout_copies": True}],
    ids=["plain", "tile_padding", "relative", "relayout_copies"],
)
def test_states_computed_once_per_distinct_row_score_as_once_per_slot(toy_graphs, kwargs):
    """LayoutSAGE computes a node's state per distinct layout row and gathers it per slot.
    The same batch with every slot given its own row (R = K, codes 0..K-1) must score the
    same, to float32 rounding of differently shaped matmuls (1e-5), and the batch must
    hold fewer rows than slots: the toy nodes repeat their rows."""
    tf.keras.utils.set_random_seed(3)
    model = LayoutSAGE(8, hidden_dim=16, **kwargs).create_variables()
    k = 24
    batch = assemble_batch(toy_graphs, [0, 1], [np.arange(k), np.arange(k)], k)
    rows, codes = batch["config_rows"], batch["config_codes"]
    assert rows.shape[1] < k
    expanded = dict(batch)
    expanded["config_rows"] = np.take_along_axis(rows, codes[:, :, None], axis=1)
    expanded["config_codes"] = np.tile(np.arange(k, dtype=np.int32), (codes.shape[0], 1))
    shared = model(to_tensors(batch)).numpy()
    one_each = model(to_tensors(expanded)).numpy()
    np.testing.assert_allclose(shared, one_each, rtol=1e-5, atol=1e-5)


def test_config_frequency_is_the_log_count_and_moves_only_its_own_configurations_score():
    """The batch carries log(count in the file) per slot (0 for padding), counted by hand
    here; a model with `config_frequency` reads slot k's count for slot k's score only, and
    one without it ignores the field."""
    row_a, row_b = np.full((1, 18), -1, np.int8), np.full((1, 18), 0, np.int8)
    graph = LayoutGraph(
        graph_id="g",
        node_feat=np.zeros((2, 140), np.float32),
        node_opcode=np.array([1, 26], np.int32),
        edge_index=np.array([[1, 0]], np.int32),
        node_config_ids=np.array([1], np.int32),
        configs=Codebook.from_values(np.stack([row_a, row_b, row_a, row_a])),
        config_runtime=np.array([10, 20, 30, 40], np.int64),
        node_splits=np.array([0, 2], np.int64),
    )
    batch = assemble_batch(prepare_graphs([graph]), [0], [np.arange(4)], 5)
    np.testing.assert_allclose(batch["config_frequency"], np.log([3, 1, 3, 3, 1]) * [1, 1, 1, 1, 0])
    tf.keras.utils.set_random_seed(4)
    reads = LayoutSAGE(5, hidden_dim=8, config_frequency=True).create_variables()
    ignores = LayoutSAGE(5, hidden_dim=8).create_variables()
    assert reads.head.hidden[0].kernel.shape[0] == ignores.head.hidden[0].kernel.shape[0] + 1
    moved = dict(batch, config_frequency=batch["config_frequency"] + np.eye(5, dtype=np.float32)[2])
    for model, changes in ((reads, [2]), (ignores, [])):
        before, after = (model(to_tensors(b)).numpy()[0] for b in (batch, moved))
        assert np.flatnonzero(np.abs(after - before) > 1e-6).tolist() == changes
    with pytest.raises(ValueError, match="config_frequency"):
        LayoutSAGE(5, config_frequency=1)
