"""The fit loop's speed parts: several steps per compiled call (`compile_trainer`) train
exactly as one step per call; progress and epoch timings count what ran."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf

from baselines.core import callbacks as core_callbacks
from baselines.core import metrics
from baselines.core.callbacks import EpochTimer, StepProgress
from baselines.core.keras_fit import (
    STEPS_PER_EXECUTION,
    EpochBatches,
    RankingTrainer,
    compile_trainer,
)
from baselines.core.runner import set_determinism
from baselines.tiles import data
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import batch_source, graph_from_batch
from baselines.tiles.model_builder import build_model, create_variables
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT


@pytest.fixture(scope="module")
def toy_train():
    raw = data.load_splits(BUNDLED_TOY_ROOT, ("train",), progress=False)
    return FeatureStats.fit_split(raw["train"]).normalize_split(raw["train"])


def _fit(split, steps_per_execution: int | None, steps: int, epochs: int):
    """Weights, last epoch's logs, optimizer steps and traces after `epochs` epochs of `steps`
    steps, validated after each on a fixed sample of the same split."""
    set_determinism(0)
    model = build_model("LateJoinSAGE", 6, {"hidden_dim": 16})
    create_variables(model)
    trainer = RankingTrainer(
        model, metrics.make_loss_fn([("ListMLELoss", 1.0)]), 6, to_graph=graph_from_batch
    )
    optimizer = tf.keras.optimizers.Adam(1e-2)
    if steps_per_execution is None:
        compile_trainer(trainer, optimizer)
    else:
        trainer.compile(optimizer=optimizer, steps_per_execution=steps_per_execution)
    trainer.optimizer.build(model.trainable_variables)
    batches = EpochBatches(batch_source(split), 2, 6, seed=0, max_steps=steps)
    val = EpochBatches(batch_source(split), 2, 6, seed=1, fixed_epoch=0, max_steps=steps)
    history = trainer.fit(
        batches.dataset(),
        epochs=epochs,
        steps_per_epoch=batches.steps,
        validation_data=val.dataset(),
        validation_steps=val.steps,
        verbose=0,
    )
    logs = {k: v[-1] for k, v in history.history.items()}
    return model.get_weights(), logs, int(trainer.optimizer.iterations.numpy()), trainer.traces


def test_compiled_loop_gives_the_updates_of_one_step_per_call(toy_train):
    # Not a multiple of the steps per call: Keras must cut the epoch's last
    # call short, or the epochs drift apart (each draws its own batches).
    steps = STEPS_PER_EXECUTION + 13
    assert len(toy_train) // 2 >= steps
    plain_weights, plain_logs, plain_iterations, _ = _fit(toy_train, 1, steps, epochs=2)
    looped_weights, looped_logs, looped_iterations, traces = _fit(toy_train, None, steps, epochs=2)
    assert plain_iterations == looped_iterations == 2 * steps
    assert traces == {"train": 1, "eval": 1}  # the loop traces each step once
    # The same kernels in the same order run through the same float32 ops; the
    # loop only moves the Python round trip between them, so the results agree
    # to float32 rounding (a reordered sum would differ by a few ulp, then
    # grow over 90 Adam updates by far less than 1e-4 of a weight).
    for plain, looped in zip(plain_weights, looped_weights):
        np.testing.assert_allclose(looped, plain, rtol=1e-4, atol=1e-6)
    for key in ("loss", "opa", "val_loss", "val_opa", "val_top5_err"):
        assert looped_logs[key] == pytest.approx(plain_logs[key], rel=1e-4)


def test_step_progress_counts_every_step_when_keras_reports_once_per_call():
    progress = StepProgress("train")
    progress.set_params({"steps": 70, "epochs": 1})
    progress.on_epoch_begin(0)
    progress._bar.fp = io.StringIO()  # keep the test's output clean
    for last_step in (31, 63, 69):  # Keras' batch index: the last step of each call
        progress.on_train_batch_end(last_step)
    assert progress._bar.n == 70
    progress.on_epoch_end(0, {"loss": 1.0, "opa": 0.5})
    assert progress._bar is None


def test_epoch_timer_splits_each_epoch_into_training_validation_and_callbacks(monkeypatch):
    clock = iter([0.0, 5.0, 6.0, 6.5, 7.0, 10.0, 10.2])
    monkeypatch.setattr(core_callbacks.time, "perf_counter", lambda: next(clock))
    timer = EpochTimer()
    timer.on_epoch_begin(0)  # 0.0
    timer.on_test_begin()  # 5.0: 5 s of training, and validation starts
    timer.on_test_end()  # 6.0: 1 s of validation
    timer.on_epoch_end(0)  # 6.5: the other callbacks start
    timer.on_epoch_begin(1)  # 7.0: they took 0.5 s
    timer.on_epoch_end(1)  # 10.0: 3 s of training, no validation
    timer.on_train_end()  # 10.2
    assert timer.train_s == pytest.approx([5.0, 3.0])
    assert timer.val_s == pytest.approx([1.0, 0.0])
    assert timer.callbacks_s == pytest.approx([0.5, 0.2])


def test_batch_datasets_run_without_tf_data_autotuning(toy_train):
    """tf.data's autotuning thread sleeps up to a minute between rounds, and deleting an
    iterator waits for it to wake: with it on, `fit` returned tens of seconds after its
    last epoch. The pipeline (one generator, a fixed prefetch) has nothing to tune."""
    for batches in (
        EpochBatches(batch_source(toy_train), 2, 6, seed=0),
        EpochBatches(batch_source(toy_train), 2, 6, seed=1, fixed_epoch=0),
    ):
        dataset = batches.dataset()
        assert dataset.options().autotune.enabled is False
        # Still the same batches, in order: the option changes no element.
        first = next(iter(dataset))
        expected = next(iter(batches.batches(batches.fixed_epoch or 0)))
        assert first.keys() == expected.keys()
        for name, value in expected.items():
            np.testing.assert_array_equal(first[name].numpy(), value)
