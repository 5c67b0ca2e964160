"""layout_beam_experiments.py and baselines/jobs/layout_spec.py: layout sweeps, ranked by tau."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_run_file as read_run
from conftest import run_repo_script

import layout_beam_experiments as beam_script
from baselines.core.errors import PipelineError
from baselines.jobs import sweeps
from baselines.jobs.layout_spec import ANY_LAYOUT
from baselines.layout.layout_args import LayoutTrainArgs

REPO = Path(__file__).resolve().parents[1]
SCRIPT = str(REPO / "layout_beam_experiments.py")
# Small and quick on the toy set: tiny model, few configurations.
TINY = {"model_kwargs_json": '{"hidden_dim": 8, "op_embed_dim": 8}', "max_configs": 12}
TINY |= {"configs": 4, "epochs": 1, "source": "xla", "search": "default"}


def run(script: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    # conftest sets TF_CPP_MIN_LOG_LEVEL=3, which the child inherits.
    return run_repo_script(script, *argv, cwd=cwd, timeout=600)


# --- what a command line asks for ------------------------------------------------------------


def test_seeds_of_the_baseline_recipe_with_overrides(tmp_path):
    todo = beam_script.plan(
        ["--sweep=seeds", "--num_seeds=3", f"--flagfile={REPO / 'configs/layout/baseline.flags'}"]
        + ["--epochs=2", "--source=nlp", f"--out_dir={tmp_path}"]
    )
    # configs/layout/baseline.flags written out: upstream's defaults, whole graphs, duplicates.
    recipe = dict(model="ResModel", early_stop=25, configs=16, batch=8, lr=1e-3, clip_norm=1e-2)
    recipe |= dict(keep_nodes=5000, losses="ListMLELoss:1", prune_hops=None)
    recipe |= dict(drop_duplicates=False, micro_batch=1)
    recipe |= dict(epochs=2, source="nlp", out_dir=str(tmp_path))
    assert todo.runs == [LayoutTrainArgs(**recipe, seed=s) for s in range(3)]
    assert todo.out_dir == tmp_path and todo.repeats == 0 and todo.beam_args == []


def test_json_grid_entries_are_typed_and_checked(tmp_path):
    path = tmp_path / "grid.json"
    grid = [
        {"model": "LayoutSAGE", "lr": 1, "prune_hops": None},
        {"model": "ResModel", "model_kwargs_json": {"hidden_dim": 8}, "search": "random"},
    ]
    path.write_text(json.dumps(grid))
    todo = beam_script.plan([f"--sweep={path}", "--epochs=3", f"--out_dir={tmp_path}"])
    assert todo.runs == [
        LayoutTrainArgs(
            model="LayoutSAGE", lr=1.0, prune_hops=None, epochs=3, out_dir=str(tmp_path)
        ),
        LayoutTrainArgs(
            model_kwargs_json='{"hidden_dim": 8}', search="random", epochs=3, out_dir=str(tmp_path)
        ),
    ]
    assert isinstance(todo.runs[0].lr, float)


@pytest.mark.parametrize(
    "content, message",
    [
        ('[{"prune_hops": "x"}]', "--prune_hops must be an integer or null"),
        ('[{"max_configs": 1.5}]', "--max_configs must be an integer or null"),
        ('[{"drop_duplicates": 0}]', "--drop_duplicates must be true or false"),
        ('[{"sourse": "nlp"}]', r"unknown flag sourse \(did you mean source"),
        ('{"seed": 1}', 'e.g. \\[{"model": "ResModel"}'),
    ],
)
def test_bad_grid_entries_are_refused(tmp_path, content, message):
    path = tmp_path / "grid.json"
    path.write_text(content)
    with pytest.raises(PipelineError, match=message):
        sweeps.load_sweep(ANY_LAYOUT, str(path))


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "--sweep: give one of seeds or a FILE.json"),
        (["--sweep=paper"], "unknown sweep 'paper'; use seeds or a FILE.json"),
        (["--sweep=seeds", "--num_seeds=2", "--seed=4"], "--seed: not with --sweep=seeds"),
    ],
)
def test_layout_sweeps_have_no_default_grid(argv, message):
    with pytest.raises(PipelineError, match=message):
        beam_script.plan(argv)


def test_the_sweep_script_never_loads_tile_code():
    code = (
        "import sys, layout_beam_experiments as s; s.plan(['--sweep=seeds', '--num_seeds=2']); "
        "print(sorted(m for m in sys.modules if m.startswith('baselines.tiles')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


# --- the summary: by validation Kendall's tau, higher first ------------------------------------


def result(index, tau, opa, seed, source="xla", out="/o"):
    args = LayoutTrainArgs(seed=seed, source=source, out_dir=out)
    h = args.run_hash()
    return {
        "index": index,
        "run_hash": h,
        "flags": args.to_dict(),
        "model_dir": f"{out}/model_{h}",
        "status": "ok",
        "val_tau": tau,
        "val_opa": opa,
        "best_epoch": 1,
        "epochs_run": 2,
        "wall_s": 3.0,
    }


def failure(index, seed):
    args = LayoutTrainArgs(seed=seed, out_dir="/o")
    return {
        "index": index,
        "run_hash": args.run_hash(),
        "flags": args.to_dict(),
        "model_dir": "",
        "status": "error",
        "error": "--model: unknown model 'X'",
    }


def test_summary_ranks_by_tau_higher_first_then_failures(tmp_path):
    results = [
        result(0, 0.10, 0.70, seed=0),
        failure(1, seed=1),
        result(2, 0.40, 0.55, seed=2),
        result(3, math.nan, 0.90, seed=3),
        result(4, 0.40, 0.60, seed=4),  # ties with seed 2 on tau, higher OPA
        result(5, -0.20, 0.40, seed=5),
    ]
    csv_path, md_path = sweeps.write_summary(ANY_LAYOUT, tmp_path, results, ensemble_top=3)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["seed"] for r in rows] == ["4", "2", "0", "5", "3", "1"]
    assert [r["val_tau"] for r in rows[:5]] == ["0.4000", "0.4000", "0.1000", "-0.2000", "nan"]
    assert [r["status"] for r in rows] == ["ok"] * 5 + ["error"]
    assert [r["rank"] for r in rows] == ["1", "2", "3", "4", "5", ""]
    assert list(rows[0])[:4] == ["rank", "status", "run_hash", "seed"]
    assert "val_top5_err" not in rows[0] and rows[0]["val_opa"] == "0.6000"
    md = md_path.read_text()
    assert "6 runs: 5 trained, 1 failed" in md and "validation Kendall's tau" in md
    dirs = ",".join(r["model_dir"] for r in rows[:3])
    assert f"python layout_gen_predictions_csv.py --dir {dirs}" in md
    assert "## Ensemble of the best 3" in md


def test_the_ensemble_keeps_to_the_best_runs_collection():
    results = [
        result(0, 0.5, 0.7, seed=0, source="nlp"),
        result(1, 0.6, 0.7, seed=0, source="xla"),
        result(2, 0.3, 0.7, seed=1, source="xla"),
    ]
    ok, _ = sweeps.split_results(ANY_LAYOUT, results)
    assert sweeps.ensemble_command(ANY_LAYOUT, ok, 3) == (
        f"python layout_gen_predictions_csv.py --dir {results[1]['model_dir']},"
        f"{results[2]['model_dir']}"
    )


# --- a real sweep on Beam's local runner ------------------------------------------------------


@pytest.mark.slow
def test_toy_seed_sweep_trains_as_layout_train_and_reports_a_failed_run(tmp_path):
    out = tmp_path / "out"
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([{"seed": 0}, {"seed": 1}, {"model": "NoSuchModel"}]))
    flags = [f"--{k}={v}" for k, v in TINY.items()]
    proc = run(
        "layout_beam_experiments.py", f"--sweep={grid}", *flags, f"--out_dir={out}", cwd=tmp_path
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("error: 1 of 3 runs failed")
    assert "on DirectRunner (2 workers, multi_processing" in proc.stdout

    # The hashes layout_train.py gives these flags: md5 of the sorted flags a layout run
    # has hashed since its first runs (not out_dir and cache_dir, which say where files
    # go; the flags added later count only off their defaults, and are at them here).
    hashed = (
        "source", "search", "epochs", "early_stop", "configs", "max_configs", "batch", "lr",
        "clip_norm", "keep_nodes", "model", "model_kwargs_json", "losses", "seed", "data_root",
        "prune_hops", "drop_duplicates",
    )  # fmt: skip

    def hash_of(**extra) -> str:
        flags = {**LayoutTrainArgs().to_dict(), **TINY, **extra}
        kept = {k: flags[k] for k in hashed}
        return hashlib.md5(json.dumps(kept, sort_keys=True).encode()).hexdigest()

    hashes = [hash_of(seed=0), hash_of(seed=1), hash_of(model="NoSuchModel")]
    records = {h: read_run(out / f"run_{h}.jsonz") for h in hashes[:2]}
    assert all((out / f"model_{h}" / "saved_model.pb").is_file() for h in hashes[:2])
    assert not list(out.glob(f"*{hashes[2]}*"))

    with open(out / sweeps.SUMMARY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["status"] for r in rows] == ["ok", "ok", "error"]
    assert rows[2]["run_hash"] == hashes[2] and rows[2]["error"].startswith("--model: ")
    by_tau = sorted(hashes[:2], key=lambda h: -records[h]["val"]["kendall_tau"])
    assert [r["run_hash"] for r in rows[:2]] == by_tau
    for row in rows[:2]:
        val = records[row["run_hash"]]["val"]
        assert float(row["val_tau"]) == pytest.approx(val["kendall_tau"], abs=5e-5)
        assert float(row["val_opa"]) == pytest.approx(val["opa"], abs=5e-5)
    md = (out / sweeps.SUMMARY_MD).read_text()
    assert "3 runs: 2 trained, 1 failed" in md
    dirs = ",".join(str(out / f"model_{h}") for h in by_tau)
    command = f"python layout_gen_predictions_csv.py --dir {dirs}"
    assert command in md

    # layout_train.py with the same flags: the same run file name, the same training.
    alone = tmp_path / "alone"
    done = run("layout_train.py", *flags, "--seed=0", f"--out_dir={alone}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    solo = read_run(alone / f"run_{hashes[0]}.jsonz")
    assert solo["val"]["kendall_tau"] == pytest.approx(records[hashes[0]]["val"]["kendall_tau"])

    # The summary's ensemble command runs.
    argv = command.split()[2:] + [f"--output={tmp_path / 'ensemble.csv'}"]
    pred = run("layout_gen_predictions_csv.py", *argv, cwd=tmp_path)
    assert pred.returncode == 0, pred.stderr[-3000:]
    with open(tmp_path / "ensemble.csv", newline="") as f:
        ids = [r["ID"] for r in csv.DictReader(f)]
    assert ids and all(re.fullmatch(r"layout:xla:default:\w+", i) for i in ids)
