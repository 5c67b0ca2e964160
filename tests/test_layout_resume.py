"""layout_train.py's training loop: live TensorBoard, resuming a killed run, --strategy.

Each test starts layout_train.py in a child process on the toy set (xla:default).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import one_line_error, read_run_file

from baselines.layout.layout_args import LayoutTrainArgs

# Child processes, a few seconds of training each: the slow tier.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
QUIET_TF = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO)}
LR = 3e-3
FLAGS = {
    "source": "xla",
    "search": "default",
    "epochs": 4,
    "early_stop": 2,
    "configs": 16,
    "batch": 4,
    "lr": LR,
    "clip_norm": 1.0,
    "model_kwargs_json": '{"hidden_dim": 8, "op_embed_dim": 8}',
}

# Runs layout_train.py as its command line does. `KILL_AT=<when>:<epoch>` makes
# it die like a killed process (os._exit, no cleanup) at the end of that
# 0-based epoch: "after_backup" once Keras' backup of the epoch is written,
# "before_backup" between the early-stopping state and the backup.
# `LOGICAL_CPUS` splits the CPU into that many devices (for --strategy=mirrored).
CHILD = textwrap.dedent(
    """
    import os, runpy, sys
    import tensorflow as tf
    cpus = int(os.environ.get("LOGICAL_CPUS", "1"))
    if cpus > 1:
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration()] * cpus)
    kill_at = os.environ.get("KILL_AT")
    if kill_at:
        when, epoch = kill_at.split(":")
        original = tf.keras.callbacks.BackupAndRestore.on_epoch_end

        def on_epoch_end(self, e, logs=None):
            if when == "after_backup":
                original(self, e, logs)
            if e == int(epoch):
                os._exit(9)
            original(self, e, logs)

        tf.keras.callbacks.BackupAndRestore.on_epoch_end = on_epoch_end
    sys.argv = ["layout_train.py", *sys.argv[1:]]
    runpy.run_path("layout_train.py", run_name="__main__")
    """
)


def run_layout_train(
    out: Path, env: dict | None = None, **changes
) -> tuple[subprocess.CompletedProcess, str]:
    """Runs the child with FLAGS (and `changes`) into `out`; returns it and the run hash."""
    flags = {**FLAGS, **changes, "out_dir": str(out)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *[f"--{k}={v}" for k, v in flags.items()]],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**QUIET_TF, **(env or {})},
        timeout=600,
    )
    hashed = {k: v for k, v in flags.items() if k != "strategy"}
    return proc, LayoutTrainArgs(**hashed).run_hash()


def read_run(out: Path, run_hash: str) -> dict:
    return read_run_file(out / f"run_{run_hash}.jsonz")


def read_weights(out: Path, run_hash: str) -> list[np.ndarray]:
    """The saved model's variables, by their paths in the model."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(out / f"model_{run_hash}" / "variables" / "variables"))
    paths = sorted(k for k in reader.get_variable_to_shape_map() if k.endswith("VARIABLE_VALUE"))
    assert paths
    return [reader.get_tensor(k) for k in paths]


def tensorboard_scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    """Every scalar of a TensorBoard run folder (train/ or validation/): tag -> {step: value}.

    A step written twice (an epoch repeated after a kill) keeps its last value.
    """
    import tensorflow as tf

    scalars: dict[str, dict[int, float]] = {}
    for events in sorted(run_dir.glob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor))
                scalars.setdefault(value.tag, {})[int(event.step)] = number
    return scalars


def tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b by counting every pair (the test's own, quadratic)."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    pairs = concordant + discordant
    return (concordant - discordant) / np.sqrt((pairs + ties_x) * (pairs + ties_y))


def sample_tau(out: Path, run_hash: str) -> float:
    """Mean tau of the saved model over validation's fixed sample, computed here."""
    from baselines.core.keras_fit import EpochBatches
    from baselines.layout.batching import batch_source, prepare_graphs, to_model_inputs
    from baselines.layout.layout_args import BUNDLED_TOY_ROOT
    from baselines.layout.run_data import load_run_split, restore_layout_model

    record = read_run(out, run_hash)
    args = LayoutTrainArgs.from_dict(record["args"])
    valid = load_run_split(
        args.collection_dir(BUNDLED_TOY_ROOT) / "valid",
        training=True,
        prune_hops=args.prune_hops,
        drop_duplicates=args.drop_duplicates,
        max_configs=args.max_configs,
        seed=args.seed,
        log=None,
    )
    model = restore_layout_model(out / f"model_{run_hash}", record)
    configs = record["configs"]
    sample = EpochBatches(
        batch_source(prepare_graphs(valid)), args.batch, configs, args.seed + 1, fixed_epoch=0
    )
    taus = {}
    for batch in sample.batches(0):
        inputs = to_model_inputs({k: np.asarray(v) for k, v in batch.items()})
        scores = model.forward(inputs, None, training=False).numpy().reshape(-1, configs)
        runtimes = batch["config_runtimes"].reshape(-1, configs)
        for graph_id, s, r in zip(batch["graph_id"], scores, runtimes):
            real = r >= 0  # padding slots hold runtime -1
            taus[graph_id] = tau_b(s[real], r[real])
    assert len(taus) == len(valid)
    return float(np.mean(list(taus.values())))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("whole")
    proc, run_hash = run_layout_train(out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, run_hash


def test_tensorboard_holds_each_epochs_learning_rate_loss_tau_and_opa(uninterrupted):
    out, run_hash = uninterrupted
    record = read_run(out, run_hash)
    curve = record["train_curve"]
    epochs = curve["epoch"]
    assert epochs == list(range(len(epochs))) and len(epochs) >= 3
    tb = out / f"tb_{run_hash}"
    train, validation = tensorboard_scalars(tb / "train"), tensorboard_scalars(tb / "validation")
    assert train["epoch_learning_rate"] == pytest.approx(dict.fromkeys(epochs, LR))
    assert train["epoch_loss"] == pytest.approx(dict(zip(epochs, curve["train_loss"])))
    assert validation["epoch_opa"] == pytest.approx(dict(zip(epochs, curve["val_opa"])))
    tau = validation["epoch_kendall_tau"]
    assert sorted(tau) == epochs
    assert tau == pytest.approx(dict(zip(epochs, curve["val_kendall_tau"])))
    # The saved model holds the best epoch's weights: its tau on the validation
    # sample, computed here, is what TensorBoard shows for that epoch.
    assert tau[record["best_epoch"]] == pytest.approx(sample_tau(out, run_hash), abs=1e-6)
    # Early stopping follows val OPA, not tau.
    assert record["best_val_opa"] == max(curve["val_opa"])
    assert record["best_epoch"] == int(np.argmax(curve["val_opa"]))
    assert not (out / f"backup_{run_hash}").exists()  # a finished run leaves no backup


@pytest.mark.parametrize("when", ["after_backup", "before_backup"])
def test_killed_run_resumes_and_ends_like_an_uninterrupted_one(tmp_path, when, uninterrupted):
    whole, run_hash = uninterrupted
    proc, resumed_hash = run_layout_train(tmp_path, {"KILL_AT": f"{when}:1"})
    assert proc.returncode == 9, proc.stderr[-2000:]
    assert resumed_hash == run_hash
    assert (tmp_path / f"backup_{run_hash}").is_dir()
    assert not (tmp_path / f"model_{run_hash}").exists()
    # Live: the killed run's TensorBoard already holds its finished epochs.
    written = tensorboard_scalars(tmp_path / f"tb_{run_hash}" / "validation")
    assert sorted(written["epoch_kendall_tau"]) == [0, 1]

    proc, _ = run_layout_train(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resuming from {tmp_path / f'backup_{run_hash}'}" in proc.stdout
    expected, got = read_run(whole, run_hash), read_run(tmp_path, run_hash)
    # The whole curve is there, epochs before the kill included, and equal.
    assert got["train_curve"].keys() == expected["train_curve"].keys()
    for key, values in expected["train_curve"].items():
        np.testing.assert_allclose(got["train_curve"][key], values, rtol=1e-6, err_msg=key)
    assert got["best_epoch"] == expected["best_epoch"]
    np.testing.assert_allclose(got["val"]["kendall_tau"], expected["val"]["kendall_tau"], rtol=1e-6)
    got_weights, expected_weights = read_weights(tmp_path, run_hash), read_weights(whole, run_hash)
    assert len(got_weights) == len(expected_weights)
    for a, b in zip(got_weights, expected_weights):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert not (tmp_path / f"backup_{run_hash}").exists()
    written = tensorboard_scalars(tmp_path / f"tb_{run_hash}" / "validation")
    assert sorted(written["epoch_kendall_tau"]) == expected["train_curve"]["epoch"]


def test_mirrored_on_two_cpus_trains_like_one_device(tmp_path, uninterrupted):
    whole, run_hash = uninterrupted
    env = {"LOGICAL_CPUS": "2"}
    proc, mirrored_hash = run_layout_train(tmp_path, env, strategy="mirrored")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert mirrored_hash == run_hash  # --strategy is not part of the run
    one, two = read_run(whole, run_hash), read_run(tmp_path, run_hash)
    assert one["replicas"] == 1 and two["replicas"] == 2
    # Each batch of 4 graphs is split 2 + 2 and the replicas' scaled gradients
    # summed: the update is the global batch's (a loss scaled by the wrong
    # factor is off by 2x in the step size and drifts).
    np.testing.assert_allclose(
        two["train_curve"]["train_loss"], one["train_curve"]["train_loss"], rtol=1e-2
    )
    np.testing.assert_allclose(
        two["train_curve"]["val_opa"], one["train_curve"]["val_opa"], atol=0.02
    )


def test_bad_strategy_is_refused_in_one_line(tmp_path):
    env = {k: v for k, v in QUIET_TF.items() if k != "TF_CONFIG"}
    script = [sys.executable, str(REPO / "layout_train.py"), f"--out_dir={tmp_path / 'o'}"]
    proc = subprocess.run(
        [*script, "--strategy=mirorred"], capture_output=True, text=True, env=env, timeout=120
    )
    line = one_line_error(proc)
    assert "--strategy" in line and "mirrored" in line and "multi_worker" in line
    proc = subprocess.run(
        [*script, "--strategy=multi_worker"], capture_output=True, text=True, env=env, timeout=120
    )
    assert "TF_CONFIG is not set" in one_line_error(proc)
    assert not (tmp_path / "o").exists()
