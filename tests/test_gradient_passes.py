"""A training step split into passes (`--micro_batch`): the same update as the whole step, with
one pass's activations in memory. The expected updates come from a plain GradientTape over the
whole step, not from the trainer's code."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from baselines.core import metrics
from baselines.core.conductor import train_run
from baselines.core.errors import PipelineError
from baselines.core.keras_fit import PASS_SIGNATURE, EpochBatches, RankingTrainer
from baselines.layout.batching import (
    SEGMENT_SIGNATURE,
    batch_source,
    prepare_graphs,
    segment_source,
    to_model_inputs,
)
from baselines.layout.data import load_layout_split
from baselines.layout.layout_args import LayoutTrainArgs
from baselines.layout.models import ResModel
from baselines.layout.task import LayoutTask

TOY = Path(__file__).resolve().parents[1] / "data" / "layout_toy" / "xla" / "default"
CONFIGS, BATCH = 8, 4
LOSS = metrics.make_loss_fn(metrics.parse_losses("ListMLELoss:1"))
RATE = 0.01  # small: the second step's gradient is taken where the first left both runs alike


@pytest.fixture(scope="module")
def graphs():
    return prepare_graphs(load_layout_split(TOY / "train", log=None))


def as_tensors(batch: dict) -> dict[str, tf.Tensor]:
    """The batch as tensors, its tied runtimes made distinct: ListMLE shuffles ties at random,
    which no two runs would draw alike. The offset is a function of the configuration's row,
    so a pass and the whole step get the same runtimes."""
    batch = dict(batch)
    index = batch["config_index"].astype(np.float32)
    batch["config_runtimes"] = np.where(
        index >= 0, batch["config_runtimes"] + 1e-3 * (index + 1), batch["config_runtimes"]
    ).astype(np.float32)
    signature = {**SEGMENT_SIGNATURE, **PASS_SIGNATURE}
    return {k: tf.constant(v, dtype=signature[k].dtype) for k, v in batch.items()}


def model_with(weights: list[np.ndarray] | None) -> ResModel:
    tf.keras.utils.set_random_seed(0)
    model = ResModel(hidden_dim=8, op_embed_dim=4).create_variables()
    if weights is not None:
        model.set_weights(weights)
    return model


def expected_sgd_updates(weights, steps: list[dict]) -> list[np.ndarray]:
    """Weights after plain SGD steps, each on the whole step's batch: w -= RATE * grad."""
    model = model_with(weights)
    for batch in steps:
        tensors = as_tensors(batch)
        with tf.GradientTape() as tape:
            scores = model.forward(to_model_inputs(tensors), CONFIGS, training=True)
            loss = LOSS(tf.reshape(tensors["config_runtimes"], [-1, CONFIGS]), scores)
        grads = tape.gradient(loss, model.trainable_variables)
        for v, g in zip(model.trainable_variables, grads):
            if g is not None:
                v.assign_sub(RATE * tf.convert_to_tensor(g))
    return model.get_weights()


def trained_by_passes(weights, micro: int, epoch_batches: list[dict]) -> tuple[list, list]:
    """(weights after the trainer ran every pass, the weights seen after each pass)."""
    model = model_with(weights)
    trainer = RankingTrainer(model, LOSS, CONFIGS, to_model_inputs, accumulate=micro > 0)
    trainer.compile(optimizer=tf.keras.optimizers.SGD(RATE))
    seen = []
    for batch in epoch_batches:
        trainer.train_step(as_tensors(batch))
        seen.append(model.get_weights())
    return model.get_weights(), seen


