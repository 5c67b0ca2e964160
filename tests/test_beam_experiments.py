"""tiles_beam_experiments.py and baselines/jobs/tile_spec.py: sweeps, overrides, summaries, Beam."""

from __future__ import annotations

import csv
import functools
import itertools
import json
import math
import re

import pytest
from conftest import TOY_ROOT, run_repo_script

import tiles_beam_experiments as beam_script
from baselines.core.errors import PipelineError
from baselines.jobs import sweeps, tile_spec
from baselines.jobs.tile_spec import TILE_XLA
from baselines.tiles import model_builder
from baselines.tiles.model_builder import build_from_record, load_trained_model
from baselines.tiles.run_records import read_run_file
from baselines.tiles.tile_args import TrainArgs

# Upstream's sweep, written out here from its source (tpu_graphs tiles_beam_experiments.py):
# (model, kwargs) rows crossed with losses x run ids x clip norms x learning rates.
UPSTREAM_GNN_KWARGS = [
    {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64},
    {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64},
    {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128},
    {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128},
]
UPSTREAM_MLP_KWARGS = [
    {"op_embed_dim": 64, "hidden_dim": 64, "mlp_layers": 2},
    {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 2},
    {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 3},
    {"op_embed_dim": 256, "hidden_dim": 128, "mlp_layers": 3},
]
UPSTREAM_GNNS = ["EarlyJoinSAGE", "LateJoinSAGE", "EarlyJoinResGCN", "LateJoinResGCN"]
UPSTREAM_LOSSES = ["ListMLELoss:1,MSE:0.02", "MSE:1", "ListMLELoss:1"]


run_script = functools.partial(run_repo_script, "tiles_beam_experiments.py")


# --- the paper grid --------------------------------------------------------------------


@pytest.mark.slow
def test_paper_grid_is_upstreams():
    sweep = tile_spec.paper_sweep()
    rows = [("MLP", kw) for kw in UPSTREAM_MLP_KWARGS] + [
        (m, kw) for m in UPSTREAM_GNNS for kw in UPSTREAM_GNN_KWARGS
    ]
    assert len(rows) == 20
    expected = [
        (model, kw, loss, run_id, clip, lr)
        for model, kw in rows
        for loss in UPSTREAM_LOSSES
        for run_id in ("0", "1", "2")
        for clip in (1e-3, 100.0)
        for lr in (1e-2, 1e-3)
    ]
    got = [
        (
            e["model"],
            json.loads(e["model_kwargs_json"]),
            e["losses"],
            e["run_id"],
            e["clip_norm"],
            e["lr"],
        )
        for e in sweep.entries
    ]
    assert got == expected and len(got) == 20 * 3 * 3 * 2 * 2
    assert sweep.base == {
        "out_dir": "~/out/tpugraphs_tiles/beam",
        "test_mode": "metrics",
        "validate_batches": 50,
        "early_stop": 10,
        "epochs": 500,
        "configs": 8,
        "batch": 10,
        "eval_every": 2,
    }


def test_every_paper_run_builds(tmp_path):
    runs, repeats = sweeps.expand_runs(
        TILE_XLA, tile_spec.paper_sweep(), {"out_dir": str(tmp_path)}
    )
    assert repeats == 0 and len({r.run_hash() for r in runs}) == len(runs) == 720
    # validate() builds the model and parses the losses: once per distinct combination;
    # the rest differ in lr, clip_norm and run_id only, checked here directly.
    seen = set()
    for args in runs:
        key = (args.model, args.model_kwargs_json, args.losses)
        if key not in seen:
            seen.add(key)
            args.validate()
        assert args.lr > 0 and args.clip_norm > 0 and args.run_id in ("0", "1", "2")
    assert len(seen) == 20 * 3


# --- upstream kwarg names in models.build_model --------------------------------------------


