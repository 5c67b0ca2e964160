"""One meaning per flag name: `--max_files=N` (the first N files of each split),
`--bundled_toy=True` (the bundled toy set instead of `--data_root`), and upstream's
`--toy_data=True`, which keeps working in every script that took it: it says in one line
what it does in the new spellings, and records and hashes its runs as it always did.

The expected run hashes are built here from the fields the records held before
`--max_files` existed (`toy_data` a bool), not by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import sys

import pytest
from conftest import ROOT, one_line_error
from conftest import run_repo_script as run

import kaggle_submission
import layout_train
import tiles_train
from baselines.core.args_record import TOY_DATA_NOTE
from baselines.core.data_roots import ranking_root, training_root
from baselines.core.errors import PipelineError
from baselines.core.rank_run import Request
from baselines.jobs.submission_job import plan_job, run_hash_of
from baselines.jobs.sweeps import expand_runs, read_sweep_file
from baselines.jobs.tile_spec import TILE_XLA
from baselines.layout.layout_args import LAYOUT_PLACE, LayoutTrainArgs
from baselines.tiles.tile_args import TILE_PLACE, TrainArgs

TILE_TOY = ROOT / "data" / "tile_xla_toy"
# The fields of a tile run's record before --max_files, but --average_from (hashed only when
# set; the name of a run on toy data standing in for a missing root hashes it too).
OLD_TILE_FIELDS = (
    "lr", "optimizer", "weight_decay", "lr_schedule", "warmup_epochs", "max_train_steps",
    "eval_every", "model", "epochs", "early_stop", "configs", "batch", "losses",
    "clip_norm", "model_kwargs_json", "test_mode", "out_dir", "results_csv", "validate_batches",
    "run_id", "data_root", "cache_dir", "toy_data", "seed", "sampling",
)  # fmt: skip
# The fields layout runs hashed before the flags added later (hashed only off their defaults).
OLD_LAYOUT_FIELDS = (
    "source", "search", "epochs", "early_stop", "configs", "max_configs", "batch", "lr",
    "clip_norm", "keep_nodes", "model", "model_kwargs_json", "losses", "seed", "data_root",
    "prune_hops", "drop_duplicates",
)  # fmt: skip


def md5_of(fields: dict) -> str:
    return hashlib.md5(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def old_tile_record(args: TrainArgs, toy_data: bool) -> dict:
    """The record a tile run had before --max_files: its fields, `toy_data` among them."""
    return {k: (toy_data if k == "toy_data" else getattr(args, k)) for k in OLD_TILE_FIELDS}


# --- the old spelling ----------------------------------------------------------------


@pytest.mark.parametrize("script", [tiles_train, layout_train], ids=["tiles", "layout"])
def test_the_old_spelling_says_what_it_does_and_is_the_new_one(script, tmp_path):
    flagfile = tmp_path / "old.flags"
    flagfile.write_text("--toy_data\n")
    for old_flags in (["--toy_data=True"], ["--toy_data"], [f"--flagfile={flagfile}"]):
        said: list[str] = []
        old, _ = script.parse_command([*old_flags, "--seed=3"], log=said.append)
        quiet: list[str] = []
        new, _ = script.parse_command(["--max_files=100", "--seed=3"], log=quiet.append)
        assert said == [TOY_DATA_NOTE] and quiet == []
        assert old == new and old.to_dict() == new.to_dict() and old.max_files == 100
        assert old.run_hash() == new.run_hash()
        assert "toy_data" not in old.to_dict()  # the record holds the new spelling only
    said = []
    assert script.parse_command(["--toy_data=false"], log=said.append)[0].max_files is None
    assert said == []
    with pytest.raises(PipelineError, match="--toy_data=True means --max_files=100"):
        script.parse_command(["--toy_data=True", "--max_files=7"])


@pytest.mark.parametrize("script", ["tiles_train.py", "layout_train.py"])
def test_the_training_scripts_print_the_line_once(script):
    """Said before anything else is checked (here a bad --epochs, refused in one line)."""
    done = run(script, "--toy_data=True", "--epochs=0")
    assert done.stdout.splitlines() == [TOY_DATA_NOTE]
    assert one_line_error(done) == "error: --epochs: must be at least 1, got 0"


def test_tile_runs_keep_their_hashes_with_and_without_downloaded_data(tmp_path):
    """`tiles_train.py --toy_data=True`: on downloaded data the run hash of its old record;
    before any download (the toy set stands in) that record joined by the data identity."""
    from baselines.core.conductor import choose_run_hash
    from baselines.core.task import Loaded

    for flags in ({"toy_data": True}, {"max_files": 100}, {"max_files": "100"}):
        args = TrainArgs(model="MLP", seed=2, **flags)
        assert args.run_hash() == md5_of(old_tile_record(args, toy_data=True))
        downloaded = Loaded(None, None, identity="d0")
        assert choose_run_hash(args, tmp_path, downloaded) == (args.run_hash(), "")
        fallback = Loaded(None, None, identity="d1", toy_fallback=True)
        keyed = {**old_tile_record(args, True), "average_from": None, "data_identity": "d1"}
        assert choose_run_hash(args, tmp_path, fallback)[0] == md5_of(keyed)
    assert TrainArgs().run_hash() == md5_of(old_tile_record(TrainArgs(), toy_data=False))


def test_layout_runs_keep_their_hashes():
    for args, toy in (
        (LayoutTrainArgs(), False),
        (LayoutTrainArgs(source="nlp", toy_data=True), True),
        (LayoutTrainArgs(source="nlp", max_files=100), True),
    ):
        fields = {k: getattr(args, k) for k in OLD_LAYOUT_FIELDS}
        assert args.run_hash() == md5_of({**fields, **({"toy_data": True} if toy else {})})


def test_the_old_spelling_in_sweeps_and_in_a_sweep_file(tmp_path):
    from baselines.jobs.layout_spec import ANY_LAYOUT

    sweep_file = tmp_path / "sweep.json"
    sweep_file.write_text(json.dumps([{"model": "MLP", "toy_data": True}]))
    (run_args,), _ = expand_runs(TILE_XLA, read_sweep_file(TILE_XLA, sweep_file), {})
    assert run_args == TrainArgs(model="MLP", max_files=100)
    (run_args,), _ = expand_runs(ANY_LAYOUT, read_sweep_file(ANY_LAYOUT, sweep_file), {})
    assert run_args.max_files == 100
    (overridden,), _ = expand_runs(
        TILE_XLA, read_sweep_file(TILE_XLA, sweep_file), {"toy_data": False, "seed": 1}
    )
    assert overridden.max_files is None and overridden.seed == 1  # as toy_data=False was


def test_the_job_says_what_its_old_spelling_does_and_plans_the_same_job(tmp_path):
    said: list[str] = []
    old, old_beam = kaggle_submission.parse_command(["--toy_data=True", "--seeds=1"], said.append)
    quiet: list[str] = []
    new, new_beam = kaggle_submission.parse_command(["--bundled_toy", "--seeds=1"], quiet.append)
    assert said == [kaggle_submission.TOY_DATA_NOTE] and quiet == []
    assert vars(old) == vars(new) and old.bundled_toy is True and old_beam == new_beam == []
    plans = [
        plan_job(a.data_root, str(tmp_path), a.collections, a.seeds, a.bundled_toy)
        for a in (old, new)
    ]
    assert plans[0] == plans[1] and plans[0].toy
    # Its toy tile trainings keep the run hashes the old --toy_data=True flag gave them.
    job = plans[0]
    flags = [f"--flagfile={job.recipe(TILE_XLA, 'recommended')}", *job.data_flags(TILE_XLA)]
    assert "--max_files=100" in flags
    before = [f for f in flags if f != "--max_files=100"] + ["--toy_data=True"]
    assert run_hash_of(TILE_XLA, flags) == run_hash_of(TILE_XLA, before)


def test_the_job_prints_the_line_once():
    done = run("kaggle_submission.py", "--toy_data=True", "--seeds=0")
    assert done.stdout.splitlines() == [kaggle_submission.TOY_DATA_NOTE]
    assert one_line_error(done) == "error: --seeds: must be at least 1, got 0"


def test_the_sweep_scripts_print_the_line_once():
    done = run("tiles_beam_experiments.py", "--toy_data=True", "--sweep=seeds", "--num_seeds=0")
    assert done.stdout.splitlines() == [TOY_DATA_NOTE]
    assert one_line_error(done) == "error: --num_seeds: must be at least 1, got 0"


# --- the new flags, one thing each ------------------------------------------------------


def test_max_files_reads_the_first_files_of_each_split_and_names_the_run(tmp_path):
    from baselines.tiles.task import TileTask

    args = TrainArgs(model="MLP", max_files=3, data_root=str(TILE_TOY), cache_dir=str(tmp_path))
    loaded = TileTask().load(args, progress=False, log=lambda _: None)
    for split, name in ((loaded.train, "train"), (loaded.valid, "valid"), (loaded.test, "test")):
        first = sorted(p.stem for p in (TILE_TOY / name).glob("*.npz"))[:3]
        assert list(split.tile_ids) == first
    hashes = {TrainArgs(max_files=n).run_hash() for n in (None, 3, 4, 100)}
    assert len(hashes) == 4
    assert LayoutTrainArgs(max_files=2).split_kwargs()["max_files"] == 2
    for bad in (0, -1):
        with pytest.raises(PipelineError, match="--max_files: must be at least 1"):
            TrainArgs(max_files=bad).check_flags()
    assert TrainArgs(max_files="None").max_files is None


def test_bundled_toy_reads_the_toy_set_whatever_the_default_root_holds():
    args = TrainArgs(bundled_toy=True)
    assert args.data_root == "data/tile_xla_toy" and args.max_files is None
    # Read as given (the toy set itself), never as a stand-in for a missing root.
    assert training_root(TILE_PLACE, args.data_root, lambda _: None) == (TILE_TOY, True, False)
    assert TrainArgs(bundled_toy=True, data_root=str(TILE_TOY)).data_root == str(TILE_TOY)
    with pytest.raises(PipelineError, match="--bundled_toy=True reads .* not --data_root=/x"):
        TrainArgs(bundled_toy=True, data_root="/x")
    # Layout's default root is the toy set: the same run.
    assert LayoutTrainArgs(bundled_toy=True) == LayoutTrainArgs()
    assert layout_train.parse_args(["--bundled_toy"]).run_hash() == LayoutTrainArgs().run_hash()
    # Ranking and evaluation: the toy set over the run's own root.
    root, origin, banner = ranking_root(TILE_PLACE, None, str(ROOT), bundled_toy=True)
    assert (root, origin) == (TILE_TOY, "--bundled_toy") and "TOY DATA" in banner
    root, _, _ = ranking_root(LAYOUT_PLACE, None, str(ROOT), bundled_toy=True)
    assert root == ROOT / "data" / "layout_toy"


def test_rank_and_evaluate_scripts_take_the_new_flags():
    import layout_evaluate
    import layout_gen_predictions_csv
    import tiles_evaluate
    import tiles_gen_predictions_csv

    for script, flag in (
        (tiles_gen_predictions_csv, "--dir"),
        (layout_gen_predictions_csv, "--dir"),
        (tiles_evaluate, "--dirs"),
        (layout_evaluate, "--dirs"),
    ):
        parsed = script.build_parser().parse_args([f"{flag}=m", "--bundled_toy"])
        assert Request.of(parsed, flag).bundled_toy is True
        both = script.build_parser().parse_args([f"{flag}=m", "--bundled_toy", "--data_root=d"])
        with pytest.raises(PipelineError, match="--bundled_toy=True reads the bundled toy set"):
            Request.of(both, flag)
    for script in (tiles_evaluate, layout_evaluate):
        parsed = script.build_parser().parse_args(["--dirs=m", "--max_files=2"])
        assert Request.of(parsed, "--dirs").max_files == 2
        with pytest.raises(PipelineError, match="--max_files: must be at least 1"):
            Request.of(script.build_parser().parse_args(["--dirs=m", "--max_files=0"]), "--dirs")


def test_an_evaluation_reads_the_first_files_only():
    from baselines.tiles.task import read_split

    split = read_split(TILE_TOY / "valid", None, None, False, max_files=2)
    assert list(split.tile_ids) == sorted(p.stem for p in (TILE_TOY / "valid").glob("*.npz"))[:2]


def test_no_doc_uses_the_old_spelling_but_to_say_it_still_works():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "--toy_data" in line:
                assert "old spelling" in line or "still works" in line, f"{path.name}:{number}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
