"""Every model row of the paper grid builds with its upstream kwargs, and one trains a step."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from baselines.core import metrics
from baselines.jobs.tile_spec import PAPER_MODEL_GRID
from baselines.tiles import data, model_builder
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import (
    BATCH_SIGNATURE,
    assemble_batch,
    graph_from_batch,
    to_tensors,
)
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT

# Upstream's names -> what each must set in the built model (upstream's meanings).
DEFAULTS = {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64, "mlp_layers": 2}


@pytest.mark.parametrize("model_name, kwargs", PAPER_MODEL_GRID)
def test_every_paper_grid_row_builds_with_upstreams_meaning(model_name, kwargs):
    model = model_builder.build_model(model_name, 8, kwargs)
    model.build()
    given = {**DEFAULTS, **kwargs}
    assert model.op_encoder.embedding.embeddings.shape == (256, given["op_embed_dim"])
    # The head: mlp_layers hidden layers of hidden_dim (2 for the GNN rows, as upstream's SAGE).
    assert [layer.units for layer in model.head.hidden] == [given["hidden_dim"]] * given[
        "mlp_layers"
    ]
    if model_name != "MLP":
        assert len(model.message_passing_layers()) == given["num_gnns"]


def test_a_paper_grid_row_trains_one_compiled_step():
    """MLP with mlp_layers 3 (a row the grid lacked before), one step of the paper's loss."""
    model_name, kwargs = next((m, kw) for m, kw in PAPER_MODEL_GRID if kw.get("mlp_layers") == 3)
    raw = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    split = FeatureStats.fit_split(raw).normalize_split(raw)
    k = 8
    ids = [i for i in range(len(split)) if split.num_configs[i] >= k][:4]
    batch = to_tensors(assemble_batch(split, ids, [np.arange(k)] * len(ids), k))
    tf.keras.utils.set_random_seed(0)
    model = model_builder.build_model(model_name, k, kwargs)
    model_builder.create_variables(model)
    loss_fn = metrics.make_loss_fn(metrics.parse_losses("ListMLELoss:1,MSE:0.02"))
    optimizer = tf.keras.optimizers.Adam(1e-2)

    @tf.function(input_signature=[BATCH_SIGNATURE], autograph=False)
    def step(batch):
        runtimes = tf.reshape(batch["config_runtimes"], [-1, k])
        with tf.GradientTape() as tape:
            loss = loss_fn(runtimes, model.forward(graph_from_batch(batch), k, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    before = [v.numpy() for v in model.trainable_variables]
    loss = float(step(batch))
    after = [v.numpy() for v in model.trainable_variables]
    assert np.isfinite(loss)
    # Every variable moved, the third hidden layer of the head included.
    assert all(not np.array_equal(a, b) for a, b in zip(before, after))
    assert len(model.head.hidden) == 3
