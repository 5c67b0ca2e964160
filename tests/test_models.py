"""Model shapes, data-independent variables, and the rebuild-and-copy path."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from conftest import write_random_root

from baselines.core.errors import PipelineError
from baselines.core.keras_fit import sample_config_slots
from baselines.core.saved_model import save_model
from baselines.tiles import data, features, model_builder
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import (
    assemble_batch,
    graph_from_batch,
    to_tensors,
)
from baselines.tiles.layers import ChebConv
from baselines.tiles.model_builder import build_from_record, load_trained_model
from baselines.tiles.predict import ConfigScorer
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT

MODEL_NAMES = tuple(model_builder.model_classes())


@pytest.fixture(scope="module")
def toy_valid():
    split = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    # Every derived column, so that a model with any kwargs finds its inputs.
    return FeatureStats.fit_split(split).normalize_split(split, architecture=True)


def merged_graph(split, ids, k, seed=0):
    rng = np.random.default_rng(seed)
    slots = [sample_config_slots(rng, int(split.num_configs[i]), k) for i in ids]
    return graph_from_batch(to_tensors(assemble_batch(split, ids, slots, k)))


def single_kernel_graph(split, i):
    c = int(split.num_configs[i])
    return graph_from_batch(to_tensors(assemble_batch(split, [i], [np.arange(c)], c)))


@pytest.mark.parametrize("name", list(MODEL_NAMES))
def test_forward_shapes(name, toy_valid):
    model = model_builder.build_model(name, 4, {"hidden_dim": 16, "op_embedding_dim": 8})
    scores = model.forward(merged_graph(toy_valid, [0, 1, 2, 3, 4], 4), 4)
    assert scores.shape == (5, 4)
    assert model(merged_graph(toy_valid, [5, 6], 4)).shape == (2, 4)
    i = int(np.argmax(toy_valid.num_configs))
    c = int(toy_valid.num_configs[i])
    assert model.forward(single_kernel_graph(toy_valid, i), c).shape == (1, c)
    assert np.all(np.isfinite(scores.numpy()))
    embedding = model.op_encoder.embedding.embeddings
    assert embedding.shape[0] == data.OPCODE_VOCAB_SIZE  # fixed, whatever the data holds


VARIANTS = [(name, {}) for name in MODEL_NAMES] + [
    ("LateJoinGAT", {"config_encoding": "per_dim"}),
    ("LateJoinGAT", {"config_encoding": "per_dim", "tiled_op_heads": 3}),
    ("LateJoinGAT", {"config_encoding": "per_dim", "config_dim": 8}),
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
        model = model_builder.build_model(
            name, 3, {"hidden_dim": 16, "op_embedding_dim": 8, **extra}
        )
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


def test_variables_do_not_depend_on_data(sample_root, tmp_path):
    """Same shapes on the toy set, on random kernels (other opcodes) and on the samples."""
    toy = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    other = data.load_split(write_random_root(tmp_path / "r") / "test", progress=False)
    sample = data.load_split(sample_root / "test", progress=False)
    shapes = []
    for split in (toy, other, sample):
        split = FeatureStats.fit_split(split).normalize_split(split)
        model = model_builder.build_model("EarlyJoinSAGE", 3, {})
        model(merged_graph(split, [0, 1], 3))
        shapes.append([tuple(v.shape) for v in model.trainable_variables])
    assert shapes[0] == shapes[1]


def test_gat_kwargs_shape_the_model():
    model = model_builder.build_model(
        "LateJoinGAT", 2, {"hidden_dim": 32, "num_heads": 8, "num_layers": 2}
    )
    assert len(model.blocks) == 2
    with pytest.raises(PipelineError, match="multiple of num_heads"):
        model_builder.build_model("LateJoinGAT", 2, {"hidden_dim": 30, "num_heads": 4})
    with pytest.raises(PipelineError, match="does not take"):
        model_builder.build_model("MLP", 2, {"num_heads": 4})
    with pytest.raises(PipelineError, match="config_encoding must be one of flat, per_dim"):
        model_builder.build_model("LateJoinGAT", 2, {"config_encoding": "tokens"})
    with pytest.raises(PipelineError, match="tiled_op_heads 2 needs config_encoding 'per_dim'"):
        model_builder.build_model("LateJoinGAT", 2, {"tiled_op_heads": 2})
    with pytest.raises(PipelineError, match="unknown model"):
        model_builder.build_model("GraphTransformer", 2, {})


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_only_position_tokens_read_the_layout_positions(name, toy_valid):
    """The columns after the file's 140 reach a model only through dim_layout="position"."""
    graph = merged_graph(toy_valid, [0, 1], 3)
    feats = graph.node_sets["op"]["feats"]
    width = features.NORMALIZED_NODE_DIM
    derived = np.eye(width, dtype=np.float32)[features.LAYOUT_POSITION_COLUMN :].sum(0)
    shifted = graph.replace_features(
        node_sets={
            "op": {
                **graph.node_sets["op"].features,
                "feats": feats + derived * 3.0,
            }
        }
    )
    variants = [{}]
    if name == "LateJoinGAT":
        variants += [
            {"config_encoding": "per_dim"},
            {"config_encoding": "per_dim", "dim_layout": "position"},
        ]
    for extra in variants:
        tf.keras.utils.set_random_seed(0)
        model = model_builder.build_model(
            name, 3, {"hidden_dim": 16, "op_embedding_dim": 8, **extra}
        )
        same = np.allclose(model.forward(graph, 3), model.forward(shifted, 3))
        assert same == (extra.get("dim_layout") != "position"), (name, extra)


