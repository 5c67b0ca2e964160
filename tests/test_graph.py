"""The baseline's GraphTensor schema and config sampling with padding."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.core.keras_fit import sample_config_slots
from baselines.tiles import data
from baselines.tiles.kernel_batches import (
    _component_ids,
    assemble_batch,
    graph_from_batch,
    to_tensors,
)


def test_schema_of_merged_batch(sample_root):
    split = data.load_split(sample_root / "test", progress=False)
    big = int(np.argmax(split.num_configs))
    assert big not in (0, 1) and split.num_configs[big] > 8 and min(split.num_configs[:2]) >= 3
    ids = [0, 1, big]
    last_slots = [5, 7, int(split.num_configs[big]) - 1]
    slots = [np.arange(3), np.arange(3), np.array(last_slots)]
    graph = graph_from_batch(to_tensors(assemble_batch(split, ids, slots, 3)))
    assert isinstance(graph, tfgnn.GraphTensor)
    assert set(graph.node_sets) == {"op", "config", "g"}
    assert set(graph.edge_sets) == {"feed", "g_op", "g_config"}
    assert {"op", "feats"} <= set(graph.node_sets["op"].features)
    assert {"feats", "runtimes", "normalizers"} <= set(graph.node_sets["config"].features)
    assert set(graph.node_sets["g"].features) == {"tile_id"}
    assert graph.num_components == 3

    np.testing.assert_array_equal(graph.node_sets["op"].sizes, split.num_nodes[ids])
    np.testing.assert_array_equal(graph.node_sets["config"].sizes, [3, 3, 3])
    assert [t.decode() for t in graph.node_sets["g"]["tile_id"].numpy()] == list(
        split.tile_ids[ids]
    )
    # feed: source is the consumer u of each edge_index row [u, v]; ids offset per kernel.
    adj = graph.edge_sets["feed"].adjacency
    offset = split.num_nodes[0] + split.num_nodes[1]
    last = split.kernel(big).edge_index
    assert len(last) > 0
    np.testing.assert_array_equal(adj.source.numpy()[-len(last) :], last[:, 0] + offset)
    np.testing.assert_array_equal(adj.target.numpy()[-len(last) :], last[:, 1] + offset)
    # g_op / g_config connect the kernel's g node to each of its ops / configs.
    g_op = graph.edge_sets["g_op"].adjacency.source.numpy()
    np.testing.assert_array_equal(g_op, np.repeat([0, 1, 2], split.num_nodes[ids]))
    np.testing.assert_array_equal(
        graph.edge_sets["g_config"].adjacency.source.numpy(), np.repeat([0, 1, 2], 3)
    )
    np.testing.assert_array_equal(
        graph.node_sets["config"]["feats"].numpy()[-3:],
        split.kernel(big).config_feat[last_slots],
    )
    np.testing.assert_array_equal(graph.node_sets["config"]["index"].numpy()[-3:], last_slots)


def test_kernels_with_few_configs_are_padded_and_masked(sample_root):
    split = data.load_split(sample_root / "train", progress=False)
    i = int(np.argmin(split.num_configs))
    c = int(split.num_configs[i])
    assert c <= 2
    rng = np.random.default_rng(0)
    slots = sample_config_slots(rng, c, 5)
    np.testing.assert_array_equal(slots, [*range(c), *[-1] * (5 - c)])
    batch = assemble_batch(split, [i], [slots], 5)
    np.testing.assert_array_equal(batch["config_mask"], [1] * c + [0] * (5 - c))
    raw = split.kernel(i)
    expected = (
        raw.config_runtime / raw.config_runtime_normalizers
    )  # computed here, not by the loader
    np.testing.assert_allclose(batch["config_runtimes"], [*expected, *[-1] * (5 - c)], rtol=1e-6)
    np.testing.assert_array_equal(batch["config_index"], [*range(c), *[-1] * (5 - c)])
    np.testing.assert_array_equal(batch["config_feats"][:c], raw.config_feat)
    np.testing.assert_array_equal(batch["config_feats"][c:], 0)


def test_sampling_without_replacement():
    rng = np.random.default_rng(1)
    slots = sample_config_slots(rng, 50, 10)
    assert len(set(slots.tolist())) == 10 and slots.min() >= 0 and slots.max() < 50


def test_component_ids_skip_empty_components():
    for sizes in ([3], [2, 0, 3, 1], [0, 0, 4], [1, 1, 1, 0]):
        ids = _component_ids(tf.constant(sizes, tf.int32)).numpy()
        np.testing.assert_array_equal(ids, np.repeat(np.arange(len(sizes)), sizes))
