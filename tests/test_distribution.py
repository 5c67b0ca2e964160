"""Keras fit under tf.distribute: resumption after a kill, mirrored replicas, multi-worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import portpicker
import pytest
from conftest import ROOT, TOY_ROOT, read_run_file

from baselines.core.distribution import check_tf_config
from baselines.core.errors import PipelineError
from baselines.core.keras_fit import replica_chunks

# Several processes each: the slow tier (make test-fast leaves them out).
pytestmark = pytest.mark.slow


PY = sys.executable
QUIET_TF = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(ROOT)}

# Runs train() in a child process. `KILL_AT` makes the child die like a killed
# process (os._exit, no cleanup) at the end of that epoch: "after_backup" once
# Keras' backup of the epoch is written, "before_backup" between the
# early-stopping state and the backup. `LOGICAL_CPUS` splits the CPU into that
# many devices before TensorFlow starts (for MirroredStrategy).
CHILD = textwrap.dedent(
    """
    import json, os, sys
    import tensorflow as tf
    cpus = int(os.environ.get("LOGICAL_CPUS", "1"))
    if cpus > 1:
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration()] * cpus)
    from baselines.core.distribution import make_strategy
    from baselines.tiles.tile_args import TrainArgs
    from baselines.tiles.task import train

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
    args = TrainArgs(**json.loads(sys.argv[1]))
    strategy = make_strategy(os.environ.get("STRATEGY", "default"))
    record = train(args, progress=False, log=lambda _: None, strategy=strategy)
    print("RECORD" + json.dumps({k: record.get(k) for k in
          ("train_curve", "final_error", "test_predictions", "best_epoch", "replicas")}))
    """
)


def run_child(args: dict, env: dict | None = None, check: bool = True):
    proc = subprocess.run(
        [PY, "-c", CHILD, json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**QUIET_TF, **(env or {})},
        timeout=600,
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RECORD")]
    return proc, (json.loads(lines[-1][len("RECORD") :]) if lines else None)


def toy_args(tmp_path, **changes) -> dict:
    return {
        "model": "MLP",
        "epochs": 5,
        "early_stop": 2,
        "lr": 0.05,
        "clip_norm": 10.0,
        "toy_data": True,
        "data_root": str(TOY_ROOT),
        "out_dir": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "test_mode": "predictions",
        "results_csv": str(tmp_path / "out" / "results.csv"),
        "eval_every": 1,
        **changes,
    }


def saved_weights(out_dir, run_hash: str) -> list[np.ndarray]:
    import tensorflow as tf
    import tensorflow_gnn  # noqa: F401  (registers the GraphTensor specs a saved model names)

    model = tf.keras.models.load_model(out_dir / f"model_{run_hash}", compile=False)
    return [v.numpy() for v in model.variables]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """One uninterrupted toy run: its args, record and saved weights."""
    from baselines.tiles.tile_args import TrainArgs

    whole = toy_args(tmp_path_factory.mktemp("whole"))
    _, record = run_child(whole)
    return whole, record, saved_weights(Path(whole["out_dir"]), TrainArgs(**whole).run_hash())


@pytest.mark.parametrize("when", ["after_backup", "before_backup"])
def test_killed_run_resumes_and_ends_like_an_uninterrupted_one(tmp_path, when, uninterrupted):
    from baselines.tiles.tile_args import TrainArgs

    whole, expected, expected_weights = uninterrupted

    resumed = toy_args(tmp_path / "resumed")
    run_hash = TrainArgs(**resumed).run_hash()
    proc, _ = run_child(resumed, {"KILL_AT": f"{when}:2"}, check=False)
    assert proc.returncode == 9, proc.stderr[-2000:]
    out = tmp_path / "resumed" / "out"
    assert (out / f"backup_{run_hash}").is_dir() and not (out / f"model_{run_hash}").exists()
    _, got = run_child(resumed)

    assert got["train_curve"]["epoch"] == expected["train_curve"]["epoch"]
    # The whole curve is there, epochs before the kill included, and equal.
    for key, values in expected["train_curve"].items():
        np.testing.assert_allclose(got["train_curve"][key], values, rtol=1e-6, err_msg=key)
    assert got["best_epoch"] == expected["best_epoch"]
    assert got["test_predictions"] == expected["test_predictions"]
    got_weights = saved_weights(out, run_hash)
    assert len(got_weights) == len(expected_weights)
    for a, b in zip(got_weights, expected_weights):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert not (out / f"backup_{run_hash}").exists()  # a finished run leaves no backup


def test_run_killed_after_its_last_backup_ends_on_the_newest_state(tmp_path):
    """Killed once the last epoch's backup is written, a run has no epoch left to train:
    resumed, it must end on the state saved after that last epoch, not on the one before
    (both are kept). With weight averaging from epoch 1 the two states differ for sure (the
    mean of epochs 1-4 against 1-3), so only the newest gives the uninterrupted run's
    final weights."""
    from baselines.tiles.tile_args import TrainArgs

    changes = dict(epochs=4, early_stop=10, average_from=1, test_mode="metrics")
    whole = toy_args(tmp_path / "whole", **changes)
    run_child(whole)
    resumed = toy_args(tmp_path / "resumed", **changes)
    run_hash = TrainArgs(**resumed).run_hash()
    proc, _ = run_child(resumed, {"KILL_AT": "after_backup:3"}, check=False)
    assert proc.returncode == 9, proc.stderr[-2000:]
    out = Path(resumed["out_dir"])
    states = sorted(p.name for p in (out / f"backup_{run_hash}").rglob("early_stopping_*.npz"))
    assert states == ["early_stopping_2.npz", "early_stopping_3.npz"]
    run_child(resumed)
    expected = saved_weights(Path(whole["out_dir"]), TrainArgs(**whole).run_hash())
    got = saved_weights(out, run_hash)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_mirrored_on_two_cpus_trains_like_one_device(tmp_path):
    args = toy_args(tmp_path, epochs=2, early_stop=5, lr=1e-3, clip_norm=1.0, test_mode="metrics")
    _, one = run_child({**args, "out_dir": str(tmp_path / "one")})
    _, two = run_child(
        {**args, "out_dir": str(tmp_path / "two")}, {"LOGICAL_CPUS": "2", "STRATEGY": "mirrored"}
    )
    assert one["replicas"] == 1 and two["replicas"] == 2
    # Each global batch of 10 kernels is split 5 + 5 and the replicas' scaled
    # gradients are summed, so the update is the global batch's up to ListMLE's
    # random tie-breaking and the MSE's per-replica masked mean (a loss scaled
    # by the wrong factor, or unscaled, is off by 2x in the step size and drifts).
    np.testing.assert_allclose(
        two["train_curve"]["train_loss"], one["train_curve"]["train_loss"], rtol=1e-2
    )
    np.testing.assert_allclose(
        two["train_curve"]["val_opa"], one["train_curve"]["val_opa"], atol=0.02
    )


# One SGD step on the same 4 kernels (all with >= 10 configs, MSE loss, so that
# every replica's mean is over the same number of slots): the update must not
# depend on how many replicas share the batch.
ONE_STEP = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf
    cpus, out = int(sys.argv[1]), sys.argv[2]
    if cpus > 1:
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration()] * cpus)
    from baselines.tiles import data
    from baselines.core import metrics
    from baselines.tiles.tile_args import BUNDLED_TOY_ROOT
    from baselines.core.distribution import distributed, make_strategy
    from baselines.tiles.features import FeatureStats
    from baselines.core.keras_fit import EpochBatches, RankingTrainer
    from baselines.tiles.kernel_batches import batch_source, graph_from_batch
    from baselines.tiles.model_builder import build_model, create_variables

    tf.keras.utils.set_random_seed(0)
    split = data.load_split(BUNDLED_TOY_ROOT / "train", progress=False)
    ids = np.flatnonzero(split.num_configs >= 10)[:4]
    split = data.stack_kernels("train", [split.kernel(int(i)) for i in ids])
    split = FeatureStats.fit_split(split).normalize_split(split)
    strategy = make_strategy("mirrored" if cpus > 1 else "default")
    with strategy.scope():
        model = build_model("MLP", 10, {})
        create_variables(model)
        loss_fn = metrics.make_loss_fn([("MSE", 1.0)])
        trainer = RankingTrainer(model, loss_fn, 10, to_graph=graph_from_batch)
        trainer.compile(optimizer=tf.keras.optimizers.SGD(0.1))
    before = [v.numpy() for v in model.trainable_variables]
    replicas = strategy.num_replicas_in_sync
    batches = EpochBatches(batch_source(split), 4, 10, seed=0, num_replicas=replicas)
    trainer.fit(distributed(strategy, batches), epochs=1, steps_per_epoch=1, verbose=0)
    after = [v.numpy() for v in model.trainable_variables]
    np.savez(out, *[a - b for a, b in zip(after, before)])
    """
)