@pytest.mark.parametrize(
    "name, extra",
    [("LateJoinGAT", {"config_encoding": "per_dim"}), ("LateJoinSAGE", {}), ("MLP", {})],
)
def test_config_dim_sets_the_width_of_every_per_config_layer_only(name, extra, toy_valid):
    """Op-side layers keep hidden_dim; encoder, interaction and head take config_dim."""
    graph = merged_graph(toy_valid, [0, 1], 3)
    model = model_builder.build_model(name, 3, {"hidden_dim": 16, "config_dim": 8, **extra})
    scores = model.forward(graph, 3)
    assert scores.shape == (2, 3)
    assert [layer.units for layer in model.head.hidden] == [8, 8]
    assert model.op_encoder(graph).shape[-1] == 16
    for layer in model.message_passing_layers():
        assert layer(graph, model.op_encoder(graph)).shape[-1] == 16
    pooled = model.pool(graph, model.message_passing(graph, model.op_encoder(graph)))
    per_config = 8 if name == "LateJoinGAT" else 0  # the interaction term's width
    width = 2 * 8 + data.CONFIG_FEAT_DIM if extra else data.CONFIG_FEAT_DIM
    assert model.head_input_dim() == pooled.shape[-1] + width + per_config
    if name == "LateJoinGAT":
        assert model.kernel_gate.units == 8 and model.config_projection.units == 8
        assert model.config_encoder.units == 8
    # Unset, it is hidden_dim: the models saved before the kwarg rebuild unchanged.
    same = model_builder.build_model(name, 3, {"hidden_dim": 16, **extra})
    assert [layer.units for layer in same.head.hidden] == [16, 16]


@pytest.mark.parametrize(
    "name, extra",
    [
        ("EarlyJoinSAGE", {}),
        ("LateJoinGAT", {}),
        ("ChebSAGE", {}),
        ("ChebSAGE", {"cheb_layout": "interleaved"}),
    ],
)
def test_rebuild_and_copy_matches_saved_keras_model(name, extra, toy_valid, tmp_path):
    record = {"model": name, "model_kwargs": {"hidden_dim": 16, **extra}, "configs": 3}
    trained = model_builder.build_model(name, 3, record["model_kwargs"])
    model_builder.create_variables(trained)  # compiled: the saved model accepts any batch shape
    # Move the weights away from their initial values so that copying is visible.
    for v in trained.trainable_variables:
        v.assign(v + tf.random.normal(v.shape, stddev=0.05, seed=1))
    model_dir = tmp_path / "model_abc"
    save_model(trained, model_dir)
    stats = FeatureStats.fit(np.zeros((1, 140), np.float32), np.zeros((1, 24), np.float32))
    from baselines.core.run_json import write_gzip_json

    run_path = tmp_path / "run_abc.jsonz"
    write_gzip_json(run_path, {**record, "feature_stats": stats.to_dict()}, run_path)
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


