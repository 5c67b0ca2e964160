"""Model shapes, data-independent variables, and the rebuild-and-copy path."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import write_random_root

from baselines.tiles import data, models
from baselines.tiles.errors import PipelineError
from baselines.tiles.features import FeatureStats
from baselines.tiles.graph import assemble_batch, graph_from_batch, sample_config_slots, to_tensors
from baselines.tiles.predict import ConfigScorer
from baselines.tiles.run_files import build_from_record, load_trained_model, save_model


@pytest.fixture(scope="module")
def toy_valid():
    split = data.load_split(data.BUNDLED_TOY_ROOT / "valid", progress=False)
    return FeatureStats.fit_split(split).normalize_split(split)


def merged_graph(split, ids, k, seed=0):
    rng = np.random.default_rng(seed)
    slots = [sample_config_slots(rng, int(split.num_configs[i]), k) for i in ids]
    return graph_from_batch(to_tensors(assemble_batch(split, ids, slots, k)))


def single_kernel_graph(split, i):
    c = int(split.num_configs[i])
    return graph_from_batch(to_tensors(assemble_batch(split, [i], [np.arange(c)], c)))


@pytest.mark.parametrize("name", list(models.MODELS))
def test_forward_shapes(name, toy_valid):
    model = models.build_model(name, 4, {"hidden_dim": 16, "op_embedding_dim": 8})
    scores = model.forward(merged_graph(toy_valid, [0, 1, 2, 3, 4], 4), 4)
    assert scores.shape == (5, 4)
    assert model(merged_graph(toy_valid, [5, 6], 4)).shape == (2, 4)
    i = int(np.argmax(toy_valid.num_configs))
    c = int(toy_valid.num_configs[i])
    assert model.forward(single_kernel_graph(toy_valid, i), c).shape == (1, c)
    assert np.all(np.isfinite(scores.numpy()))
    embedding = model.op_encoder.embedding.embeddings
    assert embedding.shape[0] == data.OPCODE_VOCAB_SIZE  # fixed, whatever the data holds


VARIANTS = [(name, {}) for name in models.MODELS] + [
    ("LateJoinGAT", {"config_encoding": "per_dim"}),
    ("LateJoinGAT", {"config_encoding": "per_dim", "tiled_op_heads": 3}),
]


@pytest.mark.parametrize("name, extra", VARIANTS)
def test_build_makes_the_variables_a_forward_pass_makes(name, extra, toy_valid):
    """`build()` (used to restore a model for prediction) matches lazy creation.

    `forward` bypasses Keras' automatic build, so each layer creates its weights
    on first use; under the same seed the variables must come out identical.
    """
    graph = merged_graph(toy_valid, [0, 1], 3)
    made = []
    for create in ("forward", "build"):
        tf.keras.utils.set_random_seed(0)
        model = models.build_model(name, 3, {"hidden_dim": 16, "op_embedding_dim": 8, **extra})
        if create == "forward":
            model.forward(graph, 3)
        else:
            model.build()
        made.append((model, [(v.name.split("/")[-1], v.numpy()) for v in model.variables]))
    (lazy, lazy_vars), (built, built_vars) = made
    assert [(n, v.shape) for n, v in built_vars] == [(n, v.shape) for n, v in lazy_vars]
    for (_, a), (_, b) in zip(lazy_vars, built_vars):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(built.forward(graph, 3), lazy.forward(graph, 3))


def test_variables_do_not_depend_on_data(toy_valid, sample_root, tmp_path):
    """Same shapes on the toy set, on random kernels (other opcodes) and on the samples."""
    other = data.load_split(write_random_root(tmp_path / "r") / "test", progress=False)
    sample = data.load_split(sample_root / "test", progress=False)
    shapes = []
    for split in (toy_valid, other, sample):
        split = FeatureStats.fit_split(split).normalize_split(split)
        model = models.build_model("EarlyJoinSAGE", 3, {})
        model(merged_graph(split, [0, 1], 3))
        shapes.append([tuple(v.shape) for v in model.trainable_variables])
    assert shapes[0] == shapes[1]


def test_gat_kwargs_shape_the_model():
    model = models.build_model(
        "LateJoinGAT", 2, {"hidden_dim": 32, "num_heads": 8, "num_layers": 2}
    )
    assert len(model.blocks) == 2
    with pytest.raises(PipelineError, match="multiple of num_heads"):
        models.build_model("LateJoinGAT", 2, {"hidden_dim": 30, "num_heads": 4})
    with pytest.raises(PipelineError, match="does not take"):
        models.build_model("MLP", 2, {"num_heads": 4})
    with pytest.raises(PipelineError, match="config_encoding must be one of flat, per_dim"):
        models.build_model("LateJoinGAT", 2, {"config_encoding": "tokens"})
    with pytest.raises(PipelineError, match="tiled_op_heads 2 needs config_encoding 'per_dim'"):
        models.build_model("LateJoinGAT", 2, {"tiled_op_heads": 2})
    with pytest.raises(PipelineError, match="unknown model"):
        models.build_model("GraphTransformer", 2, {})


@pytest.mark.parametrize("name", ["EarlyJoinSAGE", "LateJoinGAT"])
def test_rebuild_and_copy_matches_saved_keras_model(name, toy_valid, tmp_path):
    record = {"model": name, "model_kwargs": {"hidden_dim": 16}, "configs": 3}
    trained = models.build_model(name, 3, record["model_kwargs"])
    models.create_variables(trained)  # compiled: the saved model accepts any batch shape
    # Move the weights away from their initial values so that copying is visible.
    for v in trained.trainable_variables:
        v.assign(v + tf.random.normal(v.shape, stddev=0.05, seed=1))
    model_dir = tmp_path / "model_abc"
    save_model(trained, model_dir)
    stats = FeatureStats.fit(np.zeros((1, 140), np.float32), np.zeros((1, 24), np.float32))
    from baselines.tiles.run_files import write_run_file

    write_run_file(tmp_path / "run_abc.jsonz", {**record, "feature_stats": stats.to_dict()})
    rebuilt, _, _ = load_trained_model(model_dir)
    saved = tf.keras.models.load_model(model_dir, compile=False)

    graph = merged_graph(toy_valid, [0, 1, 2], 3)
    np.testing.assert_allclose(rebuilt(graph), saved(graph), rtol=1e-5, atol=1e-6)
    scorer = ConfigScorer(rebuilt)
    for i in range(3):
        ranked = np.argsort(scorer.score_kernel(toy_valid, i), kind="stable")
        c = int(toy_valid.num_configs[i])
        saved_scores = saved(single_kernel_graph(toy_valid, i)).numpy()[0]
        np.testing.assert_array_equal(ranked, np.argsort(saved_scores, kind="stable"))
        assert c == len(ranked)
    fresh = build_from_record(record)
    assert not np.allclose(fresh(graph), saved(graph))  # the copy did something