def test_replica_losses_are_scaled_so_the_update_is_the_global_batchs(tmp_path):
    deltas = {}
    for cpus in (1, 2):
        path = tmp_path / f"delta{cpus}.npz"
        proc = subprocess.run(
            [PY, "-c", ONE_STEP, str(cpus), str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=QUIET_TF,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        with np.load(path) as saved:
            deltas[cpus] = [saved[k] for k in sorted(saved.files, key=lambda k: int(k[4:]))]
    assert any(np.abs(d).max() > 1e-4 for d in deltas[1])  # the step moved the weights
    for one, two in zip(deltas[1], deltas[2]):
        np.testing.assert_allclose(two, one, rtol=1e-3, atol=1e-6)


def test_two_local_workers_train_one_model(tmp_path):
    ports = [portpicker.pick_unused_port() for _ in range(2)]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    out = tmp_path / "out"
    cmd = [
        PY,
        str(ROOT / "tiles_train.py"),
        "--strategy=multi_worker",
        "--model=MLP",
        "--epochs=1",
        "--toy_data=True",
        f"--data_root={TOY_ROOT}",
        f"--out_dir={out}",
        f"--cache_dir={tmp_path / 'cache'}",
    ]
    procs = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=ROOT,
                env={**QUIET_TF, "TF_CONFIG": tf_config},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    assert len(list(out.glob("model_*"))) == 1 and len(list(out.glob("run_*.jsonz"))) == 1
    assert "saved" in results[0][0] and "saved" not in results[1][0]  # only the chief saves
    assert not list(out.glob("backup_*")) and not list(out.glob("*.tmp-*"))


def test_multi_worker_without_tf_config_is_refused_in_one_line(tmp_path):
    env = {k: v for k, v in QUIET_TF.items() if k != "TF_CONFIG"}
    proc = subprocess.run(
        [PY, str(ROOT / "tiles_train.py"), "--strategy=multi_worker", f"--out_dir={tmp_path}/o"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "TF_CONFIG is not set" in lines[0], proc.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{", "bad TF_CONFIG"),
        ('{"cluster": {"worker": ["a:1"]}}', "bad TF_CONFIG"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}', "index 3"),
        ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "worker", "index": 0}}', "bad TF_CONFIG"),
    ],
)
def test_bad_tf_config_is_refused(text, problem):
    with pytest.raises(PipelineError, match=problem):
        check_tf_config(text)
    check_tf_config(
        '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}'
    )


def test_replica_chunks_split_every_global_batch():
    order = np.arange(23)
    one = replica_chunks(order, batch=10, num_replicas=1)
    assert [c[0].tolist() for c in one] == [list(range(0, 10)), list(range(10, 20)), [20, 21, 22]]
    two = replica_chunks(order, batch=10, num_replicas=2)
    assert [[c.tolist() for c in step] for step in two] == [
        [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]],
        [[10, 11, 12, 13, 14], [15, 16, 17, 18, 19]],
        [[20, 21], [22]],
    ]
    # A last global batch with fewer kernels than replicas is topped up from the start.
    four = replica_chunks(np.arange(9), batch=8, num_replicas=4)
    assert [c.tolist() for c in four[-1]] == [[8], [0], [1], [2]]


def _saved_run(stdout: str, out: Path) -> dict:
    runs = list(out.glob("run_*.jsonz"))
    assert len(runs) == 1, stdout[-2000:]
    return read_run_file(runs[0])


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, flags",
    [
        ("tiles_train.py", ["--model=EarlyJoinSAGE", "--toy_data=True", "--epochs=1"]),
        ("tiles_train.py", ["--model=MLP", "--toy_data=True", "--epochs=1", "--optimizer=adam"]),
        ("layout_train.py", ["--source=xla", "--search=default", "--epochs=1"]),
    ],
    ids=["tiles-sage", "tiles-mlp-adam", "layout"],
)
def test_mirrored_from_the_command_line_uses_one_replica_per_core(tmp_path, script, flags):
    """The user's command, as typed: on a CPU-only machine `--strategy=mirrored`
    splits the CPU into one logical device per usable core (2 in CI), trains
    with that many replicas and saves the run."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [PY, str(ROOT / script), *flags, "--strategy=mirrored", f"--out_dir={out}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**QUIET_TF, "HOME": str(tmp_path)},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    record = _saved_run(proc.stdout, out)
    replicas = record["replicas"]
    assert replicas == len(os.sched_getaffinity(0))