@pytest.mark.parametrize("micro", [1, 3])
def test_passes_give_the_whole_steps_update(graphs, micro):
    """Catches: gradients not weighted by the pass's share (micro=1 would step 4x as far), the
    update applied after every pass instead of at the step's end, and the sums not cleared after
    an update (the second step would repeat the first's gradient). Tolerance: every gradient
    entry is a float32 sum over at most a few thousand node/slot terms, regrouped by the passes;
    its rounding is below 1e-4 of the largest entry's size, far under the 4x or repeated-step
    errors."""
    whole = EpochBatches(batch_source(graphs), BATCH, CONFIGS, seed=0)
    split = EpochBatches(batch_source(graphs), BATCH, CONFIGS, seed=0, micro=micro)
    steps = list(whole.batches(0))[:2]
    passes = list(split.batches(0))
    per_step = -(-BATCH // micro)
    passes = passes[: 2 * per_step]
    assert [bool(b["step_end"]) for b in passes] == ([False] * (per_step - 1) + [True]) * 2
    start = model_with(None).get_weights()
    expected = expected_sgd_updates(start, steps)
    got, seen = trained_by_passes(start, micro, passes)
    scale = max(float(np.max(np.abs(e - s))) for e, s in zip(expected, start))
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-4 * scale)
    if micro < BATCH:  # nothing moves before the first step's last pass
        for w, s in zip(seen[0], start):
            np.testing.assert_array_equal(w, s)


def test_split_steps_draw_the_whole_steps_graphs_slots_and_segments(graphs):
    """The passes hold the step's graphs and configuration slots in order, and with per-graph
    segments the same gradient segments as the step in one pass. Catches a pass drawn from a
    different order, and segments keyed by the pass's contents."""
    source = segment_source(graphs, keep_nodes=7, seed=3, per_graph=True)
    one = list(EpochBatches(source, BATCH, CONFIGS, seed=5, micro=BATCH).batches(1))
    parts = list(EpochBatches(source, BATCH, CONFIGS, seed=5, micro=1).batches(1))
    assert len(parts) == sum(len(b["graph_id"]) for b in one)
    joined_ids = [g for b in parts for g in b["graph_id"]]
    assert joined_ids == [g for b in one for g in b["graph_id"]]
    for field in ("config_index", "node_segment"):
        np.testing.assert_array_equal(
            np.concatenate([b[field] for b in parts]), np.concatenate([b[field] for b in one])
        )
    # A pass's share of its step: graphs in the pass over graphs in the step.
    sizes = [len(b["graph_id"]) for b in one]
    weights = [float(b["pass_weight"]) for b in parts]
    assert weights == [1.0 / s for s in sizes for _ in range(s)]
    # The segments are real: smaller than some graph here.
    assert not np.concatenate([b["node_segment"] for b in parts]).all()


def test_a_training_with_passes_counts_updates_not_passes(tmp_path):
    """Through layout_train's conductor: the schedule and the record count the optimizer's
    steps (ceil(8 graphs / batch 4) = 2 per epoch), while Keras runs a pass per step (catches
    `steps` passed where the updates belong, which would e.g. resume at the wrong epoch)."""
    train = load_layout_split(TOY / "train", log=None)
    valid = load_layout_split(TOY / "valid", log=None)
    records = {}
    for micro in (0, 1):
        args = LayoutTrainArgs(
            search="default",
            out_dir=str(tmp_path / str(micro)),
            configs=CONFIGS,
            batch=BATCH,
            epochs=2,
            micro_batch=micro,
            lr=3e-3,
            clip_norm=1.0,
        )
        task = LayoutTask(graphs=(train, valid), validate_all=False)
        records[micro] = train_run(task, args, progress=False, log=lambda _: None)
    expected_updates = -(-len(train) // BATCH)
    assert records[1]["steps_per_epoch"] == records[0]["steps_per_epoch"] == expected_updates
    # Same updates in the same order: the epochs' mean losses agree (Adam is scale-free, so this
    # checks the order and count of updates, the SGD test above their size).
    losses = [records[m]["train_curve"]["train_loss"] for m in (0, 1)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-3)
    # The run with passes is its own run (a hashed flag).
    assert records[0]["run_hash"] != records[1]["run_hash"]


def test_micro_batch_must_not_be_negative():
    with pytest.raises(PipelineError, match="--micro_batch"):
        LayoutTrainArgs(micro_batch=-1).check_flags()
