"""layout_train.py and layout_gen_predictions_csv.py end to end on the toy set, run identity,
rebuilding a saved model, and misuse refused in one line."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import one_line_error, tensorboard_hparams, tensorboard_metadata
from conftest import read_run_file as read_run
from conftest import run_repo_script as run

from baselines.core.errors import PipelineError
from baselines.layout.codebook import Codebook
from baselines.layout.layout_args import LayoutTrainArgs

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "data" / "layout_toy"
TILE_MODEL = next((REPO / "tests" / "fixtures" / "old_run").glob("model_*"))
TINY = ["--epochs=2", '--model_kwargs_json={"hidden_dim": 8, "op_embed_dim": 8}']


def saved_paths(stdout: str) -> tuple[Path, Path]:
    model = next(line for line in stdout.splitlines() if line.startswith("saved model: "))
    run_file = next(line for line in stdout.splitlines() if line.startswith("saved run file: "))
    return Path(model.split(": ", 1)[1]), Path(run_file.split(": ", 1)[1])


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("layout_out")
    done = run("layout_train.py", "--source=xla", "--search=default", *TINY, f"--out_dir={out}")
    assert done.returncode == 0, done.stderr
    return out, done


def test_tensorboard_lists_the_runs_flags_beside_its_validation_tau(trained):
    """The HParams dashboard labels the layout run and lists its flags (where files go
    left out) beside validation Kendall's tau, OPA and the losses, as for tiles."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    out, done = trained
    model_dir, _ = saved_paths(done.stdout)
    run_hash = model_dir.name.removeprefix("model_")
    tb = out / f"tb_{run_hash}"
    hparams = tensorboard_hparams(tb)
    assert hparams["_trial"] == f"ResModel-xla:default-{run_hash[:8]}"
    assert hparams["source"] == "xla" and hparams["epochs"] == 2 and "out_dir" not in hparams
    experiment = plugin_data_pb2.HParamsPluginData.FromString(
        tensorboard_metadata(tb, "_hparams_/experiment")
    ).experiment
    metrics = {(m.name.tag, m.name.group) for m in experiment.metric_infos}
    assert ("epoch_kendall_tau", "validation") in metrics and ("epoch_loss", "train") in metrics


