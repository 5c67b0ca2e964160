"""tiles_gen_predictions_csv.py end to end, on toy and real data, and its refusals."""

from __future__ import annotations

import csv
import functools
import gzip
import json
import re
import shutil

import numpy as np
import pytest
from conftest import run_repo_script

from baselines.tiles import data
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import assemble_batch, graph_from_batch, to_tensors
from baselines.tiles.model_builder import load_trained_model
from baselines.tiles.predict import ConfigScorer, SavedRanker, plan_calls
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT

run_script = functools.partial(run_repo_script, timeout=600)


def read_rows(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["ID", "TopConfigs"]
    return {r[0]: [int(x) for x in r[1].split(";")] for r in rows[1:]}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A toy-data model trained from a foreign working directory."""
    work = tmp_path_factory.mktemp("work")
    return work, train_toy_model(work, "LateJoinSAGE", epochs=2, out="out")


def train_toy_model(work, model: str, epochs: int, out: str):
    """Runs tiles_train.py on the bundled toy set from `work`; returns the model folder."""
    proc = run_script(
        "tiles_train.py",
        f"--model={model}",
        "--toy_data=True",
        f"--epochs={epochs}",
        f"--data_root={BUNDLED_TOY_ROOT}",
        f"--out_dir={out}",
        "--cache_dir=cache",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (model_dir,) = (work / out).glob("model_*")
    return model_dir


@pytest.mark.slow
def test_end_to_end_toy_training_predictions_submission(trained):
    work, model_dir = trained
    proc = run_script("tiles_gen_predictions_csv.py", "--dir", str(model_dir), cwd=work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "from the run file" in proc.stdout
    rows = read_rows(work / "predictions_output_model.csv")
    test = data.load_split(BUNDLED_TOY_ROOT / "test", progress=False)
    assert set(rows) == {f"tile:xla:{t}" for t in test.tile_ids}
    for tid, c in zip(test.tile_ids, test.num_configs):
        ranking = rows[f"tile:xla:{tid}"]
        assert len(ranking) == min(5, c) and len(set(ranking)) == len(ranking)
        assert all(0 <= i < c for i in ranking)

    proc = run_script("create_kaggle_csv.py", f"--data_root={BUNDLED_TOY_ROOT}", cwd=work)
    assert proc.returncode == 2 and "kaggle competitions download" in proc.stderr  # no sample
    assert not (work / "predictions_kaggle.csv").exists()
    proc = run_script(
        "create_kaggle_csv.py", f"--data_root={BUNDLED_TOY_ROOT}", "--allow_missing", cwd=work
    )
    assert proc.returncode == 0, proc.stderr
    assert read_rows(work / "predictions_kaggle.csv") == rows


@pytest.mark.slow
def test_predictions_for_every_real_test_sample(trained, real_samples, tmp_path):
    _, model_dir = trained
    out = tmp_path / "real.csv"
    root = real_samples / "tile_xla"
    proc = run_script(
        "tiles_gen_predictions_csv.py",
        f"--dir={model_dir}",
        f"--data_root={root}",
        f"--output={out}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = read_rows(out)
    files = sorted((root / "test").glob("*.npz"))
    assert len(rows) == len(files) == 6
    for f in files:
        c = np.load(f)["config_feat"].shape[0]
        ranking = rows[f"tile:xla:{f.stem}"]
        assert len(ranking) == min(5, c) and len(set(ranking)) == len(ranking)
        assert all(0 <= i < c for i in ranking)


@pytest.mark.slow
def test_valid_split_reports_errors_per_program(trained, tmp_path):
    _, model_dir = trained
    proc = run_script(
        "tiles_gen_predictions_csv.py",
        f"--dir={model_dir}",
        "--split=valid",
        f"--output={tmp_path / 'v.csv'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| model | program"))
    assert "top5_err" in lines[header] and "kaggle_score" in lines[header]
    rows = [line.strip("|").split("|") for line in lines[header + 2 :] if line.startswith("|")]
    assert rows[0][1].strip() == "ALL"
    valid = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    programs = {t.rpartition("_")[0] for t in valid.tile_ids}
    assert [r[1].strip() for r in rows[1:]] == sorted(programs)
    assert sum(int(r[2]) for r in rows[1:]) == int(rows[0][2]) == len(valid)


@pytest.mark.slow
def test_chunked_compiled_scoring_ranks_like_the_simple_path(trained, sample_root):
    _, model_dir = trained
    model, _, stats = load_trained_model(model_dir)
    split = stats.normalize_split(data.load_split(sample_root / "test", progress=False))
    max_configs = int(split.num_configs.max()) // 3
    scorer = ConfigScorer(model, max_elements=1024, max_configs=max_configs)  # many chunks
    chunks = [
        i
        for c in plan_calls(split.num_configs, split.num_nodes, 1024, max_configs)
        for i, _, _ in c.ranges
    ]
    assert max(chunks.count(i) for i in set(chunks)) >= 3  # some kernels cut in 3+ chunks
    default_plan = plan_calls(split.num_configs, split.num_nodes, 1 << 15, 8192)
    assert any(len(c.ranges) > 1 for c in default_plan)  # the default scorer packs kernels
    packed = ConfigScorer(model).score_split(split, progress=False)  # several kernels a call
    for i in range(len(split)):
        c = int(split.num_configs[i])
        simple = model.forward(
            graph_from_batch(to_tensors(assemble_batch(split, [i], [np.arange(c)], c))), c
        ).numpy()[0]
        fast = scorer.score_kernel(split, i)
        np.testing.assert_allclose(fast, simple, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(packed[i], simple, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(
            np.argsort(fast, kind="stable")[:5], np.argsort(simple, kind="stable")[:5]
        )
    assert scorer.traces == 1


def test_call_plan_covers_every_config_once_within_bounds():
    rng = np.random.default_rng(0)
    num_configs = rng.integers(1, 3000, 200)
    num_nodes = rng.integers(2, 400, 200)
    calls = plan_calls(num_configs, num_nodes, max_elements=20_000, max_configs=1000)
    covered = [np.zeros(c, int) for c in num_configs]
    for call in calls:
        assert len(call.ranges) * call.slots <= 1000
        nodes = sum(int(num_nodes[i]) for i, _, _ in call.ranges)
        assert nodes * call.slots <= 20_000 or call.slots == 1 or len(call.ranges) == 1
        for i, start, stop in call.ranges:
            assert 0 < stop - start <= call.slots
            covered[i][start:stop] += 1
    assert all(np.all(c == 1) for c in covered)
    assert any(len(call.ranges) > 1 for call in calls)  # small kernels were packed


def _expect_refusal(proc, message, output):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and re.search(message, last), proc.stderr
    assert not output.exists()


def _edit_run_file(path, **changes):
    with gzip.open(path) as f:
        record = json.loads(f.read())
    record.update(changes)
    with gzip.open(path, "wb") as f:
        f.write(json.dumps(record).encode())


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, message",
    [
        ("missing_dir", "model folder not found"),
        ("missing_run_file", "run file not found"),
        ("unknown_class", "unknown model 'FancyNet'"),
        ("shape_mismatch", r"is \[64, 64\] in the saved model but \[8, 8\] in the rebuilt"),
        ("count_mismatch", r"saved variable convs/1/\S+ \[.*\] has no counterpart .*saved 18 var"),
        ("empty_test_split", "split has no .npz files"),
        ("missing_data_root", "--data_root: "),
        ("other_runs_file", "belongs to another model than"),
    ],
)
def test_bad_inputs_refused_in_one_line(trained, tmp_path, case, message):
    _, trained_dir = trained
    model_dir = tmp_path / trained_dir.name
    shutil.copytree(trained_dir, model_dir)
    run_file = tmp_path / trained_dir.name.replace("model_", "run_")
    shutil.copy(trained_dir.parent / f"{run_file.name}.jsonz", f"{run_file}.jsonz")
    run_file = run_file.with_name(run_file.name + ".jsonz")
    inside = model_dir / "run.jsonz"  # the run file's copy saved with the model: read first
    assert inside.is_file()
    flags = []
    if case == "missing_dir":
        shutil.rmtree(model_dir)
    elif case == "missing_run_file":
        run_file.unlink()
        inside.unlink()
    elif case == "unknown_class":
        _edit_run_file(inside, model="FancyNet")
    elif case == "shape_mismatch":
        _edit_run_file(inside, model_kwargs={"hidden_dim": 8})
    elif case == "count_mismatch":
        _edit_run_file(inside, model_kwargs={"num_layers": 1})
    elif case == "other_runs_file":
        # A model folder of the older layout (no copy inside) beside a run file
        # written for another model: its fingerprint does not match.
        inside.unlink()
        _edit_run_file(run_file, model_fingerprint="0" * 32)
    elif case == "empty_test_split":
        (tmp_path / "root" / "test").mkdir(parents=True)
        flags = [f"--data_root={tmp_path / 'root'}"]
    elif case == "missing_data_root":
        flags = [f"--data_root={tmp_path / 'nowhere'}"]
    output = tmp_path / "p.csv"
    proc = run_script(
        "tiles_gen_predictions_csv.py",
        f"--dir={model_dir}",
        f"--output={output}",
        *flags,
        cwd=tmp_path,
    )
    _expect_refusal(proc, message, output)


@pytest.mark.slow
def test_feature_stats_travel_with_the_model(trained):
    """Prediction uses the saved train statistics, not ones refitted on test."""
    _, model_dir = trained
    _, record, stats = load_trained_model(model_dir)
    train = data.load_split(BUNDLED_TOY_ROOT / "train", progress=False)
    refit = FeatureStats.fit_split(train)
    np.testing.assert_allclose(stats.node_mean, refit.node_mean, rtol=1e-6)
    assert record["args"]["max_files"] == 100  # --toy_data=True, recorded in the new spelling


@pytest.mark.slow
def test_tiles_evaluate_reports_each_model_and_the_ensemble(trained, tmp_path):
    work, model_dir = trained
    mlp_dir = train_toy_model(work, "MLP", epochs=1, out="out_mlp")
    proc = run_script(
        "tiles_evaluate.py", f"--dirs={model_dir},{mlp_dir}", "--output=ev", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(tmp_path / "ev.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert (tmp_path / "ev.md").read_text() in proc.stdout
    for figure in ("ev_per_program.png", "ev_pred_vs_true.png"):
        assert (tmp_path / figure).read_bytes().startswith(b"\x89PNG\r\n\x1a\n"), figure
        assert figure in proc.stdout  # the path it wrote is printed

    valid = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    runtimes = [k.config_runtime / k.config_runtime_normalizers for k in valid.kernels()]
    members = [SavedRanker.load(d).score(valid, progress=False) for d in (model_dir, mlp_dir)]

    def z(x):
        x = np.asarray(x, np.float64)
        return (x - x.mean()) / x.std() if x.std() > 0 else np.zeros_like(x)

    ensemble = [(z(a) + z(b)) / 2 for a, b in zip(*members)]
    programs = sorted({str(t).rpartition("_")[0] for t in valid.tile_ids})
    labels = [f"LateJoinSAGE {model_dir.name}", f"MLP {mlp_dir.name}", "ensemble"]
    assert [(r["model"], r["program"]) for r in rows] == [
        (label, p) for label in labels for p in ["ALL", *programs]
    ]
    for label, scores in zip(labels, [*members, ensemble]):
        for k in (1, 5, 10):
            errors = [
                r[sorted(range(len(s)), key=lambda i: s[i])[:k]].min() / r.min() - 1
                for s, r in zip(scores, runtimes)
            ]
            row = next(r for r in rows if r["model"] == label and r["program"] == "ALL")
            assert float(row[f"top{k}_err"]) == pytest.approx(np.mean(errors), abs=1e-4)


@pytest.mark.slow
def test_an_output_folder_that_does_not_exist_is_made_one_under_a_file_refused_first(
    trained, tmp_path
):
    _, model_dir = trained
    nested = tmp_path / "new" / "deeper" / "p.csv"
    made = run_script(
        "tiles_gen_predictions_csv.py", f"--dir={model_dir}", f"--output={nested}", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr[-2000:]
    assert len(read_rows(nested)) == 30  # every toy test kernel
    # Under a regular file no folder can be made: refused before any data is read.
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    refused = run_script(
        "tiles_gen_predictions_csv.py",
        f"--dir={model_dir}",
        f"--output={blocker / 'sub' / 'p.csv'}",
        cwd=tmp_path,
    )
    _expect_refusal(refused, "--output: ", blocker / "sub" / "p.csv")
    assert "data:" not in refused.stdout  # nothing was read
    evaluated = run_script(
        "tiles_evaluate.py",
        f"--dirs={model_dir}",
        f"--output={blocker / 'eval' / 'evaluation'}",
        cwd=tmp_path,
    )
    _expect_refusal(evaluated, "--output: ", blocker / "eval" / "evaluation.md")
    assert "data:" not in evaluated.stdout
