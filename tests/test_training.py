"""tiles_train.py: flags, hashing, early refusal of bad flags, learning, outputs, determinism."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT, tensorboard_hparams, tensorboard_metadata

import tiles_train
from baselines.core import metrics
from baselines.core.errors import PipelineError
from baselines.core.keras_fit import EpochBatches, RankingTrainer
from baselines.core.runner import ResumableEarlyStopping, set_determinism
from baselines.tiles import data
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import batch_source, graph_from_batch, to_tensors
from baselines.tiles.model_builder import build_model, create_variables
from baselines.tiles.task import train
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT, TrainArgs

BASELINE_DEFAULTS = {
    "model": "EarlyJoinSAGE",
    "epochs": 100,
    "early_stop": 20,
    "configs": 10,
    "batch": 10,
    "losses": "ListMLELoss:1,MSE:0.02",
    "lr": 1e-3,
    "clip_norm": 1e-3,
    "model_kwargs_json": "{}",
    "test_mode": "predictions",
    "out_dir": "~/out/tpugraphs_tiles",
    "validate_batches": -1,
    "data_root": "~/data/tpugraphs/npz/tile/xla",
    "cache_dir": "~/data/tpugraphs/cache/tile",
    "toy_data": False,
    "eval_every": 5,  # upstream's train_args.py
}


def test_every_spec_flag_exists_with_its_default():
    defaults = vars(tiles_train.build_parser().parse_args([]))
    for flag, value in BASELINE_DEFAULTS.items():
        assert defaults[flag] == value, flag
    assert {"results_csv", "run_id", "seed"} <= set(defaults)
    parsed = tiles_train.parse_args(["--model=MLP", "--toy_data=True", "--configs", "4"])
    assert parsed.model == "MLP" and parsed.max_files == 100 and parsed.configs == 4
    assert tiles_train.parse_args(["--toy_data"]).max_files == 100
    assert tiles_train.parse_args(["--toy_data=false"]).max_files is None


def test_run_hash_is_deterministic_and_covers_every_arg():
    a = TrainArgs(model="MLP", toy_data=True)
    assert a.run_hash() == TrainArgs(model="MLP", toy_data=True).run_hash()
    assert len(a.run_hash()) == 32
    assert a.run_hash() != TrainArgs(model="MLP", toy_data=True, seed=1).run_hash()
    assert a.run_hash() != TrainArgs(model="MLP", toy_data=True, lr=2e-3).run_hash()


def test_tile_runs_keep_their_names_under_the_shared_training_flags():
    """Tile runs hash every flag (out_dir and cache_dir too), average_from only when set;
    the flags shared with layout kept their names and defaults."""
    hashed = (
        "model", "epochs", "max_train_steps", "early_stop", "configs", "batch", "losses", "lr",
        "clip_norm", "model_kwargs_json", "test_mode", "out_dir", "results_csv",
        "validate_batches", "run_id", "data_root", "cache_dir", "toy_data", "seed", "optimizer",
        "weight_decay", "lr_schedule", "warmup_epochs", "sampling", "eval_every",
    )  # fmt: skip
    for args in (TrainArgs(), TrainArgs(model="MLP", optimizer="adamw", eval_every=2)):
        fields = {k: getattr(args, k) for k in hashed}
        assert (
            args.run_hash() == hashlib.md5(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        )
    averaged = TrainArgs(average_from=3)
    fields = {**{k: getattr(averaged, k) for k in hashed}, "average_from": 3}
    assert (
        averaged.run_hash() == hashlib.md5(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "flag, message",
    [
        ("--model=Transformer", "unknown model 'Transformer'"),
        ("--losses=ListMLE:1", "--losses: cannot parse 'ListMLE:1'"),
        ("--losses=MSE:x", "--losses: cannot parse 'MSE:x'"),
        ("--model_kwargs_json={hidden", "--model_kwargs_json: not valid JSON"),
        ("--model_kwargs_json=[1]", "expected a JSON object"),
        ('--model_kwargs_json={"heads": 2}', "does not take heads"),
        ('--model_kwargs_json={"num_gnns": 2}', "num_gnns (= num_layers) means nothing for MLP"),
        ("--out_dir=/proc/forbidden/out", "--out_dir: /proc/forbidden/out is not writable"),
        ("--eval_every=0", "--eval_every: must be at least 1"),
    ],
)
def test_bad_flags_fail_before_loading_data(tmp_path, flag, message):
    # An existing folder without splits: loading it would fail on the missing train/.
    empty_root = tmp_path / "data"
    empty_root.mkdir()
    flags = [f"--data_root={empty_root}", f"--out_dir={tmp_path / 'out'}"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tiles_train.py"), "--model=MLP", *flags, flag],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=300,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, proc.stderr
    assert "toy" not in proc.stdout  # no data was looked at
    assert list(tmp_path.iterdir()) == [empty_root]  # nothing written
    assert list(empty_root.iterdir()) == []


@pytest.fixture(scope="module")
def toy_splits():
    raw = data.load_splits(BUNDLED_TOY_ROOT, ("train", "valid"), progress=False)
    stats = FeatureStats.fit_split(raw["train"])
    return {k: stats.normalize_split(v) for k, v in raw.items()}


def test_writable_probe_survives_a_concurrent_probe_removing_the_folder(tmp_path, monkeypatch):
    """Two workers probe one new --out_dir: the other's clean-up may remove it under us."""
    import tempfile

    from baselines.core import io_utils

    real = tempfile.TemporaryFile
    removed = []

    def racing(*args, dir=None, **kwargs):
        if not removed:  # the other worker's probe ends first and removes the folder
            removed.append(dir)
            os.rmdir(dir)
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(io_utils.tempfile, "TemporaryFile", racing)
    io_utils.check_writable_dir(tmp_path / "new" / "out", "--out_dir")
    assert removed and not (tmp_path / "new").exists()  # probed again, then left as it was