def test_upstream_kwarg_aliases_build_the_same_model():
    upstream = {"num_gnns": 2, "op_embed_dim": 16, "hidden_dim": 8, "hidden_activation": "relu"}
    ours = {"num_layers": 2, "op_embedding_dim": 16, "hidden_dim": 8, "activation": "relu"}
    a = model_builder.build_model("EarlyJoinSAGE", 4, upstream)
    b = model_builder.build_model("EarlyJoinSAGE", 4, ours)
    assert a.get_config() == b.get_config()
    assert a.get_config()["num_layers"] == 2 and a.get_config()["op_embedding_dim"] == 16


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        ("EarlyJoinSAGE", {"num_gnns": 2, "num_layers": 2}, "num_gnns is upstream's name for"),
        ("MLP", {"op_embed_dim": 8, "op_embedding_dim": 8}, "give one of them, not both"),
        ("LateJoinGAT", {"hidden_activation": "relu", "activation": "relu"}, "not both"),
        ("MLP", {"num_gnns": 2}, r"num_gnns \(= num_layers\) means nothing for MLP"),
        ("MLP", {"mlp_layers": 2, "final_mlp_layers": 2}, "give one of them, not both"),
        ("LateJoinResGCN", {"mlp_layers": 2}, "mlp_layers means nothing for LateJoinResGCN"),
        ("MLP", {"directed": True}, "directed means nothing for MLP"),
    ],
)
def test_alias_conflicts_and_missing_upstream_kwargs_are_refused(name, kwargs, message):
    with pytest.raises(PipelineError, match=message):
        model_builder.build_model(name, 4, kwargs)


def test_run_files_with_upstream_names_and_older_ones_rebuild():
    record = {"model": "LateJoinSAGE", "configs": 3, "opcode_vocab_size": 256}
    aliased = build_from_record({**record, "model_kwargs": {"num_gnns": 1, "op_embed_dim": 8}})
    older = build_from_record({**record, "model_kwargs": {"num_layers": 1, "op_embedding_dim": 8}})
    shapes = [[tuple(v.shape) for v in m.trainable_variables] for m in (aliased, older)]
    assert shapes[0] == shapes[1] and len(shapes[0]) > 0


# --- sweep expansion, overrides, seeds, files -------------------------------------------------


def test_overrides_win_over_entries_which_win_over_the_base():
    sweep = sweeps.Sweep(
        "t", {"epochs": 5, "lr": 0.1, "batch": 3}, ({"epochs": 7}, {"lr": 0.2}, {"batch": 4})
    )
    runs, repeats = sweeps.expand_runs(TILE_XLA, sweep, {"lr": 0.3})
    assert repeats == 0
    assert [(r.epochs, r.lr, r.batch) for r in runs] == [(7, 0.3, 3), (5, 0.3, 3), (5, 0.3, 4)]
    # An override that makes two entries the same run keeps the first one only.
    runs, repeats = sweeps.expand_runs(TILE_XLA, sweep, {"epochs": 1, "batch": 2})
    assert repeats == 1 and [(r.epochs, r.lr, r.batch) for r in runs] == [(1, 0.1, 2), (1, 0.2, 2)]


@pytest.mark.slow
def test_command_line_order_flagfile_then_flags(tmp_path):
    recipe = tmp_path / "r.flags"
    recipe.write_text("--model=MLP\n--epochs=3\n--lr=0.01\n")
    todo = beam_script.plan(
        ["--sweep=seeds", "--num_seeds=3", "--epochs=9", f"--flagfile={recipe}", "--lr=0.5"]
        + [f"--out_dir={tmp_path / 'out'}", "--runner=DirectRunner"]
    )
    expected = [
        TrainArgs(model="MLP", epochs=3, lr=0.5, seed=s, out_dir=str(tmp_path / "out"))
        for s in range(3)
    ]
    assert todo.runs == expected and todo.beam_args == ["--runner=DirectRunner"]
    assert todo.out_dir == tmp_path / "out"


@pytest.mark.slow
def test_paper_debug_runs_the_first_two_with_overrides(tmp_path):
    todo = beam_script.plan(["--debug", "--epochs=1", f"--out_dir={tmp_path}"])
    assert todo.sweep.name == "paper" and len(todo.runs) == 2
    first = TrainArgs(
        model="MLP",
        model_kwargs_json='{"op_embed_dim": 64, "hidden_dim": 64, "mlp_layers": 2}',
        losses="ListMLELoss:1,MSE:0.02",
        run_id="0",
        clip_norm=1e-3,
        lr=1e-2,
        out_dir=str(tmp_path),
        test_mode="metrics",
        validate_batches=50,
        early_stop=10,
        epochs=1,
        configs=8,
        batch=10,
        eval_every=2,
    )
    assert todo.runs == [first, TrainArgs(**{**first.to_dict(), "lr": 1e-3})]


