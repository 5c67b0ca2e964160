"""Reach-limited ResModel scoring (`baselines.layout.reach`) against the plain full forward.

Tolerance (`bound`): both paths evaluate the same float32 expressions per node; they differ
in matmul blocking (K and row counts per call) and in how the pooled sum is formed (all N
rows per configuration versus the reference's sum plus the change over N_L). A score
s = head(p), p = sum_v x_v (/ N for mean), is then off by about c * eps * M, eps = 6e-8,
M = |W_out|^T ... |W_1|^T sum_v |x_v| the magnitude of s without cancellation (leaky_relu
has slope <= 1), c a few units of eps per op on the longest chain plus the pooled sum's
growth: ~sqrt(N) for random rounding, below 25 for these graphs of <= 400 nodes, so
1e-5 * M (c = 160) holds with room and no trial; the 1e-6 absolute term covers M ~ 0.
A wrong row, edge or degree moves a score by a sizeable part of the spread across
configurations, required to be over 100 times the bound.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from baselines.layout import reach
from baselines.layout.batching import assemble_batch, prepare_graphs, to_model_inputs, to_tensors
from baselines.layout.codebook import Codebook
from baselines.layout.data import load_layout_split
from baselines.layout.graph import LayoutGraph
from baselines.layout.models import ResModel
from baselines.layout.scoring import GraphScorer

TOY = Path(__file__).resolve().parents[1] / "data" / "layout_toy"


def random_graph(seed: int, nodes: int = 80, configurable=(5, 9, 30), configs: int = 20):
    """A chain (node u reads u - 1) with random skip reads from up to 4 back, one read
    doubled (an op reading a tensor twice): local enough that the reach is part of it."""
    rng = np.random.default_rng(seed)
    edges = [[u, u - 1] for u in range(1, nodes)]
    edges += [[u, u - int(rng.integers(2, 5))] for u in rng.choice(np.arange(5, nodes), 12)]
    edges.append([10, 9])
    nc = len(configurable)
    return LayoutGraph(
        graph_id=f"random_{seed}",
        node_feat=rng.integers(0, 4, size=(nodes, 140)).astype(np.float32),
        node_opcode=rng.integers(0, 100, size=nodes).astype(np.int32),
        edge_index=np.array(edges, np.int32),
        node_config_ids=np.array(configurable, np.int32),
        configs=Codebook.from_values(rng.integers(-1, 6, (configs, nc, 18)).astype(np.int8)),
        config_runtime=rng.integers(100, 200, size=configs).astype(np.int64),
        node_splits=np.array([0, nodes], np.int64),
    )


def full_scores(model: ResModel, graph) -> np.ndarray:
    """Every configuration's score from one plain `forward` over the whole graph."""
    count = graph.num_configs
    batch = assemble_batch([graph], [0], [np.arange(count)], count)
    return model(to_tensors(batch)).numpy()[0]


def bound(model: ResModel, graph) -> float:
    """1e-5 M + 1e-6 (module docstring), M from the all-default layer states of the graph."""
    inputs = to_model_inputs(to_tensors(assemble_batch([graph], [0], [np.arange(1)], 1)))
    states = model.activation(model.op_encoder(inputs["graph"]))[:, None]
    for layer in model.prenet:
        states = layer(states)
    for conv in model.convs:
        states = conv(inputs["graph"], states)
    total = np.abs(states.numpy()[:, 0]).sum(0)
    n = graph.node_feats.shape[0]
    magnitude = np.concatenate([total if r == "sum" else total / n for r in model.pool.reductions])
    for layer in [*model.head.hidden, model.head.out]:
        magnitude = magnitude @ np.abs(layer.kernel.numpy())
    return 1e-5 * float(magnitude[0]) + 1e-6


def check_equal(model: ResModel, graph, **scorer_kw) -> np.ndarray:
    """The reach path's scores (taken: the reach pays) equal the full forward's."""
    found = reach.find_reach(graph, len(model.convs))
    assert found.pays and found.rows.size < graph.node_feats.shape[0]
    expected, tol = full_scores(model, graph), bound(model, graph)
    assert np.ptp(expected) > 100 * tol  # the configurations are told apart
    got = GraphScorer(model, **scorer_kw).score(graph)
    np.testing.assert_allclose(got, expected, rtol=0, atol=tol)
    return got


@pytest.mark.parametrize(
    "directed, num_gnns, mlp_layers, reduction",
    [
        (False, 0, 1, "sum"),
        (False, 1, 2, "mean"),
        (False, 2, 2, "sum"),
        (False, 3, 1, "sum+mean"),
        (True, 0, 2, "mean"),
        (True, 1, 1, "sum"),
        (True, 2, 2, "sum+mean"),
        (True, 3, 2, "sum"),
    ],
)
def test_reach_scores_equal_the_full_forward_on_random_graphs(
    directed, num_gnns, mlp_layers, reduction
):
    """Chunks of 7 (several calls, in order). Catches, in reach.py: subgraph degrees
    (`degree=` dropped in `_chunk_scores`), an edge of N_l left out (`near <= hop - 1`), a
    row read one hop short (`depth = num_gnns`), a reference row pinned from the wrong
    layer (`ordered[h + 1]`), the mean divided by the reach's rows (not the graph's),
    and (directed) a subgraph with its edges reversed."""
    tf.keras.utils.set_random_seed(num_gnns + 10 * mlp_layers)
    model = ResModel(
        hidden_dim=16,
        num_gnns=num_gnns,
        mlp_layers=mlp_layers,
        reduction=reduction,
        directed=directed,
    ).create_variables()
    (graph,) = prepare_graphs([random_graph(num_gnns)])
    check_equal(model, graph, chunk=7)