def test_listmle_steps_lower_loss_and_beat_random_opa(toy_splits):
    set_determinism(0)
    model = build_model("LateJoinSAGE", 10, {"hidden_dim": 32})
    create_variables(model)
    trainer = RankingTrainer(
        model, metrics.make_loss_fn([("ListMLELoss", 1.0)]), 10, to_graph=graph_from_batch
    )
    trainer.compile(optimizer=tf.keras.optimizers.Adam(1e-2))
    trainer.optimizer.build(model.trainable_variables)
    train_batches = EpochBatches(batch_source(toy_splits["train"]), 10, 10, seed=0)
    probe = EpochBatches(batch_source(toy_splits["train"]), 10, 10, seed=0, fixed_epoch=0)
    val = EpochBatches(batch_source(toy_splits["valid"]), 10, 10, seed=1, fixed_epoch=0)

    def evaluate(batches):
        return trainer.evaluate(batches.dataset(), steps=batches.steps, verbose=0, return_dict=True)

    first_loss = evaluate(probe)["loss"]
    trainer.fit(train_batches.dataset(), epochs=4, steps_per_epoch=10, verbose=0)
    last_loss = evaluate(probe)["loss"]
    val_opa = evaluate(val)["opa"]
    assert train_batches.steps == 10
    assert last_loss < first_loss
    assert val_opa > 0.5
    assert trainer.traces == {"train": 1, "eval": 1}  # one trace for all batch shapes


def _read_run(path):
    with gzip.open(path) as f:
        return json.loads(f.read())