def test_sweep_file_entries_are_checked_and_typed(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            [
                {"model": "MLP", "lr": 1, "toy_data": True},
                {"model": "EarlyJoinSAGE", "model_kwargs_json": {"num_gnns": 2}},
            ]
        )
    )
    runs, _ = sweeps.expand_runs(TILE_XLA, sweeps.load_sweep(TILE_XLA, str(path)), {"epochs": 2})
    assert runs == [
        TrainArgs(model="MLP", lr=1.0, toy_data=True, epochs=2),
        TrainArgs(model="EarlyJoinSAGE", model_kwargs_json='{"num_gnns": 2}', epochs=2),
    ]
    assert isinstance(runs[0].lr, float)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "not found"),
        ('[{"model": "MLP"}', "is not valid JSON"),
        ('{"model": "MLP"}', "must hold a JSON list of objects"),
        ('[{"model": "MLP"}, 3]', "must hold a JSON list of objects"),
        ("[]", "lists no runs"),
        ('[{"model": "MLP"}, {"modle": "MLP"}]', r"run 2: unknown flag modle \(did you mean model"),
        ('[{"epochs": "3"}]', "--epochs must be an integer"),
        ('[{"toy_data": 1}]', "--toy_data must be true or false"),
        ('[{"lr": "fast"}]', "--lr must be a number"),
        ('[{"model": 3}]', "--model must be a string"),
    ],
)
def test_bad_sweep_files_are_refused(tmp_path, content, message):
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(PipelineError, match=message):
        sweeps.load_sweep(TILE_XLA, str(path))


@pytest.mark.parametrize(
    "name, num_seeds, message",
    [
        ("seeds", 0, "--num_seeds: must be at least 1, got 0"),
        ("seeds", None, "needs --num_seeds"),
        ("paper", 2, "--num_seeds: only for --sweep=seeds"),
        ("grid", None, "unknown sweep 'grid'"),
    ],
)
def test_bad_sweep_names_and_seed_counts_are_refused(name, num_seeds, message):
    with pytest.raises(PipelineError, match=message):
        sweeps.load_sweep(TILE_XLA, name, num_seeds)


def test_seeds_sweep_refuses_a_seed_override_and_mixed_out_dirs():
    with pytest.raises(PipelineError, match="--seed: not with --sweep=seeds"):
        sweeps.expand_runs(TILE_XLA, sweeps.seeds_sweep(2), {"seed": 3})
    runs, _ = sweeps.expand_runs(
        TILE_XLA, sweeps.Sweep("t", {}, ({"out_dir": "a"}, {"out_dir": "b"})), {}
    )
    with pytest.raises(PipelineError, match="write to 2 folders"):
        sweeps.summary_dir(runs)


# --- results, sorting, summary ---------------------------------------------------------------


def result(index, top1, top5, top10, lr, out="/o"):
    args = TrainArgs(lr=lr, out_dir=out)
    h = args.run_hash()
    return {
        "index": index,
        "run_hash": h,
        "flags": args.to_dict(),
        "model_dir": f"{out}/model_{h}",
        "status": "ok",
        "val_error": {"1": top1, "5": top5, "10": top10},
        "val_opa": 0.5 + index / 100,
        "best_epoch": index,
        "epochs_run": 3,
        "wall_s": 10.0 + index,
    }


def failure(index, lr, message):
    args = TrainArgs(lr=lr, out_dir="/o")
    return {
        "index": index,
        "run_hash": args.run_hash(),
        "flags": args.to_dict(),
        "model_dir": "",
        "status": "error",
        "error": message,
    }


def sample_results():
    return [
        result(0, 0.5, 0.30, 0.1, lr=0.1),
        failure(1, 0.2, "--losses: cannot | parse\nit"),
        result(2, 0.9, 0.10, 0.1, lr=0.3),
        result(3, math.nan, math.nan, math.nan, lr=0.4),
        result(4, 0.4, 0.10, 0.2, lr=0.5),  # ties with index 2 on top-5, better top-1
        failure(5, 0.6, "ValueError: boom"),
    ]