# --- upstream kwargs: names, aliases, refusals, and what each one does ---------------------

# Upstream's names beside this project's canonical ones, per model:
# every name upstream gives the model a meaning for.
UPSTREAM = {"num_gnns": 2, "op_embed_dim": 8, "hidden_dim": 16, "hidden_activation": "relu"}
CANONICAL = {"num_layers": 2, "op_embedding_dim": 8, "hidden_dim": 16, "activation": "relu"}
HEAD_ONLY_MODELS = ["MLP"]
GRAPH_MODELS = [name for name in MODEL_NAMES if name not in HEAD_ONLY_MODELS]


@pytest.mark.parametrize("name", list(MODEL_NAMES))
def test_upstream_names_build_the_model_their_canonical_names_build(name):
    graph_only = ("num_gnns", "num_layers") if name in HEAD_ONLY_MODELS else ()
    upstream = {k: v for k, v in UPSTREAM.items() if k not in graph_only}
    canonical = {k: v for k, v in CANONICAL.items() if k not in graph_only}
    upstream.update(reduction="mean")
    canonical.update(reduction="mean")
    if name not in ("EarlyJoinResGCN", "LateJoinResGCN"):
        upstream["mlp_layers"] = 3
    else:  # upstream's ResGCN has no mlp_layers meaning the head (see below)
        upstream["final_mlp_layers"] = 3
    canonical["final_mlp_layers"] = 3
    a, b = (model_builder.build_model(name, 4, kw) for kw in (upstream, canonical))
    assert a.get_config() == b.get_config()
    for model in (a, b):
        model.build()
    assert [v.shape for v in a.variables] == [v.shape for v in b.variables]
    assert len(a.head.hidden) == 3 and a.reductions == ("mean",)


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("MLP", {"mlp_layers": 2, "final_mlp_layers": 2}, "mlp_layers is upstream's name for"),
        ("LateJoinSAGE", {"num_gnns": 2, "num_layers": 2}, "give one of them, not both"),
        ("MLP", {"num_gnns": 2}, r"num_gnns \(= num_layers\) means nothing for MLP: it has no gr"),
        ("MLP", {"directed": True}, "upstream's directed means nothing for MLP: it has no graph"),
        ("MLP", {"num_layers": 2}, "--model_kwargs_json: num_layers means nothing for MLP: it"),
        ("EarlyJoinResGCN", {"mlp_layers": 2}, "mlp_layers means nothing for EarlyJoinResGCN: "),
        ("LateJoinResGCN", {"mlp_layers": 2}, "depth of the MLP inside each graph convolution"),
        ("LateJoinGAT", {"directed": False}, "LateJoinGAT always attends along each edge dir"),
        ("ChebSAGE", {"cheb_order": 0}, "bad value for ChebSAGE: cheb_order must be an integer"),
        ("ChebSAGE", {"cheb_order": 2.5}, "cheb_order must be an integer of at least 1, got 2.5"),
        ("MLP", {"cheb_order": 2}, "MLP does not take cheb_order"),
        ("ChebSAGE", {"cheb_layout": "serial"}, "cheb_layout must be one of parallel, interl"),
        ("EarlyJoinSAGE", {"cheb_layout": "parallel"}, "EarlyJoinSAGE does not take cheb_layout"),
        ("EarlyJoinSAGE", {"config_dim": 32}, "EarlyJoinSAGE does not take config_dim"),
        ("LateJoinGAT", {"dim_layout": "position"}, "dim_layout 'position' needs config_enc"),
        (
            "LateJoinGAT",
            {"config_encoding": "per_dim", "dim_layout": "rank"},
            "dim_layout must be one of minor_to_major, position, got 'rank'",
        ),
        ("LateJoinGAT", {"config_dim": 0}, "config_dim must be an integer of at least 1, got 0"),
        ("LateJoinSAGE", {"reduction": "median"}, "reduction must be one or more of sum, mean"),
        ("LateJoinSAGE", {"reduction": ["sum"]}, "reduction must be a string"),
        ("EarlyJoinSAGE", {"final_mlp_layers": -1}, "final_mlp_layers must be an integer of at"),
        ("MLP", {"mlp_layers": True}, "final_mlp_layers must be an integer of at least 0, got T"),
        ("EarlyJoinSAGE", {"directed": "yes"}, "directed must be true or false, got 'yes'"),
    ],
)
def test_meaningless_or_conflicting_kwargs_are_refused_in_one_line(name, kwargs, message):
    with pytest.raises(PipelineError, match=message) as caught:
        model_builder.build_model(name, 4, kwargs)
    assert "\n" not in str(caught.value)