def test_train_writes_matching_outputs_and_is_deterministic(tmp_path):
    args = TrainArgs(
        model="MLP",
        epochs=2,
        toy_data=True,
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
        configs=6,
    )
    record = train(args, progress=False, log=lambda _: None)
    h = args.run_hash()
    out = tmp_path / "out"
    assert (out / f"model_{h}" / "saved_model.pb").is_file()
    assert (out / f"tb_{h}").is_dir() and any((out / f"tb_{h}").iterdir())
    saved = _read_run(out / f"run_{h}.jsonz")
    assert saved["args"] == args.to_dict() and saved["model"] == "MLP"
    assert set(saved["train_curve"]) == {"epoch", "train_loss", "train_opa", "val_loss", "val_opa"}
    assert set(saved["final_error"]["val"]) == {"1", "5", "10"}
    csvs = list(out.glob("results_*.csv"))
    assert len(csvs) == 1 and csvs[0] == tmp_path / "out" / csvs[0].name
    lines = csvs[0].read_text().splitlines()
    assert lines[0] == "ID,TopConfigs" and len(lines) == 1 + len(saved["test_predictions"])
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]

    again = train(
        TrainArgs(**{**args.to_dict(), "out_dir": str(tmp_path / "out2")}),
        progress=False,
        log=lambda _: None,
    )
    assert again["train_curve"] == record["train_curve"]
    assert again["final_error"] == record["final_error"]
    assert again["test_predictions"] == record["test_predictions"]


def test_saved_model_is_the_best_validation_one(tmp_path):
    """The saved weights give the recorded best val OPA, not the last epoch's."""
    args = TrainArgs(
        model="MLP",
        model_kwargs_json='{"hidden_dim": 16, "op_embedding_dim": 8}',
        epochs=5,
        lr=0.15,  # high enough that validation OPA falls after its peak (epoch 2 of 5)
        clip_norm=10.0,
        configs=8,
        seed=1,
        eval_every=1,
        toy_data=True,
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    record = train(args, progress=False, log=lambda _: None)
    curve = record["train_curve"]["val_opa"]
    best, last = max(curve), curve[-1]
    assert best - last > 0.01, f"the last epoch was (nearly) the best: {curve}; change the recipe"

    saved = tf.keras.models.load_model(tmp_path / "out" / f"model_{args.run_hash()}", compile=False)
    stats = FeatureStats.from_dict(record["feature_stats"])
    valid = stats.normalize_split(data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False))
    correct = comparable = 0
    batches = EpochBatches(
        batch_source(valid), args.batch, args.configs, args.seed + 1, fixed_epoch=0
    )
    for batch in batches.batches(epoch=0):
        scores = saved(graph_from_batch(to_tensors(batch))).numpy()
        runtimes = batch["config_runtimes"].reshape(scores.shape)
        for s, r in zip(scores, runtimes):
            real = r >= 0
            s, r = s[real], r[real]
            faster = r[:, None] < r[None, :]
            comparable += faster.sum()
            correct += (faster & (s[:, None] < s[None, :])).sum()
    saved_opa = correct / comparable
    assert abs(saved_opa - best) < min(2e-3, (best - last) / 2), (saved_opa, curve)


def test_tile_training_ends_on_the_averaged_weights_with_average_from(tmp_path):
    """--average_from reaches the tile trainer as it reaches layout's: 3 epochs from
    epoch 2 on average the weights after epochs 2 and 3, and the run says so."""
    lines: list[str] = []
    args = TrainArgs(
        model="MLP",
        model_kwargs_json='{"hidden_dim": 8, "op_embedding_dim": 4}',
        epochs=3,
        average_from=2,
        eval_every=1,
        toy_data=True,
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
        test_mode="metrics",
    )
    record = train(args, progress=False, log=lines.append)
    assert record["averaged_epochs"] == 2
    assert any("mean of the weights of 2 epochs from epoch 2" in line for line in lines)
    assert record["args"]["average_from"] == 2