def test_results_sort_by_top5_then_top1_nan_last_errors_after():
    ok, failed = sweeps.split_results(TILE_XLA, sample_results())
    assert [r["index"] for r in ok] == [4, 2, 0, 3]
    assert [r["index"] for r in failed] == [1, 5]


def test_ensemble_command_names_the_best_k_model_dirs():
    ok, _ = sweeps.split_results(TILE_XLA, sample_results())
    h = {r["index"]: r["run_hash"] for r in ok}
    assert sweeps.ensemble_command(TILE_XLA, ok, 2) == (
        f"python tiles_gen_predictions_csv.py --dir /o/model_{h[4]},/o/model_{h[2]}"
    )
    assert sweeps.ensemble_command(TILE_XLA, ok, 10).count("/o/model_") == 4
    assert sweeps.ensemble_command(TILE_XLA, [], 3) is None


def test_summary_files_list_runs_best_first_then_errors(tmp_path):
    results = sample_results()
    (tmp_path / sweeps.SUMMARY_MD).write_text("an older sweep's summary")
    csv_path, md_path = sweeps.write_summary(TILE_XLA, tmp_path, results, ensemble_top=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        sweeps.SUMMARY_CSV,
        sweeps.SUMMARY_MD,
    ]
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["status"] for r in rows] == ["ok"] * 4 + ["error"] * 2
    assert [r["lr"] for r in rows] == ["0.5", "0.3", "0.1", "0.4", "0.2", "0.6"]
    assert "out_dir" not in rows[0] and "model" not in rows[0]  # the same in every run
    assert [r["val_top5_err"] for r in rows[:4]] == ["0.1000", "0.1000", "0.3000", "nan"]
    assert [r["rank"] for r in rows] == ["1", "2", "3", "4", "", ""]
    assert rows[4]["error"] == "--losses: cannot | parse\nit"
    md = md_path.read_text()
    assert "6 runs: 4 trained, 2 failed" in md
    assert "--losses: cannot \\| parse it" in md  # one line, pipe escaped
    best = [r["model_dir"] for r in rows[:3]]
    assert f"python tiles_gen_predictions_csv.py --dir {','.join(best)}" in md
    assert md.index("| 1 | ") < md.index("## Failed runs") < md.index("## Ensemble of the best 3")


def test_run_one_reports_success_and_failures_without_raising():
    args = TrainArgs(out_dir="/o", epochs=2)
    record = {
        "final_error": {"val": {"1": 0.5, "5": 0.25, "10": 0.125}},
        "train_curve": {"epoch": [0, 1], "val_opa": [0.6, 0.7]},
        "best_epoch": 1,
    }
    lines = []

    def train(a, progress, log):
        assert a is args and progress is False
        log("epoch 0")
        return record

    ok = sweeps.run_one(TILE_XLA, 0, 2, args, train, lines.append)
    assert ok["status"] == "ok" and ok["val_error"] == {"1": 0.5, "5": 0.25, "10": 0.125}
    assert ok["val_opa"] == 0.7 and ok["best_epoch"] == 1 and ok["wall_s"] >= 0
    assert ok["model_dir"] == f"/o/model_{args.run_hash()}"
    assert any(line.endswith("epoch 0") and line.startswith("[run 1/2 ") for line in lines)

    def refused(a, progress, log):
        raise PipelineError("--losses: bad\n  spec")

    def crashed(a, progress, log):
        raise ValueError("shapes differ")

    assert (
        sweeps.run_one(TILE_XLA, 1, 2, args, refused, lines.append)["error"] == "--losses: bad spec"
    )
    crash = sweeps.run_one(TILE_XLA, 1, 2, args, crashed, lines.append)
    assert crash["status"] == "error" and crash["error"] == "ValueError: shapes differ"
    assert lines[-1].endswith("failed: ValueError: shapes differ")


