"""GraphTensor schema (SPEC §2) and config sampling with padding."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_gnn as tfgnn

from baselines.tiles import data
from baselines.tiles.graph import (
    _component_ids,
    assemble_batch,
    graph_from_batch,
    sample_config_slots,
    to_tensors,
)


def test_schema_of_merged_batch(real_samples):
    split = data.load_split(real_samples / "tile_xla" / "test", progress=False)
    ids = [0, 1, 4]
    slots = [np.arange(3), np.arange(3), np.array([5, 7, 2950])]
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
    last = split.kernel(4).edge_index
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
        split.kernel(4).config_feat[[5, 7, 2950]],
    )
    np.testing.assert_array_equal(graph.node_sets["config"]["index"].numpy()[-3:], [5, 7, 2950])


def test_kernels_with_few_configs_are_padded_and_masked(real_samples):
    split = data.load_split(real_samples / "tile_xla" / "train", progress=False)
    assert split.num_configs[0] == 2
    rng = np.random.default_rng(0)
    slots = sample_config_slots(rng, 2, 5)
    np.testing.assert_array_equal(slots, [0, 1, -1, -1, -1])
    batch = assemble_batch(split, [0], [slots], 5)
    np.testing.assert_array_equal(batch["config_mask"], [1, 1, 0, 0, 0])
    expected = split.kernel(0).normalized_runtime
    np.testing.assert_allclose(batch["config_runtimes"], [*expected, -1, -1, -1])
    np.testing.assert_array_equal(batch["config_index"], [0, 1, -1, -1, -1])


def test_sampling_without_replacement():
    rng = np.random.default_rng(1)
    slots = sample_config_slots(rng, 50, 10)
    assert len(set(slots.tolist())) == 10 and slots.min() >= 0 and slots.max() < 50


def test_component_ids_skip_empty_components():
    for sizes in ([3], [2, 0, 3, 1], [0, 0, 4], [1, 1, 1, 0]):
        ids = _component_ids(tf.constant(sizes, tf.int32)).numpy()
        np.testing.assert_array_equal(ids, np.repeat(np.arange(len(sizes)), sizes))
