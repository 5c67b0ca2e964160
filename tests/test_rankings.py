"""Written rankings are the ascending order of the model's scores, end to end.

A linear MLP (activation "linear") is a model whose scores the test can compute
on its own: numpy reads the raw npz files, fits the normalization on the train
files, reads the weights straight from the SavedModel checkpoint and runs the
forward pass. Training's results CSV and run file, the prediction script's CSV
and the in-process scores must all agree with it.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import ROOT, numpy_feature_stats, signed_log, write_random_root

from baselines.core import metrics
from baselines.core.errors import PipelineError
from baselines.core.ranking import ensemble_scores
from baselines.core.run_files import RUN_IN_MODEL, run_file_beside
from baselines.core.saved_model import save_run
from baselines.tiles import data
from baselines.tiles.model_builder import build_from_record
from baselines.tiles.predict import SavedRanker, ranking_rows
from baselines.tiles.run_records import read_run_file
from baselines.tiles.task import train
from baselines.tiles.tile_args import TrainArgs

LINEAR_MLP = '{"hidden_dim": 8, "op_embedding_dim": 4, "activation": "linear"}'


def read_csv_rows(path: Path) -> dict[str, list[int]]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["ID", "TopConfigs"]
    return {r[0]: [int(x) for x in r[1].split(";")] for r in rows[1:]}


def run_predictions(*flags: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "tiles_gen_predictions_csv.py"), *flags],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=300,
    )


def checkpoint_weights(model_dir: Path) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(str(model_dir / "variables" / "variables"))
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    return {
        k.removesuffix(suffix): reader.get_tensor(k)
        for k in reader.get_variable_to_shape_map()
        if k.endswith(suffix)
    }


def linear_mlp_scores(w: dict[str, np.ndarray], stats: dict, npz: Path) -> np.ndarray:
    """The linear MLP's forward pass in numpy, from a raw kernel file."""
    raw = np.load(npz)
    nodes = (signed_log(raw["node_feat"]) - stats["node"][0]) / stats["node"][1]
    configs = (signed_log(raw["config_feat"]) - stats["config"][0]) / stats["config"][1]
    embedded = w["op_encoder/embedding/embeddings"][raw["node_opcode"].astype(int)]
    ops = np.concatenate([embedded, nodes], 1) @ w["op_encoder/dense/kernel"]
    kernel = (ops + w["op_encoder/dense/bias"]).sum(0)
    x = np.concatenate([np.broadcast_to(kernel, (len(configs), kernel.size)), configs], 1)
    for layer in ("head/hidden/0", "head/hidden/1", "head/out"):
        x = x @ w[f"{layer}/kernel"] + w[f"{layer}/bias"]
    return x[:, 0]


def train_linear_mlp(root: Path, out_dir: Path, seed: int = 2, **flags) -> tuple[dict, Path]:
    args = TrainArgs(
        model="MLP",
        model_kwargs_json=LINEAR_MLP,
        epochs=2,
        configs=4,
        batch=4,
        lr=0.01,
        data_root=str(root),
        out_dir=str(out_dir),
        cache_dir=str(out_dir.parent / "cache"),
        seed=seed,
        **flags,
    )
    record = train(args, progress=False, log=lambda _: None)
    return record, out_dir / f"model_{args.run_hash()}"


def numpy_train_stats(root: Path) -> dict:
    train_files = sorted((root / "train").glob("*.npz"))
    return {
        "node": numpy_feature_stats(np.concatenate([np.load(f)["node_feat"] for f in train_files])),
        "config": numpy_feature_stats(
            np.concatenate([np.load(f)["config_feat"] for f in train_files])
        ),
    }


def numpy_test_scores(root: Path, model_dir: Path, stats: dict) -> dict[str, np.ndarray]:
    weights = checkpoint_weights(model_dir)
    expected = {}
    for f in sorted((root / "test").glob("*.npz")):
        scores = linear_mlp_scores(weights, stats, f)
        gaps = np.diff(np.sort(scores))
        # float32 scoring vs this float64 recomputation differ by ~1e-6: a gap of
        # 1e-5 keeps the expected order unambiguous (89 random scores in [0, 1]
        # have a smallest gap near 1e-4, so a larger margin fails by chance).
        assert gaps.size == 0 or gaps.min() > 1e-5, "near-tied scores: pick another seed"
        expected[f.stem] = scores
    return expected