def test_diverged_training_is_refused_and_writes_nothing(tmp_path):
    args = TrainArgs(
        model="MLP",
        epochs=2,
        lr=1e30,  # diverges to NaN in the first epoch
        clip_norm=1e6,
        toy_data=True,
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    with pytest.raises(PipelineError, match="NaN or infinite scores for 30 of 30"):
        train(args, progress=False, log=lambda _: None)
    assert not list((tmp_path / "out").glob("model_*"))
    assert not list((tmp_path / "out").glob("run_*")) and not list((tmp_path / "out").glob("*.csv"))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"optimizer": "sgd"}, "--optimizer: 'sgd' is not one of adam, adamw"),
        ({"lr_schedule": "step"}, "--lr_schedule: 'step'"),
        ({"sampling": "weighted"}, "--sampling: 'weighted'"),
        ({"weight_decay": 0.01}, "--weight_decay: 0.01 needs --optimizer=adamw"),
        ({"warmup_epochs": 2}, "--warmup_epochs: 2 needs --lr_schedule=cosine"),
        ({"max_train_steps": -1}, "--max_train_steps: must be 0 .no cap. or positive, got -1"),
        ({"average_from": 0}, "--average_from: must be an epoch from 1 to --epochs"),
        ({"epochs": 4, "average_from": 5}, "--average_from: must be an epoch from 1 to --epochs"),
        ({"average_from": "two"}, "--average_from: expected an integer or None"),
    ],
)
def test_recipe_flags_are_checked(changes, message, tmp_path):
    with pytest.raises(PipelineError, match=message):
        TrainArgs(out_dir=str(tmp_path), **changes).validate()


def test_cosine_schedule_warms_up_then_decays_and_adamw_is_chosen():
    from baselines.core.fused_adam import FusedAdam, FusedAdamW
    from baselines.tiles.task import TileTask

    args = TrainArgs(
        lr=0.01,
        epochs=10,
        lr_schedule="cosine",
        warmup_epochs=2,
        optimizer="adamw",
        weight_decay=0.1,
    )
    optimizer = TileTask().optimizer(args, epochs=10, steps_per_epoch=10)
    assert type(optimizer) is FusedAdamW
    assert optimizer.weight_decay == pytest.approx(0.1)
    rate = optimizer._learning_rate  # Keras keeps the schedule there: step -> rate
    values = [float(rate(step)) for step in (0, 10, 20, 60, 99)]
    assert values[0] == pytest.approx(1e-4)  # lr / 100 at the start of warm-up
    assert values[1] == pytest.approx((1e-4 + 0.01) / 2, rel=1e-3)  # linear warm-up
    assert values[2] == pytest.approx(0.01)  # peak after 2 epochs
    assert values[2] > values[3] > values[4] > 0  # cosine decay to lr / 100
    baseline = TileTask().optimizer(TrainArgs(lr=0.003), epochs=100, steps_per_epoch=10)
    assert type(baseline) is FusedAdam  # Adam, not AdamW
    assert float(baseline.learning_rate) == pytest.approx(0.003)


@pytest.mark.parametrize(
    "epochs, cap, steps_per_epoch, expected",
    [
        (90, 0, 714, 90),  # no cap
        (90, 32000, 714, 45),  # 44 epochs are 31,416 steps, 45 reach the cap
        (90, 32130, 714, 45),  # exactly 45 epochs
        (90, 32131, 714, 46),
        (90, 32000, 75, 90),  # a smaller split: 90 epochs are 6,750 steps, under the cap
        (3, 1, 714, 1),
    ],
)
def test_max_train_steps_caps_whole_epochs(epochs, cap, steps_per_epoch, expected):
    from baselines.tiles.task import TileTask

    lines = []
    args = TrainArgs(epochs=epochs, max_train_steps=cap)
    assert TileTask().schedule(args, steps_per_epoch, lines.append)[0] == expected
    # Said in one line when, and only when, the cap shortens the run.
    assert len(lines) == (expected < epochs)