def test_new_kwargs_default_to_the_models_before_them():
    """Defaults: head of 2 hidden layers, sum pooling (GAT: sum, mean, max), undirected
    (GAT: directed, as its blocks always were)."""
    for name in MODEL_NAMES:
        model = model_builder.build_model(name, 4, {})
        assert [layer.units for layer in model.head.hidden] == [64, 64]
        gat = name == "LateJoinGAT"
        assert model.reductions == (("sum", "mean", "max") if gat else ("sum",))
        if name not in HEAD_ONLY_MODELS:
            assert model.directed == gat
            again = model_builder.build_model(
                name,
                4,
                {
                    "directed": gat,
                    "reduction": model.get_config()["reduction"],
                    "final_mlp_layers": 2,
                },
            )
            assert again.get_config() == model.get_config()


def numpy_linear_mlp_scores(model, graph, num_configs, reduce) -> np.ndarray:
    """An MLP with no hidden head layer: w . [reduce_ops(op states) ; config] + b."""
    states = model.op_encoder(graph).numpy()
    sizes = graph.node_sets["op"].sizes.numpy()
    pooled = np.stack([reduce(part, axis=0) for part in np.split(states, np.cumsum(sizes)[:-1])])
    configs = graph.node_sets["config"]["feats"].numpy()[:, :24]  # the files' columns
    configs = configs.reshape(len(sizes), num_configs, -1)
    joint = np.concatenate([np.repeat(pooled[:, None], num_configs, 1), configs], -1)
    return joint @ model.head.out.kernel.numpy()[:, 0] + model.head.out.bias.numpy()[0]


@pytest.mark.parametrize("reduction, reduce", [("sum", np.sum), ("mean", np.mean), ("max", np.max)])
def test_mlp_layers_and_reduction_shape_the_mlp(reduction, reduce, toy_valid):
    graph = merged_graph(toy_valid, [0, 3, 7], 4)
    linear = model_builder.build_model("MLP", 4, {"mlp_layers": 0, "reduction": reduction})
    got = linear.forward(graph, 4).numpy()
    want = numpy_linear_mlp_scores(linear, graph, 4, reduce)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    deep = model_builder.build_model("MLP", 4, {"mlp_layers": 3, "hidden_dim": 8})
    deep.build()
    widths = [tuple(layer.kernel.shape) for layer in [*deep.head.hidden, deep.head.out]]
    assert widths == [(8 + 24, 8), (8, 8), (8, 8), (8, 1)]


@pytest.mark.parametrize("name", ["EarlyJoinSAGE", "LateJoinResGCN", "ChebSAGE"])
def test_reduction_concatenates_its_poolings_before_the_head(name, toy_valid):
    model = model_builder.build_model(name, 3, {"hidden_dim": 8, "reduction": "sum+max"})
    model.build()
    config_width = 0 if name in ("EarlyJoinSAGE", "ChebSAGE") else 24
    assert model.head.hidden[0].kernel.shape[0] == model.state_dim() * 2 + config_width
    assert model.forward(merged_graph(toy_valid, [0, 1], 3), 3).shape == (2, 3)


def with_reversed_edges(split):
    return split.replace(edge_index=split.edge_index[:, ::-1].copy())


@pytest.mark.parametrize("name", ["EarlyJoinSAGE", "LateJoinSAGE", "EarlyJoinResGCN", "ChebSAGE"])
def test_directed_models_tell_producers_from_consumers(name, toy_valid):
    """Reversing every edge leaves an undirected model's scores and moves a directed one's."""
    i = int(np.argmax(toy_valid.num_nodes))
    scores = {}
    for directed in (False, True):
        tf.keras.utils.set_random_seed(0)
        model = model_builder.build_model(name, 4, {"hidden_dim": 8, "directed": directed})
        for split in (toy_valid, with_reversed_edges(toy_valid)):
            scores[directed, split is toy_valid] = model(single_kernel_graph(split, i)).numpy()
    np.testing.assert_allclose(scores[False, True], scores[False, False], rtol=1e-4, atol=1e-5)
    assert np.abs(scores[True, True] - scores[True, False]).max() > 1e-4