def test_train_then_predict_lists_every_config(trained):
    out, done = trained
    assert "TOY DATA" in done.stdout
    model_dir, run_path = saved_paths(done.stdout)
    h = LayoutTrainArgs(
        source="xla", search="default", epochs=2, model_kwargs_json=TINY[1].split("=", 1)[1]
    ).run_hash()
    assert model_dir == out / f"model_{h}" and run_path == out / f"run_{h}.jsonz"
    assert (model_dir / "saved_model.pb").is_file() and run_path.is_file()
    assert any((out / f"tb_{h}").iterdir())
    record = read_run(run_path)
    assert record["collection"] == "layout" and record["model"] == "ResModel"
    assert record["args"]["epochs"] == 2 and len(record["train_curve"]["epoch"]) == 2
    assert -1 <= record["val"]["kendall_tau"] <= 1

    pred = run("layout_gen_predictions_csv.py", f"--dir={model_dir}")
    assert pred.returncode == 0, pred.stderr
    csv_path = out / "layout_xla_default_predictions.csv"
    with open(csv_path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["ID", "TopConfigs"]
    test_files = sorted((TOY / "xla" / "default" / "test").glob("*.npz"))
    assert [r[0] for r in rows[1:]] == [f"layout:xla:default:{p.stem}" for p in test_files]
    for (_, cell), path in zip(rows[1:], test_files, strict=True):
        with np.load(path) as npz:
            count = npz["config_runtime"].shape[0]
        ranking = [int(t) for t in cell.split(";")]
        assert sorted(ranking) == list(range(count))

    # The rows join in create_kaggle_csv.py's reader (ID,TopConfigs).
    from baselines.core.submission import read_rankings_csv

    assert len(read_rankings_csv(csv_path)) == len(test_files)


def test_each_row_lists_the_config_its_graph_scored_fastest_first(trained, tmp_path):
    """The script's rows against each test file scored alone, sorted here by score.

    Scoring one file alone checks the rows' graph IDs as well as their order.
    Duplicate configurations score exactly equal and must list the lower index
    first; other scores need only ascend within float32 rounding (the same
    model on the same rows, so 1e-6 is wide).
    """
    from baselines.layout.run_data import read_layout_models
    from baselines.layout.scoring import score_runs

    out, done = trained
    model_dir, _ = saved_paths(done.stdout)
    output = tmp_path / "rows.csv"
    pred = run("layout_gen_predictions_csv.py", f"--dir={model_dir}", f"--output={output}")
    assert pred.returncode == 0, pred.stderr
    with open(output, newline="") as f:
        rows = {r[0]: [int(t) for t in r[1].split(";")] for r in list(csv.reader(f))[1:]}
    models = read_layout_models(str(model_dir), "--dir")
    test_files = sorted((TOY / "xla" / "default" / "test").glob("*.npz"))
    assert len(rows) == len(test_files) > 1
    for path in test_files:
        alone = tmp_path / path.stem / "test"
        alone.mkdir(parents=True)
        (alone / path.name).symlink_to(path)
        graphs, members = score_runs(models, alone, log=None)
        (scores,) = members[0]
        assert [g.graph_id for g in graphs] == [path.stem]
        row = rows[f"layout:xla:default:{path.stem}"]
        assert sorted(row) == list(range(len(scores)))
        ordered = scores[row].astype(np.float64)
        assert np.all(np.diff(ordered) >= -1e-6), f"{path.stem}: not fastest first"
        tied = np.diff(ordered) == 0
        assert np.all(np.diff(row)[tied] > 0), f"{path.stem}: ties not in file order"
        assert ordered[0] < ordered[-1]  # the model tells configurations apart


def newest_per_collection(folder: Path) -> dict[str, Path]:
    """Upstream's combine rule, written again here: per (source, search), the
    `results_<ms>_<source>_<search>.csv` of `folder` with the largest `<ms>` stamp."""
    pattern = re.compile(r"results_(\d+)_(xla|nlp)_(default|random)\.csv")
    newest: dict[str, tuple[int, Path]] = {}
    for path in folder.iterdir():
        match = pattern.fullmatch(path.name)
        if match:
            key, stamp = f"{match[2]}:{match[3]}", int(match[1])
            if key not in newest or stamp > newest[key][0]:
                newest[key] = (stamp, path)
    return {key: path for key, (_, path) in newest.items()}


def read_rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_training_ranks_the_test_split_where_upstreams_combine_finds_it(trained, tmp_path):
    """As upstream's layout_train.py: after training, every configuration of every test file
    ranked into <out_dir>/results_<ms>_<source>_<search>.csv (ID,TopConfigs), which the
    combine rule (newest file per collection) joins with the tile CSV."""
    from baselines.layout.task import rank_test_split

    out, done = trained
    (written,) = out.glob("results_*_xla_default.csv")
    stamp = int(written.name.split("_")[1])
    assert abs(stamp / 1000 - written.stat().st_mtime) < 3600  # a millisecond timestamp
    assert f"wrote {written}: " in done.stdout
    rows = read_rows(written)
    assert rows[0] == ["ID", "TopConfigs"]
    test_files = sorted((TOY / "xla" / "default" / "test").glob("*.npz"))
    assert [r[0] for r in rows[1:]] == [f"layout:xla:default:{p.stem}" for p in test_files]
    for (_, ranking), path in zip(rows[1:], test_files):
        configs = np.load(path)["config_runtime"].shape[0]
        assert sorted(int(i) for i in ranking.split(";")) == list(range(configs)), path.name

    # The combine step: an older file of the same collection and the tile results beside.
    layout_out, tile_out = tmp_path / "tpugraphs_layout", tmp_path / "tpugraphs_tiles"
    layout_out.mkdir(), tile_out.mkdir()
    (layout_out / written.name).write_bytes(written.read_bytes())
    stale = layout_out / f"results_{stamp - 1}_xla_default.csv"
    stale.write_text("ID,TopConfigs\nlayout:xla:default:stale,0\n")
    tile_ids = sorted(p.stem for p in (REPO / "data" / "tile_xla_toy" / "test").glob("*.npz"))
    (tile_out / f"results_{stamp}.csv").write_text(
        "ID,TopConfigs\n" + "".join(f"tile:xla:{t},0;1;2;3;4\n" for t in tile_ids)
    )
    chosen = newest_per_collection(layout_out)
    assert chosen == {"xla:default": layout_out / written.name}
    (tile_csv,) = tile_out.glob("results_*.csv")
    joined = [row for path in (tile_csv, *chosen.values()) for row in read_rows(path)[1:]]
    ids = [row_id for row_id, _ in joined]
    assert len(ids) == len(set(ids)) == len(tile_ids) + len(test_files)
    assert joined[len(tile_ids) :] == rows[1:]

    # --results_csv names the file; the same ranking (the same saved model); None: no ranking.
    model_dir, run_path = saved_paths(done.stdout)
    record = {"data_root": str(TOY), "run_hash": model_dir.name.removeprefix("model_")}
    args = LayoutTrainArgs(search="default", out_dir=str(out), results_csv=str(tmp_path / "a.csv"))
    assert rank_test_split(args, record, log=lambda _: None) == tmp_path / "a.csv"
    assert read_rows(tmp_path / "a.csv") == rows
    none = dataclasses.replace(args, results_csv="None")
    assert rank_test_split(none, record, log=lambda _: None) is None
    assert sorted(out.glob("results_*.csv")) == [written]


def test_validate_batches_caps_the_validation_batches_as_upstreams_flag():
    """Upstream's default, 10; <= 0: all; only the per-epoch validation is capped. Runs saved
    before the flag keep their hashes (the real validation splits, 7 and 20 graphs, fit in
    10 batches of 2 or more graphs); --results_csv is not hashed."""
    from baselines.layout.task import LayoutTask, load_train_graphs, prepared

    base = LayoutTrainArgs()
    assert (base.validate_batches, base.results_csv) == (10, "")
    assert base.out_dir == "~/out/tpugraphs_layout"  # upstream's
    assert LayoutTrainArgs(results_csv="/x.csv").run_hash() == base.run_hash()
    assert LayoutTrainArgs(validate_batches=3).run_hash() != base.run_hash()
    args = LayoutTrainArgs(search="default", batch=1, prune_hops=1)
    loaded = prepared(*load_train_graphs(args, TOY / "xla" / "default", log=lambda _: None))
    assert len(loaded.valid) == 3
    for cap, steps in ((2, 2), (1, 1), (10, 3), (0, 3), (-1, 3)):
        capped = dataclasses.replace(args, validate_batches=cap)
        train, valid = LayoutTask().batches(capped, loaded, 4, 1)
        assert valid.steps == steps and len(list(valid.batches(0))) == steps, cap
        assert train.steps == len(loaded.train)


def test_rebuilt_model_scores_like_the_trained_one(trained):
    """Per-graph validation tau of the rebuilt model equals the one the run measured."""
    _, done = trained
    model_dir, _ = saved_paths(done.stdout)
    from baselines.layout.batching import prepare_graphs
    from baselines.layout.metrics import kendall_tau
    from baselines.layout.run_data import load_run_split, read_layout_run, restore_layout_model
    from baselines.layout.scoring import GraphScorer

    record = read_layout_run(model_dir)
    args = LayoutTrainArgs.from_dict(record["args"])
    valid = load_run_split(
        TOY / "xla" / "default" / "valid",
        training=True,
        prune_hops=args.prune_hops,
        drop_duplicates=args.drop_duplicates,
        max_configs=args.max_configs,
        seed=args.seed,
        log=None,
    )
    scorer = GraphScorer(restore_layout_model(model_dir, record))
    for graph in prepare_graphs(valid):
        tau = kendall_tau(scorer.score(graph), graph.raw_runtimes)
        assert tau == pytest.approx(record["val"]["tau_per_graph"][graph.graph_id], abs=1e-9)


def test_same_seed_same_run_and_hash_follows_result_flags(trained, tmp_path):
    out, done = trained
    again = run(
        "layout_train.py", "--source=xla", "--search=default", *TINY, f"--out_dir={tmp_path}"
    )
    assert again.returncode == 0, again.stderr
    (m1, r1), (m2, r2) = saved_paths(done.stdout), saved_paths(again.stdout)
    assert m1.name == m2.name  # --out_dir is not part of the hash
    a, b = read_run(r1), read_run(r2)
    assert a["val"] == b["val"] and a["train_curve"] == b["train_curve"]

    base = LayoutTrainArgs()
    assert LayoutTrainArgs(out_dir="/elsewhere").run_hash() == base.run_hash()
    for change in (
        {"seed": 1},
        {"lr": 2e-3},
        {"search": "default"},
        {"prune_hops": None},
        {"max_configs": 100},
        {"drop_duplicates": False},
        {"model": "LayoutSAGE"},
        {"average_from": 3},
        {"toy_data": True},
    ):
        assert LayoutTrainArgs(**change).run_hash() != base.run_hash(), change
    # Flags added after runs were saved are hashed only off their defaults: the runs
    # saved before them keep their names. Those runs hashed exactly these fields.
    hashed_before = (
        "source", "search", "epochs", "early_stop", "configs", "max_configs", "batch", "lr",
        "clip_norm", "keep_nodes", "model", "model_kwargs_json", "losses", "seed", "data_root",
        "prune_hops", "drop_duplicates",
    )  # fmt: skip
    for args in (base, LayoutTrainArgs(seed=3, model="LayoutSAGE", prune_hops=None)):
        fields = {k: getattr(args, k) for k in hashed_before}
        before = hashlib.md5(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        assert args.run_hash() == before
    for change in (
        {"optimizer": "adamw"},
        {"weight_decay": 0.1, "optimizer": "adamw"},
        {"lr_schedule": "cosine"},
        {"warmup_epochs": 2, "lr_schedule": "cosine"},
        {"max_train_steps": 10},
        {"eval_every": 2},
    ):
        assert LayoutTrainArgs(**change).run_hash() != base.run_hash(), change
    assert LayoutTrainArgs(prune_hops="-1").prune_hops is None


def test_toy_data_reads_the_first_files_of_each_split(tmp_path):
    """--toy_data (as tiles_train.py takes it): the first 100 files of each split."""
    from baselines.layout.run_data import load_run_split

    assert LayoutTrainArgs(toy_data=True).split_kwargs()["max_files"] == 100
    assert LayoutTrainArgs().split_kwargs()["max_files"] is None
    folder = TOY / "xla" / "default" / "train"
    names = sorted(p.stem for p in folder.glob("*.npz"))
    graphs = load_run_split(folder, training=True, prune_hops=1, max_files=2, log=None)
    assert [g.graph_id for g in graphs] == names[:2] and len(names) > 2


@pytest.mark.slow
def test_toy_data_is_a_flag_of_the_layout_script(tmp_path):
    done = run("layout_train.py", "--toy_data=True", "--epochs=1", f"--out_dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    model_dir, _ = saved_paths(done.stdout)
    assert model_dir.name == f"model_{LayoutTrainArgs(toy_data=True, epochs=1).run_hash()}"


def test_flag_values_are_checked_in_one_line():
    for bad in (
        {"source": "xl"},
        {"configs": 1},
        {"lr": 0.0},
        {"model_kwargs_json": "[1]"},
        {"prune_hops": -2},
        {"losses": "Nope:1"},
        {"average_from": 0},
        {"epochs": 10, "average_from": 11},
    ):
        with pytest.raises(PipelineError):
            LayoutTrainArgs(**bad).check_flags()


def test_misuse_is_refused_in_one_line(trained):
    _, done = trained
    layout_model, _ = saved_paths(done.stdout)
    line = one_line_error(run("layout_train.py", "--source=tpu"))
    assert "--source" in line and "xla" in line
    line = one_line_error(run("layout_train.py", "--model=ResModle"))
    assert "did you mean ResModel" in line and "LayoutSAGE" in line
    line = one_line_error(run("layout_train.py", "--epoch=3"))
    assert "did you mean --epochs" in line
    line = one_line_error(run("layout_train.py", f"--results_csv={layout_model}"))
    assert line == f"error: --results_csv: {layout_model} is a directory; give a file name"
    line = one_line_error(run("layout_gen_predictions_csv.py", f"--dir={TILE_MODEL}"))
    assert "is a tile model; use tiles_gen_predictions_csv.py" in line
    line = one_line_error(run("tiles_gen_predictions_csv.py", f"--dir={layout_model}"))
    assert "is a layout model; use layout_gen_predictions_csv.py" in line


def test_negative_prune_hops_is_refused_in_one_line():
    """-1 means no pruning; any other negative count is refused before TensorFlow works."""
    line = one_line_error(run("layout_train.py", "--prune_hops=-2"))
    assert line == "error: --prune_hops: must be >= 0, or None/-1 for no pruning, got -2"


def test_max_configs_note_says_when_the_flag_keeps_everything():
    from baselines.layout.graph import LayoutGraph
    from baselines.layout.run_data import max_configs_note

    def graph(c: int) -> LayoutGraph:
        return LayoutGraph(
            graph_id=f"g{c}",
            node_feat=np.zeros((1, 140), np.float32),
            node_opcode=np.zeros(1, np.int32),
            edge_index=np.zeros((0, 2), np.int32),
            node_config_ids=np.zeros(0, np.int32),
            configs=Codebook.from_values(np.zeros((c, 0, 18), np.int8)),
            config_runtime=np.arange(1, c + 1, dtype=np.int64),
            node_splits=np.array([0, 1], np.int64),
        )

    graphs = [graph(3), graph(1965), graph(40)]
    assert max_configs_note(5000, graphs) == (
        "--max_configs 5000 exceeds the most configurations of any train/valid graph "
        "(1,965): every configuration is kept"
    )
    assert "most distinct configurations" in max_configs_note(1966, graphs, distinct=True)
    assert max_configs_note(1965, graphs) is None  # a graph holds that many: no note
    assert max_configs_note(None, graphs) is None


def most_distinct_configs(folders: list[Path]) -> int:
    """The most distinct configurations of any file in `folders`, read with numpy alone."""
    most = 0
    for folder in folders:
        for path in folder.glob("*.npz"):
            with np.load(path) as npz:
                feat = npz["node_config_feat"]
            most = max(most, np.unique(feat.reshape(feat.shape[0], -1), axis=0).shape[0])
    return most


@pytest.mark.slow
def test_max_configs_and_configs_above_every_graph_go_on_with_one_note_each(tmp_path):
    collection = TOY / "xla" / "default"
    flags = ["--source=xla", "--search=default", "--epochs=1", "--max_configs=5000",
             "--configs=5000", TINY[1], f"--out_dir={tmp_path}"]  # fmt: skip
    done = run("layout_train.py", *flags)
    assert done.returncode == 0, done.stderr
    both = most_distinct_configs([collection / "train", collection / "valid"])
    train = most_distinct_configs([collection / "train"])
    max_note = [line for line in done.stdout.splitlines() if line.startswith("--max_configs")]
    assert max_note == [
        f"--max_configs 5000 exceeds the most distinct configurations of any train/valid "
        f"graph ({both:,}): every configuration is kept"
    ]
    configs_note = [line for line in done.stdout.splitlines() if line.startswith("--configs")]
    assert configs_note == [
        f"--configs=5000 is more than the largest train graph has ({train:,}); "
        f"sampling {train:,} per graph and step"
    ]
    record = read_run(saved_paths(done.stdout)[1])
    assert record["args"]["max_configs"] == 5000 and record["args"]["configs"] == 5000
    assert record["configs"] == train  # what the batches held
    given = LayoutTrainArgs(
        source="xla", search="default", epochs=1, max_configs=5000, configs=5000,
        model_kwargs_json=TINY[1].split("=", 1)[1],
    )  # fmt: skip
    assert record["run_hash"] == given.run_hash()
    assert given.run_hash() != dataclasses.replace(given, max_configs=None).run_hash()


# ---------------------------------------------------------------------------
# The real layout samples: a toy-trained model ranks them, and training runs on them.


def real_layout_root() -> Path:
    from conftest import REAL_SAMPLES

    root = REAL_SAMPLES / "layout"
    if not root.is_dir():
        pytest.skip(f"real layout samples not found at {root}")
    return root


@pytest.mark.slow
def test_toy_trained_model_ranks_every_real_test_file(trained):
    """Every configuration of each of the 4 collections' real test files, ranked once."""
    root = real_layout_root()
    _, done = trained
    model_dir, _ = saved_paths(done.stdout)
    from baselines.layout.batching import prepare_graphs
    from baselines.layout.run_data import load_run_split, read_layout_run, restore_layout_model
    from baselines.layout.scoring import GraphScorer

    record = read_layout_run(model_dir)
    hops = LayoutTrainArgs.from_dict(record["args"]).prune_hops
    scorer = GraphScorer(restore_layout_model(model_dir, record))
    ranked = {}
    for folder in sorted(root.glob("*/*/test")):
        graphs = load_run_split(folder, training=False, prune_hops=hops, log=None)
        for path, graph in zip(sorted(folder.glob("*.npz")), prepare_graphs(graphs), strict=True):
            with np.load(path) as npz:
                count = npz["config_runtime"].shape[0]  # every configuration, duplicates too
            scores = scorer.score(graph)
            assert scores.shape == (count,) and np.all(np.isfinite(scores)), path
            assert np.unique(scores).size > 1, path  # the configurations are told apart
            ranked[f"{folder.parts[-3]}:{folder.parts[-2]}"] = count
    assert set(ranked) == {"xla:default", "xla:random", "nlp:default", "nlp:random"}

    # And through the script, for the model's own collection: every index once.
    out = model_dir.parent / "real.csv"
    pred = run("layout_gen_predictions_csv.py", f"--dir={model_dir}", f"--data_root={root}",
               f"--output={out}")  # fmt: skip
    assert pred.returncode == 0, pred.stderr
    with open(out, newline="") as f:
        rows = list(csv.reader(f))[1:]
    test_file = next((root / "xla" / "default" / "test").glob("*.npz"))
    assert [r[0] for r in rows] == [f"layout:xla:default:{test_file.stem}"]
    assert sorted(int(t) for t in rows[0][1].split(";")) == list(range(ranked["xla:default"]))


@pytest.mark.slow
def test_training_on_the_real_xla_default_files(tmp_path):
    """One epoch on the real train file; the run file's tau is that of the real valid file."""
    root = real_layout_root()
    done = run("layout_train.py", "--source=xla", "--search=default", f"--data_root={root}",
               "--epochs=1", *TINY[1:], f"--out_dir={tmp_path}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "TOY DATA" not in done.stdout
    record = read_run(saved_paths(done.stdout)[1])
    valid_file = next((root / "xla" / "default" / "valid").glob("*.npz"))
    assert list(record["val"]["tau_per_graph"]) == [valid_file.stem]
    assert np.isfinite(record["val"]["kendall_tau"]) and -1 <= record["val"]["kendall_tau"] <= 1