def test_capped_run_fits_its_schedule_and_keeps_its_name(tmp_path):
    """Under --max_train_steps the run trains the capped epochs, its cosine schedule
    ending at lr / 100 on the last of them, and is named by the flags it was given."""
    num_train = len(list((BUNDLED_TOY_ROOT / "train").glob("*.npz")))
    steps = -(-num_train // 10)  # --batch=10
    args = TrainArgs(
        model="MLP",
        epochs=6,
        max_train_steps=2 * steps + 1,  # one step into the third epoch: 3 epochs
        eval_every=2,
        lr=0.01,
        lr_schedule="cosine",
        toy_data=True,
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    lines = []
    record = train(args, progress=False, log=lines.append)
    assert record["epochs"] == 3 and record["steps_per_epoch"] == steps
    assert record["train_curve"]["epoch"] == [0, 1, 2]
    validated = [e for e, v in enumerate(record["train_curve"]["val_opa"]) if v is not None]
    assert validated == [1, 2]  # every 2nd epoch and the last one run
    assert record["run_hash"] == args.run_hash() and record["args"]["epochs"] == 6
    assert any("--max_train_steps" in line and "3 epochs" in line for line in lines)
    # Keras' cosine decay without warm-up: lr * (alpha + (1 - alpha) * (1 + cos(pi t)) / 2),
    # alpha = 0.01, t = the step over the 3 epochs' steps; logged after each epoch.
    expected = [
        0.01 * (0.01 + 0.99 * (1 + np.cos(np.pi * e * steps / (3 * steps))) / 2) for e in (1, 2, 3)
    ]
    rates = tensorboard_scalars(tmp_path / "out" / f"tb_{record['run_hash']}" / "train")
    assert rates["epoch_learning_rate"] == pytest.approx(expected, rel=1e-5)


def test_balanced_sampling_gives_every_program_the_same_share(toy_splits):
    from baselines.tiles.task import program_balanced_weights

    split = toy_splits["train"]
    weights = program_balanced_weights(split)
    programs = np.array([t.rpartition("_")[0] for t in split.tile_ids])
    shares = {p: weights[programs == p].sum() for p in set(programs)}
    counts = {p: int(np.sum(programs == p)) for p in set(programs)}
    assert len(set(counts.values())) > 1  # programs of different sizes
    np.testing.assert_allclose(list(shares.values()), 1 / len(shares), rtol=1e-9)
    drawn = [
        b["tile_id"]
        for b in EpochBatches(batch_source(split), 10, 4, 0, weights=weights).batches(0)
    ]
    assert sum(len(t) for t in drawn) == len(split)  # an epoch is still one split's worth


def test_sqrt_configs_sampling_draws_kernels_by_the_root_of_their_config_count(toy_splits):
    from baselines.tiles.task import sampling_weights

    split = toy_splits["train"]
    counts = np.array([len(split.kernel(i).config_runtime) for i in range(len(split))])
    assert len(set(counts)) > 1
    weights = sampling_weights(TrainArgs(sampling="sqrt_configs"), split)
    np.testing.assert_allclose(weights, np.sqrt(counts) / np.sqrt(counts).sum(), rtol=1e-12)
    assert sampling_weights(TrainArgs(), split) is None  # uniform: every kernel once
    # Over many epochs the kernels with more configs than the median take the
    # share their weights give them (uniform: half; in proportion to the count
    # itself, more than sqrt gives).
    batches = EpochBatches(batch_source(split), 10, 4, 0, weights=weights)
    drawn = np.array([t for e in range(200) for b in batches.batches(e) for t in b["tile_id"]])
    large = {t.encode() for t, c in zip(split.tile_ids, counts) if c > np.median(counts)}
    share = np.mean([t in large for t in drawn])
    expected = np.sqrt(counts[counts > np.median(counts)]).sum() / np.sqrt(counts).sum()
    assert share == pytest.approx(expected, abs=0.015)
    linear = counts[counts > np.median(counts)].sum() / counts.sum()
    assert abs(linear - expected) > 0.05 and abs(0.5 - expected) > 0.05


def test_eval_every_validates_every_nth_and_the_last_epoch(tmp_path):
    args = TrainArgs(
        model="MLP",
        epochs=7,
        early_stop=50,
        eval_every=3,
        run_id="eval-test",
        toy_data=True,
        test_mode="metrics",
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    assert args.validation_epochs() == [3, 6, 7]
    record = train(args, progress=False, log=lambda _: None)
    curve = record["train_curve"]
    assert curve["epoch"] == list(range(7))
    validated = [e for e, v in zip(curve["epoch"], curve["val_opa"]) if v is not None]
    assert validated == [2, 5, 6]  # 0-based: after epochs 3, 6 and 7
    assert all(v is not None for v in curve["train_loss"])
    assert record["best_epoch"] in validated
    assert record["best_val_opa"] == max(curve["val_opa"][e] for e in validated)
    # The TensorBoard run is labelled: HParams with the model, --run_id and the flags.
    hparams = tensorboard_hparams(tmp_path / "out" / f"tb_{record['run_hash']}")
    assert hparams["model"] == "MLP" and hparams["run_id"] == "eval-test"
    assert hparams["_trial"] == f"MLP-eval-test-{record['run_hash'][:8]}"
    assert hparams["eval_every"] == 3 and "out_dir" not in hparams
    # The HParams dashboard's metrics are the validation top-K errors, OPA and losses...
    from tensorboard.plugins.hparams import plugin_data_pb2

    tb = tmp_path / "out" / f"tb_{record['run_hash']}"
    experiment = plugin_data_pb2.HParamsPluginData.FromString(
        tensorboard_metadata(tb, "_hparams_/experiment")
    ).experiment
    metrics = {(m.name.tag, m.name.group) for m in experiment.metric_infos}
    assert {("epoch_top5_err", "validation"), ("epoch_opa", "validation")} <= metrics
    # ... which are scalars there: one per validated epoch, beside the learning rate
    # (constant here: --lr's default) for every epoch.
    validation = tensorboard_scalars(tb / "validation")
    for k in (1, 5, 10):
        assert len(validation[f"epoch_top{k}_err"]) == 3
        assert all(v >= 0 for v in validation[f"epoch_top{k}_err"])
    assert validation["epoch_opa"] == pytest.approx(
        [curve["val_opa"][e] for e in validated], rel=1e-6
    )
    assert tensorboard_scalars(tb / "train")["epoch_learning_rate"] == pytest.approx([1e-3] * 7)


def tensorboard_scalars(run_dir) -> dict[str, list[float]]:
    """Every scalar of a TensorBoard run folder (train/ or validation/), by tag."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    scalars: dict[str, list[float]] = {}
    for events in sorted(run_dir.glob("events.out.tfevents.*")):
        acc = event_accumulator.EventAccumulator(str(events), size_guidance={"tensors": 0})
        acc.Reload()
        for tag in acc.Tags()["tensors"]:
            scalars[tag] = [float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)]
    return scalars


@pytest.mark.parametrize(
    "eval_every, opas, stops_at",
    [
        # Validation every 2nd epoch, patience 3 epochs: the best is epoch 1;
        # epoch 3 is 2 epochs later (go on), epoch 5 is 4 epochs later (stop).
        (2, {1: 0.5, 3: 0.4, 5: 0.4, 7: 0.9}, 5),
        # Every epoch (Keras' own counting): 3 epochs without a gain.
        (1, {0: 0.5, 1: 0.4, 2: 0.4, 3: 0.45, 4: 0.9}, 3),
    ],
)
def test_early_stop_patience_counts_epochs_not_validations(tmp_path, eval_every, opas, stops_at):
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.build((None, 1))
    stopper = ResumableEarlyStopping(3, tmp_path / "state")
    stopper.set_model(model)
    stopper.on_train_begin()
    for epoch in range(8):
        stopper.on_epoch_begin(epoch)
        logs = {"loss": 1.0, "opa": 0.5}
        if epoch in opas:
            logs.update(val_loss=1.0, val_opa=opas[epoch])
        stopper.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    assert stopper.stopped_epoch == stops_at
    assert stopper.best == 0.5


def drive_stopper(stopper, model, epochs, weights, opas, start=0):
    """Runs `stopper` through epochs start..epochs-1 as Keras would, with the model's
    weights set to weights[epoch] and validation OPA opas[epoch] at each epoch's end."""
    stopper.set_model(model)
    stopper.on_train_begin()
    for epoch in range(start, epochs):
        stopper.on_epoch_begin(epoch)
        model.set_weights(weights[epoch])
        stopper.on_epoch_end(
            epoch, {"loss": 1.0, "opa": 0.5, "val_loss": 1.0, "val_opa": opas[epoch]}
        )
        if model.stop_training:
            break
    stopper.on_train_end()


def epoch_weights(epochs: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        [rng.normal(size=(1, 1)).astype(np.float32), rng.normal(size=(1,)).astype(np.float32)]
        for _ in range(epochs)
    ]


def dense_model():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
    model.build((None, 1))
    return model


def test_weight_averaging_ends_on_the_mean_of_the_epochs_from_its_start(tmp_path):
    """--average_from=3 over 6 epochs: the mean of the weights after epochs 3-6 (counted
    from 1), whichever epoch validated best; a resumed run ends on the same mean."""
    weights = epoch_weights(6)
    opas = [0.9, 0.1, 0.2, 0.3, 0.2, 0.1]  # the best is the first, which is not averaged
    # Means in float64 over the stacked epochs; the stopper keeps a running mean in
    # float64 and casts once, so the two differ by at most a float32 rounding step.
    wanted = [np.mean([w[i] for w in weights[2:]], axis=0, dtype=np.float64) for i in range(2)]

    model = dense_model()
    stopper = ResumableEarlyStopping(10, tmp_path / "state", average_from=3)
    drive_stopper(stopper, model, 6, weights, opas)
    assert stopper.averaged_epochs == 4 and stopper.best_epoch == 0
    for got, want in zip(model.get_weights(), wanted):
        np.testing.assert_allclose(got, want, rtol=1e-6)

    # Killed after epoch 4 (0-based 3): a new process resumes at epoch 5 from the state.
    resumed_state = tmp_path / "resumed"
    first = ResumableEarlyStopping(10, resumed_state, average_from=3)
    drive_stopper(first, dense_model(), 4, weights, opas)
    model = dense_model()
    second = ResumableEarlyStopping(10, resumed_state, average_from=3)
    drive_stopper(second, model, 6, weights, opas, start=4)
    assert second.averaged_epochs == 4
    for got, want in zip(model.get_weights(), wanted):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_weight_averaging_that_never_starts_ends_on_the_best_epoch(tmp_path):
    """Early stopping before --average_from's epoch: the best epoch's weights, as without it."""
    weights = epoch_weights(8)
    opas = [0.5, 0.9, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4]
    model = dense_model()
    stopper = ResumableEarlyStopping(2, tmp_path / "state", average_from=6)
    drive_stopper(stopper, model, 8, weights, opas)
    assert stopper.stopped_epoch == 3 and stopper.averaged_epochs == 0
    for got, want in zip(model.get_weights(), weights[1]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, flags, meant",
    [
        ("tiles_train.py", ["--epoch=5"], "--epochs"),
        ("tiles_gen_predictions_csv.py", ["--dir=x", "--data_ro=x"], "--data_root"),
        ("tiles_evaluate.py", ["--dirs=a", "--dir=a"], "--dirs"),
        ("create_kaggle_csv.py", ["--allow"], "--allow_missing"),
    ],
)
def test_abbreviated_flags_are_refused(script, flags, meant):
    """argparse would take `--epoch` for `--epochs`; absl (upstream) and this project don't."""
    flag = flags[-1]
    proc = subprocess.run(
        [sys.executable, str(ROOT / script), *flags],
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: unknown flag {flag}")
    # The flag the abbreviation was meant for is suggested.
    assert f"; did you mean {meant}? " in line


@pytest.mark.slow
def test_help_shows_defaults():
    text = subprocess.run(
        [sys.executable, str(ROOT / "tiles_train.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    text = " ".join(text.split())  # argparse wraps lines
    assert "(default: EarlyJoinSAGE)" in text and "maximum training epochs (default: 100)" in text
