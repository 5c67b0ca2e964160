"""Batches keep each kernel's configs with its own ops, and inputs reach the scores.

Every model class is checked on the bundled toy set: a packed multi-kernel batch
must score each kernel exactly as that kernel scored alone, a config's features
must move its score (and only its score), and for the GNN models the edges must
matter.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from baselines.core.keras_fit import sample_config_slots
from baselines.tiles import data, model_builder
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import (
    assemble_batch,
    graph_from_batch,
    to_tensors,
)
from baselines.tiles.model_base import TileModel
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT

MODEL_NAMES = tuple(model_builder.model_classes())

GNN_MODELS = [name for name in MODEL_NAMES if name != "MLP"]
SMALL = {"hidden_dim": 16, "op_embedding_dim": 8}


@pytest.fixture(scope="module")
def toy_valid():
    raw = data.load_splits(BUNDLED_TOY_ROOT, ("train", "valid"), progress=False)
    return FeatureStats.fit_split(raw["train"]).normalize_split(raw["valid"])


def build(name: str) -> TileModel:
    tf.keras.utils.set_random_seed(0)
    model = model_builder.build_model(name, 6, SMALL)
    model.build()
    return model


def scores_of(model, batch: dict, k: int) -> np.ndarray:
    return model.forward(graph_from_batch(to_tensors(batch)), k).numpy()


def diverse_kernels(split) -> list[int]:
    """A 1-config kernel and the five largest kernels by op count."""
    single = int(np.argmin(split.num_configs))
    largest = [int(i) for i in np.argsort(-split.num_nodes, kind="stable") if i != single][:5]
    ids = [largest[0], single, *largest[1:]]
    assert split.num_configs[single] == 1 and len(set(split.num_nodes[ids])) > 3
    return ids


@pytest.mark.parametrize("name", list(MODEL_NAMES))
def test_packed_batch_scores_each_kernel_as_if_alone(name, toy_valid):
    model = build(name)
    k = 6
    ids = diverse_kernels(toy_valid)
    rng = np.random.default_rng(3)
    slots = [sample_config_slots(rng, int(toy_valid.num_configs[i]), k) for i in ids]
    for order in (list(range(len(ids))), list(range(len(ids)))[::-1]):
        packed_ids = [ids[j] for j in order]
        packed = scores_of(
            model, assemble_batch(toy_valid, packed_ids, [slots[j] for j in order], k), k
        )
        for row, j in enumerate(order):
            alone = scores_of(model, assemble_batch(toy_valid, [ids[j]], [slots[j]], k), k)[0]
            real = slots[j] >= 0
            np.testing.assert_allclose(packed[row][real], alone[real], rtol=1e-5, atol=1e-5)


def one_kernel_batch(split, i: int) -> dict:
    c = int(split.num_configs[i])
    return assemble_batch(split, [i], [np.arange(c)], c)


@pytest.mark.parametrize("name", list(MODEL_NAMES))
def test_a_configs_features_move_its_score_and_only_its_score(name, toy_valid):
    model = build(name)
    i = int(np.argmax((toy_valid.num_configs >= 5) * toy_valid.num_nodes))
    batch = one_kernel_batch(toy_valid, i)
    c = int(toy_valid.num_configs[i])
    before = scores_of(model, batch, c)[0]
    batch["config_feats"] = batch["config_feats"].copy()
    batch["config_feats"][2] += 1.5
    after = scores_of(model, batch, c)[0]
    assert abs(after[2] - before[2]) > 1e-4
    others = np.arange(c) != 2
    np.testing.assert_allclose(after[others], before[others], rtol=1e-5, atol=1e-6)


def with_edges(batch: dict, edges: np.ndarray) -> dict:
    return dict(
        batch,
        feed_sizes=np.array([len(edges)], np.int32),
        feed_source=edges[:, 0].astype(np.int32),
        feed_target=edges[:, 1].astype(np.int32),
    )


@pytest.mark.parametrize("name", list(MODEL_NAMES))
def test_edges_change_the_scores_of_gnn_models(name, toy_valid):
    model = build(name)
    i = int(np.argmax(toy_valid.num_nodes))
    batch = one_kernel_batch(toy_valid, i)
    c = int(toy_valid.num_configs[i])
    edges = np.stack([batch["feed_source"], batch["feed_target"]], 1)
    n = int(batch["op_sizes"][0])
    chain = np.array([[u, u - 1] for u in range(1, n)])  # a different graph on the same ops
    assert edges.shape[0] > 2 and not np.array_equal(np.sort(edges, 0), np.sort(chain, 0))
    base = scores_of(model, batch, c)[0]
    rewired = scores_of(model, with_edges(batch, chain), c)[0]
    if name == "MLP":
        np.testing.assert_allclose(rewired, base, rtol=1e-6)  # the MLP ignores edges
    else:
        assert np.max(np.abs(rewired - base)) > 1e-4
    # GATv2 attends along each direction with its own weights; SAGE and ResGCN
    # use the symmetric adjacency, so reversing every edge changes nothing.
    reversed_ = scores_of(model, with_edges(batch, edges[:, ::-1]), c)[0]
    if name == "LateJoinGAT":
        assert np.max(np.abs(reversed_ - base)) > 1e-4
    else:
        np.testing.assert_allclose(reversed_, base, rtol=1e-4, atol=1e-5)