@pytest.fixture(scope="module")
def linear_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("linear")
    root = write_random_root(work / "root")
    out = work / "out"
    record, model_dir = train_linear_mlp(root, out, results_csv=str(out / "results.csv"))
    stats = numpy_train_stats(root)
    expected = numpy_test_scores(root, model_dir, stats)
    return work, root, model_dir, record, stats, expected


def top5(scores: np.ndarray) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: scores[i])[:5]


def test_saved_statistics_are_fitted_on_train_only(linear_run):
    _, _, _, record, stats, _ = linear_run
    saved = record["feature_stats"]
    for kind in ("node", "config"):
        np.testing.assert_allclose(saved[f"{kind}_mean"], stats[kind][0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(saved[f"{kind}_std"], stats[kind][1], rtol=1e-5, atol=1e-5)


def test_training_outputs_rank_by_ascending_score(linear_run):
    work, _, _, record, _, expected = linear_run
    want = {f"tile:xla:{t}": top5(s) for t, s in expected.items()}
    assert read_csv_rows(work / "out" / "results.csv") == want
    assert {f"tile:xla:{t}": r for t, r in record["test_predictions"].items()} == want
    assert any(r != list(range(len(r))) for r in want.values())  # not file order


@pytest.mark.slow
def test_prediction_script_ranks_by_ascending_score(linear_run, tmp_path):
    _, root, model_dir, _, _, expected = linear_run
    proc = run_predictions(
        f"--dir={model_dir}", f"--data_root={root}", f"--output={tmp_path / 'p.csv'}", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    want = {f"tile:xla:{t}": top5(s) for t, s in expected.items()}
    assert read_csv_rows(tmp_path / "p.csv") == want


def test_prediction_normalizes_with_the_saved_train_statistics(linear_run):
    """Scores (not only their order) match: node and config statistics are train's."""
    _, root, model_dir, _, _, expected = linear_run
    raw_test = data.load_split(root / "test", progress=False)
    scores = SavedRanker.load(model_dir).score(raw_test, progress=False)
    for tile_id, s in zip(raw_test.tile_ids, scores):
        np.testing.assert_allclose(s, expected[tile_id], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_non_finite_model_is_refused_in_one_line(linear_run, tmp_path):
    _, root, model_dir, _, _, _ = linear_run
    record = read_run_file(run_file_beside(model_dir, "tiles_train.py"))
    broken = build_from_record(record)
    broken.load_weights(str(model_dir / "variables" / "variables"))
    broken.head.out.bias.assign([np.nan])
    nan_dir = tmp_path / "model_nan"
    save_run(broken, dict(record), nan_dir, tmp_path / "run_nan.jsonz")
    out = tmp_path / "p.csv"
    proc = run_predictions(
        f"--dir={nan_dir}", f"--data_root={root}", f"--output={out}", cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "NaN or infinite scores for 5 of 5" in last
    assert not out.exists()
    shutil.rmtree(nan_dir)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_every_score_consumer_refuses_non_finite_scores(bad):
    scores = [np.array([0.3, 0.1, 0.2]), np.array([1.0, bad])]
    with pytest.raises(PipelineError, match="1 of 2 kernels .first: b_2"):
        ranking_rows(["a_1", "b_2"], scores)
    with pytest.raises(PipelineError, match="NaN or infinite"):
        metrics.summarize(["a_1", "b_2"], scores, [np.array([1.0, 2.0, 3.0])] * 2)


def test_ranking_rows_list_the_lowest_scores_first():
    scores = [np.array([0.5, -2.0, 3.0, 0.0, 9.0, -1.0, 4.0]), np.array([2.0, 1.0])]
    rows = ranking_rows(["x_1", "y_2"], scores, top=5)
    # By hand: ascending scores -2.0 (1), -1.0 (5), 0.0 (3), 0.5 (0), 3.0 (2).
    assert rows == [("tile:xla:x_1", "1;5;3;0;2"), ("tile:xla:y_2", "1;0")]


# --- ensembles ------------------------------------------------------------------------


def z_scores(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return (x - x.mean()) / x.std() if x.std() > 0 else np.zeros_like(x)


def test_ensemble_of_hand_made_scores():
    # Kernel 1: member a orders 0<1<2, member b 2<1<0 at 10x the scale; on their raw
    # scales b would decide alone, standardized both count the same.
    a = [np.array([1.0, 2.0, 3.0]), np.array([5.0])]
    b = [np.array([30.0, 25.0, 10.0]), np.array([-1.0])]
    got = ensemble_scores([a, b])
    # z(a) = [-1.2247, 0, 1.2247] (std sqrt(2/3)); z(b) = [0.9806, 0.3922, -1.3728]
    # (mean 21.67, std 8.498); their mean:
    np.testing.assert_allclose(got[0], [-0.1221, 0.1961, -0.0740], atol=1e-4)
    np.testing.assert_array_equal(got[1], [0.0])  # one config: nothing to rank
    assert metrics.top_configs(got[0], 3) == [0, 2, 1]


def test_a_one_member_ensemble_ranks_exactly_like_the_model():
    rng = np.random.default_rng(0)
    member = [rng.normal(size=c).astype(np.float32) for c in (1, 2, 7, 300)]
    member.append(np.array([1.0, 1.0, 0.5, 1.0], np.float32))  # ties keep file order
    alone = [metrics.ranking_order(s) for s in member]
    together = [metrics.ranking_order(s) for s in ensemble_scores([member])]
    for x, y in zip(alone, together):
        np.testing.assert_array_equal(x, y)


@pytest.fixture(scope="module")
def second_linear_model(linear_run):
    work, root, _, _, stats, _ = linear_run
    _, model_dir = train_linear_mlp(root, work / "out_seed3", seed=3)
    return model_dir, numpy_test_scores(root, model_dir, stats)


@pytest.mark.slow
def test_prediction_script_ranks_an_ensemble_by_mean_z_score(
    linear_run, second_linear_model, tmp_path
):
    _, root, model_dir, _, _, expected = linear_run
    other_dir, other = second_linear_model
    proc = run_predictions(
        f"--dir={model_dir},{other_dir}",
        f"--data_root={root}",
        f"--output={tmp_path / 'e.csv'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    want = {
        f"tile:xla:{t}": top5((z_scores(expected[t]) + z_scores(other[t])) / 2) for t in expected
    }
    assert want != {f"tile:xla:{t}": top5(s) for t, s in expected.items()}  # it matters
    assert read_csv_rows(tmp_path / "e.csv") == want


@pytest.mark.slow
@pytest.mark.parametrize("case", ["missing_model", "missing_run_file", "empty_item", "twice"])
def test_bad_model_lists_are_refused_in_one_line(linear_run, tmp_path, case):
    _, root, model_dir, _, _, _ = linear_run
    dirs = {
        "missing_model": f"{model_dir},{tmp_path / 'model_nope'}",
        "missing_run_file": f"{model_dir},{tmp_path / 'model_copy'}",
        "empty_item": f"{model_dir},,{model_dir}",
        "twice": f"{model_dir},{model_dir}",
    }[case]
    if case == "missing_run_file":
        # A model folder without its run file inside and none beside it.
        shutil.copytree(model_dir, tmp_path / "model_copy")
        (tmp_path / "model_copy" / RUN_IN_MODEL).unlink()
    message = {
        "missing_model": "model folder not found",
        "missing_run_file": "run file not found",
        "empty_item": "--dir: empty item",
        "twice": "listed twice",
    }[case]
    out = tmp_path / "p.csv"
    proc = run_predictions(f"--dir={dirs}", f"--data_root={root}", f"--output={out}", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and message in last, last
    assert not out.exists()