@pytest.mark.parametrize(
    "folder, kwargs",
    [
        ("xla/default/valid", {}),  # the baseline's model: hidden 32, 2 convs, sum
        ("nlp/random/valid", {"directed": True, "num_gnns": 3}),
    ],
)
def test_reach_scores_equal_the_full_forward_on_the_toy_graphs(folder, kwargs):
    """Real graph shapes (shared operands, fan-out), every configuration of two graphs.
    Catches the same lines as the random graphs."""
    tf.keras.utils.set_random_seed(4)
    model = ResModel(**kwargs).create_variables()
    for graph in prepare_graphs(load_layout_split(TOY / folder, max_files=2, log=None)):
        check_equal(model, graph)


def hops_within(graph, limit: int) -> int:
    """Nodes within `limit` hops (either direction) of a configurable node, by plain BFS."""
    near = {int(v) for v in graph.cfg_node}
    for _ in range(limit):
        near |= {int(b) for a, b in graph.edge_index if a in near}
        near |= {int(a) for a, b in graph.edge_index if b in near}
    return len(near)


def test_the_reach_path_runs_the_reached_rows_in_chunks_sized_by_them(monkeypatch):
    """The full path is never called, every chunk runs |N_3| rows (2 convs), fewer than
    the graph's, and a chunk holds slot_budget // |N_3| configurations. Catches a reach
    that never pays (`reach if reach.pays else None` -> None: falls back silently) and
    `chunk_for` sizing by the whole graph (chunks of 2, not 6)."""
    (graph,) = prepare_graphs([random_graph(2, configs=20)])
    rows = hops_within(graph, 3)
    assert rows < graph.node_feats.shape[0] // 2
    monkeypatch.setattr(GraphScorer, "_call", lambda *a: pytest.fail("the full path ran"))
    tf.keras.utils.set_random_seed(2)
    model = ResModel(hidden_dim=8).create_variables()
    scorer = GraphScorer(model, slot_budget=6 * rows + 1)
    calls, real = [], scorer.reach._chunk
    scorer.reach._chunk = lambda r, c, g: (
        calls.append((g["degree"].shape[0], c.shape[1])) or real(r, c, g)
    )
    scorer.score(graph)
    assert calls == [(rows, 6)] * 3 + [(rows, 2)]


def test_max_pooling_overridden_parts_and_wide_reach_fall_back_to_the_full_path():
    """No `ReachScorer` for max pooling (alone or with sum) or a subclass with its own
    `config_part`; a reach of more than MAX_SHARE of the graph runs the full path. Catches
    `applies` without its reductions check (max pooled as a sum: wrong scores) or without
    its methods check, and `Reach.pays` always true."""
    (graph,) = prepare_graphs([random_graph(3)])
    tf.keras.utils.set_random_seed(3)
    for reduction in ("max", "sum+max"):
        model = ResModel(hidden_dim=16, reduction=reduction).create_variables()
        scorer = GraphScorer(model)
        assert scorer.reach is None
        np.testing.assert_allclose(
            scorer.score(graph), full_scores(model, graph), rtol=0, atol=bound(model, graph)
        )

    class OwnConfigPart(ResModel):
        def config_part(self, inputs, graph_part, training=None):
            return super().config_part(inputs, graph_part, training) * 2.0

    assert GraphScorer(OwnConfigPart(hidden_dim=8).create_variables()).reach is None
    (small,) = prepare_graphs([random_graph(3, nodes=12, configurable=(2, 5, 9))])  # all reached
    model = ResModel(hidden_dim=16).create_variables()
    assert not reach.find_reach(small, 2).pays
    scorer = GraphScorer(model)
    scorer.reach.score = lambda *a: pytest.fail("the reach path ran")
    np.testing.assert_allclose(
        scorer.score(small), full_scores(model, small), rtol=0, atol=bound(model, small)
    )


def test_a_graph_without_configurable_nodes_scores_the_reference_everywhere():
    """Every configuration scores as the all-zero reference, as the full forward says.
    Catches the no-configurable branch returning zeros (or the chunks running on no rows)."""
    base = random_graph(4, configs=5)
    empty = Codebook.from_values(np.zeros((5, 0, 18), np.int8))
    (graph,) = prepare_graphs(
        [
            LayoutGraph(
                **{**base.__dict__, "node_config_ids": np.zeros(0, np.int32), "configs": empty}
            )
        ]
    )
    tf.keras.utils.set_random_seed(4)
    model = ResModel(hidden_dim=16).create_variables()
    expected = full_scores(model, graph)
    got = GraphScorer(model).score(graph)
    assert got.shape == (5,) and abs(float(expected[0])) > 1e-3
    np.testing.assert_allclose(got, expected, rtol=0, atol=bound(model, graph))