def test_cheb_order_sets_the_polynomial_order_of_every_cheb_layer():
    model = model_builder.build_model("ChebSAGE", 2, {"cheb_order": 5, "num_layers": 2})
    cheb = [layer for layer in model.message_passing_layers() if isinstance(layer, ChebConv)]
    assert cheb and all(layer.order == 5 for layer in cheb)
    assert model_builder.build_model("ChebSAGE", 2, {}).get_config()["cheb_order"] == 3


@pytest.mark.parametrize(
    "layout, expected",
    [
        ("parallel", ["ChebConv"] * 3 + ["SAGEConv"] * 3),
        ("interleaved", ["ChebConv", "SAGEConv", "ChebConv"]),
    ],
)
def test_cheb_layout_sets_the_layer_sequence_and_state_width(layout, expected, toy_valid):
    model = model_builder.build_model("ChebSAGE", 4, {"hidden_dim": 8, "cheb_layout": layout})
    layers = [type(layer).__name__ for layer in model.message_passing_layers()]
    assert layers == expected
    scores = model(single_kernel_graph(toy_valid, 0)).numpy()
    assert np.isfinite(scores).all()
    head_width = model.head.weights[0].shape[0]
    branches = 2 if layout == "parallel" else 1
    assert head_width == branches * 8 * len(model.reductions)


# --- Keras' own loader ------------------------------------------------------------------------

# A value other than the default for every kwarg a model may take: a model
# built with all the kwargs its class takes at these values differs from the
# default model in every one of them.
NON_DEFAULT = {
    "hidden_dim": 16,
    "op_embedding_dim": 8,
    "activation": "relu",
    "dropout": 0.05,
    "final_mlp_layers": 1,
    "reduction": "max+mean",
    "config_dim": 8,
    "num_layers": 2,
    "directed": True,
    "num_heads": 2,
    "config_encoding": "per_dim",
    "tiled_op_heads": 2,
    "dim_layout": "position",
    "cheb_order": 2,
    "cheb_layout": "parallel",
    "analytic_inputs": True,
    "architecture_inputs": True,
}


def keras_reload_cases():
    import json

    from conftest import ROOT

    import tiles_train

    takes = {name: model_builder.model_kwargs(name) for name in model_builder.model_classes()}
    assert set().union(*map(set, takes.values())) <= set(NON_DEFAULT)
    cases = [(name, {k: NON_DEFAULT[k] for k in kwargs}) for name, kwargs in takes.items()]
    recipe = tiles_train.parse_args([f"--flagfile={ROOT / 'configs' / 'recommended.flags'}"])
    cases.append((recipe.model, json.loads(recipe.model_kwargs_json)))
    return cases


@pytest.mark.parametrize(
    "name, kwargs", keras_reload_cases(), ids=[c[0] for c in keras_reload_cases()]
)
def test_keras_load_model_scores_like_the_rebuild(name, kwargs, toy_valid, tmp_path):
    """`tf.keras.models.load_model` on a saved folder gives the model the project's
    rebuild gives (class and every kwarg from the run file): same config, same
    scores, for every class with every kwarg it takes away from its default,
    and for the recommended recipe's model."""
    from baselines.tiles.model_builder import restore_model

    trained = model_builder.build_model(name, 3, kwargs)
    model_builder.create_variables(trained)
    for v in trained.trainable_variables:  # away from the initial values
        v.assign(v + tf.random.normal(v.shape, stddev=0.05, seed=2))
    model_dir = tmp_path / "model_x"
    save_model(trained, model_dir)
    rebuilt = restore_model(model_dir, {"model": name, "model_kwargs": kwargs, "configs": 3})
    loaded = tf.keras.models.load_model(model_dir, compile=False)
    assert type(loaded) is type(rebuilt)
    config = loaded.get_config()
    assert {k: config[k] for k in kwargs} == kwargs
    graph = merged_graph(toy_valid, [0, 1, 2, 3], 3)
    np.testing.assert_array_equal(loaded.forward(graph, 3), rebuilt.forward(graph, 3))