# --- the script: bad input, and a real sweep on Beam's local runner -----------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sweep=grid"], "--sweep: unknown sweep 'grid'"),
        (["--sweep=garbled.json"], "is not valid JSON"),
        (["--sweep=seeds", "--num_seeds=0"], "--num_seeds: must be at least 1"),
        (["--direct_running_mode=fast"], "Beam pipeline option: argument --direct_running_mode"),
        (["--direct_num_workers=two"], "invalid int value: 'two'"),
        (["--runner=NoSuchRunner"], "--runner: Unexpected pipeline runner: NoSuchRunner"),
        (["--epoch=3"], "unknown flag --epoch: .* did you mean --epochs"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, argv, message):
    (tmp_path / "garbled.json").write_text('[{"model": "MLP",]')
    out = tmp_path / "out"
    proc = run_script(*argv, "--debug", f"--out_dir={out}", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()


@pytest.mark.slow
def test_local_sweep_trains_in_worker_processes_and_reports_a_failed_run(tmp_path):
    out, cache = tmp_path / "out", tmp_path / "cache"
    sweep_file = tmp_path / "sweep.json"
    entries = [
        {"model": "MLP", "seed": 0},
        {"model": "MLP", "seed": 1, "model_kwargs_json": {"op_embed_dim": 16, "hidden_dim": 16}},
        {"model": "MLP", "losses": "NoSuchLoss:1"},  # refused by validate() inside the worker
    ]
    sweep_file.write_text(json.dumps(entries))
    common = ["--toy_data=True", f"--data_root={TOY_ROOT}", f"--out_dir={out}"]
    common += [f"--cache_dir={cache}", "--epochs=2", "--early_stop=1"]
    proc = run_script(
        f"--sweep={sweep_file}",
        *common,
        "--direct_num_workers=2",
        "--direct_running_mode=multi_processing",
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("error: 1 of 3 runs failed")
    assert "on DirectRunner (2 workers, multi_processing" in proc.stdout
    starts = re.findall(r"\] start in process (\d+): MLP", proc.stdout)
    assert len(starts) == 3 and len(set(starts)) == 2  # runs spread over the 2 worker processes

    # The same runs as tiles_train.py with these flags would make (hash = name of the files).
    flags = dict(toy_data=True, data_root=str(TOY_ROOT), out_dir=str(out), cache_dir=str(cache))
    flags.update(epochs=2, early_stop=1, model="MLP")
    hashes = [
        TrainArgs(**flags, seed=0).run_hash(),
        TrainArgs(
            **flags, seed=1, model_kwargs_json=json.dumps(entries[1]["model_kwargs_json"])
        ).run_hash(),
        TrainArgs(**flags, losses="NoSuchLoss:1").run_hash(),
    ]
    records = {h: read_run_file(out / f"run_{h}.jsonz") for h in hashes[:2]}
    assert all((out / f"model_{h}" / "saved_model.pb").is_file() for h in hashes[:2])
    assert (
        not (out / f"model_{hashes[2]}").exists() and not (out / f"run_{hashes[2]}.jsonz").exists()
    )
    assert records[hashes[1]]["model_kwargs"] == {"op_embed_dim": 16, "hidden_dim": 16}

    with open(out / sweeps.SUMMARY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["status"] for r in rows] == ["ok", "ok", "error"]
    assert rows[2]["run_hash"] == hashes[2] and rows[2]["error"].startswith("--losses: ")
    by_top5 = sorted(hashes[:2], key=lambda h: records[h]["final_error"]["val"]["5"])
    assert [r["run_hash"] for r in rows[:2]] == by_top5
    for row in rows[:2]:
        record = records[row["run_hash"]]
        for k in ("1", "5", "10"):
            assert float(row[f"val_top{k}_err"]) == pytest.approx(
                record["final_error"]["val"][k], abs=5e-5
            )
        validated = [v for v in record["train_curve"]["val_opa"] if v is not None]
        assert float(row["val_opa"]) == pytest.approx(max(validated), 1e-4)
    md = (out / sweeps.SUMMARY_MD).read_text()
    assert "3 runs: 2 trained, 1 failed" in md
    dirs = ",".join(str(out / f"model_{h}") for h in by_top5)
    assert f"python tiles_gen_predictions_csv.py --dir {dirs}" in md

    # The aliased model's run file rebuilds and its saved weights load.
    model, record, _ = load_trained_model(out / f"model_{hashes[1]}")
    assert record["run_hash"] == hashes[1] and model.get_config()["op_embedding_dim"] == 16
    assert not list(itertools.chain(out.glob("*.tmp-*"), cache.glob("*.tmp-*")))


def test_every_summary_column_is_what_the_run_files_say(tmp_path, monkeypatch):
    """Each sweep summary cell against the run record it came from: hash, differing
    flags, validation top-K errors, the *best* validated OPA (not the last one: one
    run's best epoch is not its last, one validated every other epoch), best
    epoch, wall time; ranks and the ensemble command by validation top-5 error."""
    records = {
        0.1: {  # best epoch 1 of 4: the last validated OPA (0.61) is not the best
            "final_error": {"val": {"1": 0.31, "5": 0.12, "10": 0.05}},
            "train_curve": {"epoch": [0, 1, 2, 3], "val_opa": [0.55, 0.83, 0.70, 0.61]},
            "best_epoch": 1,
        },
        0.2: {  # validated every other epoch (None between)
            "final_error": {"val": {"1": 0.25, "5": 0.07, "10": 0.01}},
            "train_curve": {"epoch": [0, 1, 2, 3], "val_opa": [None, 0.66, None, 0.72]},
            "best_epoch": 3,
        },
        0.3: {
            "final_error": {"val": {"1": 0.5, "5": 0.2, "10": 0.11}},
            "train_curve": {"epoch": [0, 1], "val_opa": [0.9, 0.4]},
            "best_epoch": 0,
        },
    }
    walls = {0.1: 12.5, 0.2: 3.5, 0.3: 40.0}  # the summary shows tenths of a second
    clock = [100.0]
    monkeypatch.setattr(sweeps.time, "perf_counter", lambda: clock[0])
    results = []
    for index, (lr, record) in enumerate(records.items()):
        args = TrainArgs(lr=lr, run_id=f"r{index}", out_dir=str(tmp_path / "runs"))

        def train(a, progress, log, record=record, lr=lr):
            clock[0] += walls[lr]
            return record

        results.append(sweeps.run_one(TILE_XLA, index, 3, args, train, lambda _: None))
    csv_path, md_path = sweeps.write_summary(TILE_XLA, tmp_path, results, ensemble_top=2)

    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    by_top5 = sorted(records, key=lambda lr: records[lr]["final_error"]["val"]["5"])
    assert [float(r["lr"]) for r in rows] == by_top5
    assert [r["rank"] for r in rows] == ["1", "2", "3"]
    md_lines = [line for line in md_path.read_text().splitlines() if line.startswith("| ")]
    md_header = [c.strip() for c in md_lines[0].strip("|").split("|")]
    md_rows = [[c.strip() for c in line.strip("|").split("|")] for line in md_lines[1:]]
    assert len(md_rows) == 3
    for row, md_row in zip(rows, md_rows):
        lr = float(row["lr"])
        record = records[lr]
        args = TrainArgs(lr=lr, run_id=row["run_id"], out_dir=str(tmp_path / "runs"))
        assert row["run_hash"] == args.run_hash()
        assert row["model_dir"] == str(tmp_path / "runs" / f"model_{args.run_hash()}")
        validated = [v for v in record["train_curve"]["val_opa"] if v is not None]
        expected = {
            "val_top1_err": record["final_error"]["val"]["1"],
            "val_top5_err": record["final_error"]["val"]["5"],
            "val_top10_err": record["final_error"]["val"]["10"],
            "val_opa": max(validated),
            "best_epoch": record["best_epoch"],
            "wall_s": walls[lr],
        }
        for column, value in expected.items():
            assert float(row[column]) == pytest.approx(value, abs=5e-5), (lr, column)
            # The markdown table shows the same cell.
            assert md_row[md_header.index(column)] == row[column], (lr, column)
        assert md_row[md_header.index("run_hash")] == row["run_hash"]
        assert md_row[md_header.index("run_id")] == row["run_id"] == f"r{list(records).index(lr)}"
    # Flags that are the same in every run are left out; the ones that differ are in.
    assert "lr" in rows[0] and "run_id" in rows[0] and "epochs" not in rows[0]
    best = [rows[0]["model_dir"], rows[1]["model_dir"]]
    command = f"python tiles_gen_predictions_csv.py --dir {','.join(best)}"
    assert command in md_path.read_text()
