"""The one-command submission job: its plan, its step records, and the whole Beam pipeline
at toy size on the multi-process local runner (2 workers), rerun and resumed."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from baselines.core.errors import PipelineError
from baselines.core.run_json import read_gzip_json
from baselines.jobs import submission_job as job_lib
from baselines.jobs.submission_pipeline import local_workers

ROOT = Path(__file__).resolve().parents[1]


def test_collections_are_all_or_named_in_the_submissions_order():
    assert job_lib.parse_collections("all") == job_lib.COLLECTIONS
    picked = job_lib.parse_collections("layout:nlp:random, tile:xla")
    assert picked == ("tile:xla", "layout:nlp:random")
    with pytest.raises(PipelineError, match="unknown layout:nlp:rand;"):
        job_lib.parse_collections("tile:xla,layout:nlp:rand")


def _tile_only_root(tmp_path: Path) -> Path:
    for split in job_lib.SPLITS:
        folder = tmp_path / "npz" / "tile" / "xla" / split
        folder.mkdir(parents=True)
        (folder / "k.npz").write_bytes(b"")
    return tmp_path


def test_missing_collections_are_named_with_their_download_command(tmp_path):
    root = _tile_only_root(tmp_path)
    with pytest.raises(PipelineError) as e:
        job_lib.plan_job(str(root), str(tmp_path / "out"))
    message = str(e.value)
    for name in job_lib.LAYOUT_COLLECTIONS:
        source, search = name.split(":")[1:]
        assert f"{name} (no .npz in {root}/npz/layout/{source}/{search}/" in message
    assert "tile:xla (" not in message
    assert f"echo_download_commands.py --collections layout --dest {root}`" in message
    assert "--collections tile" not in message
    assert message.endswith("or leave them out with --collections=tile:xla")
    # Left out, nothing is missing.
    job = job_lib.plan_job(str(root), str(tmp_path / "out"), collections="tile:xla", seeds=2)
    assert [(c.name, cand, seed) for c, cand, seed in job.runs()] == [
        ("tile:xla", cand, seed) for cand in ("baseline", "recommended") for seed in (0, 1)
    ]


@pytest.mark.parametrize("kwargs, says", [({"seeds": 0}, "--seeds"), ({"epochs": 0}, "--epochs")])
def test_bad_counts_are_refused_before_anything_runs(tmp_path, kwargs, says):
    with pytest.raises(PipelineError, match=says):
        job_lib.plan_job(str(tmp_path), str(tmp_path / "out"), **kwargs)


def test_local_workers_are_bounded_by_cores_memory_and_trainings():
    assert local_workers(15, cores=2, mem_gb=24.0) == 2
    assert local_workers(15, cores=8, mem_gb=24.0) == 3  # 8 GB per training
    assert local_workers(1, cores=8, mem_gb=64.0) == 1
    assert local_workers(15, cores=8, mem_gb=4.0) == 1


def test_a_step_record_holds_only_for_its_inputs_and_existing_outputs(tmp_path):
    output = tmp_path / "out.csv"
    output.write_text("x")
    job_lib.write_done(tmp_path, {"models": ["a"]}, [str(output)], wall_s=1.0)
    assert job_lib.read_done(tmp_path, {"models": ["a"]})["wall_s"] == 1.0
    assert job_lib.read_done(tmp_path, {"models": ["a", "b"]}) is None
    output.unlink()
    assert job_lib.read_done(tmp_path, {"models": ["a"]}) is None


def test_a_failed_child_is_one_line_with_its_last_output_and_log(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("print('working')\nraise SystemExit('error: the data is bad')\n")
    with pytest.raises(PipelineError) as e:
        job_lib.run_child([str(script)], tmp_path / "fails.log")
    assert (
        str(e.value) == f"fails.py failed: error: the data is bad (log: {tmp_path / 'fails.log'})"
    )
    cost = job_lib.run_child(["-c", "x = bytearray(200 * 2**20)"], tmp_path / "ok.log")
    assert cost["peak_rss_mb"] >= 200 and cost["wall_s"] > 0
    # A child that sleeps 1 s uses its wall but no CPU; one that spins 1 s uses both.
    idle = job_lib.run_child(["-c", "import time; time.sleep(1)"], tmp_path / "idle.log")
    busy = ["-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1: pass"]
    spun = job_lib.run_child(busy, tmp_path / "busy.log")
    assert idle["wall_s"] >= 1 and idle["cpu_s"] < 0.9 < 1 <= spun["cpu_s"]


# ---------------------------------------------------------------------------
# The whole pipeline at toy size.


def _job(out: Path, *extra: str, toy: bool = True) -> tuple[str, float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "kaggle_submission.py"), f"--toy_data={toy}", "--seeds=1"]
        + ["--epochs=1", f"--out={out}", "--direct_num_workers=2", *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout, time.perf_counter() - started


def _rows(path: Path) -> list[tuple[str, str]]:
    with open(path, newline="") as f:
        return [(r["ID"], r["TopConfigs"]) for r in csv.DictReader(f)]


def _toy_test_ids() -> set[str]:
    ids = {f"tile:xla:{p.stem}" for p in (ROOT / "data" / "tile_xla_toy" / "test").glob("*.npz")}
    for name in job_lib.LAYOUT_COLLECTIONS:
        _, source, search = name.split(":")
        folder = ROOT / "data" / "layout_toy" / source / search / "test"
        ids |= {f"{name}:{p.stem}" for p in folder.glob("*.npz")}
    return ids


def _files(out: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in out.rglob("*") if p.is_file()}


def _check_submission(out: Path, stdout: str) -> None:
    """The submission is every collection's CSV row by row, on the toy test files' IDs."""
    assert "DirectRunner (2 workers" in stdout
    submission = _rows(out / "predictions_kaggle.csv")
    ids = [row_id for row_id, _ in submission]
    assert len(ids) == len(set(ids)) and set(ids) == _toy_test_ids()
    given: dict[str, str] = {}
    for name in job_lib.COLLECTIONS:
        rows = _rows(out / name.replace(":", "_") / "predictions.csv")
        assert rows and all(row_id.startswith(f"{name}:") for row_id, _ in rows)
        given.update(rows)
    assert dict(submission) == given  # every row is its collection's ranking: no dummy row
    assert "0 dummy" in stdout


def _check_report(out: Path) -> None:
    """report.md: each collection's choice table (each option's mean over the validation
    items of evaluation_items.csv, recomputed here), its figures, and every step's time
    and memory."""
    report = (out / "report.md").read_text()
    for name in job_lib.COLLECTIONS:
        items: dict[str, list[float]] = {}
        with open(out / name.replace(":", "_") / "evaluation_items.csv", newline="") as f:
            for row in csv.DictReader(f):
                items.setdefault(row["label"], []).append(float(row["figure"]))
        section = report.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert "Submitted: **" in section and f"![{name}" in section, section
        for option in ("baseline", "recommended", "blend"):
            defined = [v for v in items[option] if math.isfinite(v)]
            mean = sum(defined) / len(defined)
            row = next(line for line in section.splitlines() if line.startswith(f"| {option} |"))
            assert f"| {mean:.4f} |" in row, (row, mean)
        for candidate in ("baseline", "recommended"):
            assert f"| train {name} {candidate} seed 0 |" in report
        assert f"| rank {name} (test) |" in report


def test_the_toy_job_end_to_end_then_rerun_then_resumed(tmp_path):
    """All five collections on the multi-process local runner with 2 workers; a rerun after
    completion trains nothing and rewrites nothing; runs trained but not yet recorded (the
    job killed then) are found by their run hash, not trained again."""
    out = tmp_path / "job"
    stdout, _ = _job(out)
    _check_submission(out, stdout)
    _check_report(out)
    # Trainings read train and valid, the ranking valid and test: every layout split was read
    # into the job's own cache, once per collection.
    cached = sorted(p.name.split("-")[1] for p in (out / "cache" / "layout").iterdir())
    assert cached == ["test"] * 4 + ["train"] * 4 + ["valid"] * 4
    # The tile training ranks the test split at its end, so tile:xla's three splits are cached.
    cached = sorted(p.name.split("-")[0] for p in (out / "cache" / "tile").iterdir())
    assert cached == ["test", "train", "valid"]
    # The ranking step scores every validation configuration, so no layout training does too.
    layout_runs = sorted(out.glob("layout_*/run_*.jsonz"))
    assert len(layout_runs) == 4 * 2 and all("val" not in read_gzip_json(p) for p in layout_runs)

    before = _files(out)
    stdout, seconds = _job(out)
    assert _files(out) == before
    assert "started" not in stdout and stdout.count(": reused ") == 5 * 2 + 5 + 1
    assert "unchanged: " in stdout
    assert seconds < 60

    seed_dir = out / "tile_xla" / "recommended" / "seed_0"
    (seed_dir / job_lib.DONE).unlink()
    (out / "tile_xla" / job_lib.DONE).unlink()
    train_log = (seed_dir / "train.log").stat().st_mtime_ns
    submitted = _rows(out / "predictions_kaggle.csv")
    stdout, _ = _job(out)
    assert "started" not in stdout and "train tile:xla recommended seed 0: reused " in stdout
    assert (seed_dir / "train.log").stat().st_mtime_ns == train_log
    assert "choice tile:xla: " in stdout
    assert _rows(out / "predictions_kaggle.csv") == submitted  # the same models, the same ranks


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--seeds=0"], "error: --seeds: must be at least 1, got 0"),
        (["--collections=tile"], "error: --collections: unknown tile; use all or some of"),
        (["--toy_data=True", "--direct_num_wrkers=2"], "error: unknown flag --direct_num_wrkers"),
    ],
)
def test_bad_command_lines_end_in_one_line_before_any_step(tmp_path, flags, says):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "kaggle_submission.py"), f"--out={tmp_path / 'o'}", *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(says) and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------
# Reuse decisions and the report, with stub children: each step's script is replaced by a
# stub that writes outputs derived from its inputs and returns a cost of its own.


class StubChildren:
    """Stands in for `run_child`: writes what each script would write, from its inputs.

    - a training writes `model_<seed>/weights` (its content: `self.weights[(slug, seed)]`)
      and its run file, and prints `saved model:` as the scripts do;
    - an evaluation writes evaluation.{csv,md} with one value per model;
    - a ranking writes one row per model holding that model's weights;
    - the join concatenates the CSVs' rows (the submission).

    Every call returns a cost no other call has; `self.costs` maps each step's name (as the
    report names it) to the cost returned for it.
    """

    def __init__(self):
        self.calls: list[str] = []
        self.costs: dict[str, dict[str, float]] = {}
        self.weights: dict[tuple[str, int], str] = {}
        # Validation figure per item of each evaluated option (a candidate or "blend"),
        # and of each model folder name; 0.5 where not given.
        self.figures: dict[str, list[float]] = {}

    def __call__(self, cmd, log_path: Path, threads=None) -> dict[str, float]:
        flags = dict(a[2:].split("=", 1) for a in cmd[1:] if a.startswith("--") and "=" in a)
        slug = log_path.parent.name if cmd[0] != "create_kaggle_csv.py" else "join"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = ""
        if cmd[0].endswith("_train.py"):
            slug, candidate = log_path.parents[2].name, log_path.parents[1].name
            seed = int(flags["seed"])
            step = f"train {slug.replace('_', ':')} {candidate} seed {seed}"
            model = Path(flags["out_dir"]) / f"model_{candidate[0]}{seed}"
            model.mkdir(parents=True, exist_ok=True)
            (model / "weights").write_text(self.weights[(slug, seed)])
            (model.parent / f"run_{candidate[0]}{seed}.jsonz").write_text(f"run of seed {seed}")
            log = f"saved model: {model}\n"
        elif cmd[0].endswith("_evaluate.py"):
            step = f"evaluate {slug.replace('_', ':')} (valid)"
            models = flags["dirs"].split(",") + ["ensemble"]
            if slug == "tile_xla":
                rows = [f"x {Path(m).name},ALL,0.{i}1,0.{i}5,0.{i}9" for i, m in enumerate(models)]
                head = "model,program,top1_err,top5_err,opa"
            else:
                rows = [f"x {Path(m).name},all,all,0.{i}7,1.{i}" for i, m in enumerate(models)]
                head = "model,configs,level,kendall_tau,slowdown_1"
            Path(flags["output"] + ".csv").write_text("\n".join([head, *rows]) + "\n")
            Path(flags["output"] + ".md").write_text("evaluation\n")
            labels = [f"model {Path(m).name}" for m in flags["dirs"].split(",")]
            labels += [*json.loads(flags["groups_json"]), "blend"]
            items = ["label,item,figure"] + [
                f"{label},k{i},{v}"
                for label in labels
                for i, v in enumerate(self.figures.get(label, [0.5] * 4))
            ]
            Path(flags["output"] + "_items.csv").write_text("\n".join(items) + "\n")
        elif cmd[0].endswith("_gen_predictions_csv.py"):
            step = f"rank {slug.replace('_', ':')} (test)"
            models = flags["dir"].split(",")
            rows = [f"{slug}:{Path(m).name},{(Path(m) / 'weights').read_text()}" for m in models]
            Path(flags["output"]).write_text("\n".join(["ID,TopConfigs", *rows]) + "\n")
        else:
            step = "join"
            rows = [
                line
                for csv_path in flags["inputcsv"].split(",")
                for line in Path(csv_path).read_text().splitlines()[1:]
            ]
            Path(flags["output"]).write_text("\n".join(["ID,TopConfigs", *rows]) + "\n")
            log = f"wrote {flags['output']}: {len(rows)} rows, 0 dummy\n"
        log_path.write_text(log)
        self.calls.append(step)
        k = len(self.costs) + 1
        self.costs[step] = {"wall_s": 100.0 * k + 1, "peak_rss_mb": 1000.0 * k + 7}
        return dict(self.costs[step])


@pytest.fixture
def stub_job(tmp_path, monkeypatch):
    """(job with tile:xla and layout:xla:default, 2 seeds, on the toy sets; the stub)."""
    stub = StubChildren()
    monkeypatch.setattr(job_lib, "run_child", stub)
    # The stub's run files are no real runs: a training is found by its step record only.
    monkeypatch.setattr(job_lib, "finished_run", lambda *a: None)
    job = job_lib.plan_job(
        str(tmp_path), str(tmp_path / "out"), "tile:xla,layout:xla:default", seeds=2, toy=True,
        candidates={"tile": "recommended", "layout": "recommended"},
    )  # fmt: skip
    for c in job.collections:
        for seed in range(2):
            stub.weights[(c.slug, seed)] = f"{c.slug}-w{seed}-v1"
    return job, stub


def _run_stub_job(job) -> list[str]:
    """Trains, ranks and joins `job` through the job's own steps; the submission's rows."""
    ranked = []
    for c in job.collections:
        trained: dict[str, list[str]] = {}
        for _, candidate, seed in [r for r in job.runs() if r[0] is c]:
            done = job_lib.train_step(job, c, candidate, seed, None, lambda _: None)
            trained.setdefault(done["candidate"], []).append(done["model_dir"])
        ranked.append(job_lib.rank_step(job, c, trained, None, lambda _: None))
    job_lib.join_step(job, ranked, lambda _: None)
    return (job.out / "predictions_kaggle.csv").read_text().splitlines()[1:]


def _expected_rows(job, stub, seeds: int) -> list[str]:
    return [
        f"{c.slug}:model_r{s},{stub.weights[(c.slug, s)]}"
        for c in job.collections
        for s in range(seeds)
    ]


def test_a_rerun_with_nothing_changed_redoes_no_step(stub_job):
    job, stub = stub_job
    assert _run_stub_job(job) == _expected_rows(job, stub, 2)
    assert len(stub.calls) == 2 * 2 + 2 * 2 + 1
    stub.calls.clear()
    assert _run_stub_job(job) == _expected_rows(job, stub, 2)
    assert stub.calls == []


def test_a_collection_with_fewer_seeds_is_ranked_again_and_the_join_redone(stub_job):
    """The rank step's record must name the models it ranked (a record of the data alone
    would keep the two-seed ranking)."""
    job, stub = stub_job
    _run_stub_job(job)
    stub.calls.clear()
    one_seed = dataclasses.replace(job, seeds=1)
    assert _run_stub_job(one_seed) == _expected_rows(job, stub, 1)
    assert sorted(stub.calls) == sorted(
        ["evaluate tile:xla (valid)", "rank tile:xla (test)"]
        + ["evaluate layout:xla:default (valid)", "rank layout:xla:default (test)", "join"]
    )


def test_a_model_replaced_in_its_folder_is_ranked_again_and_submitted(stub_job):
    """A model retrained under the same folder name: the ranking and the join are redone,
    and the submission holds the new model's ranking. The new weights have the old ones'
    length, so the CSV keeps its size; it also keeps its time stamp, so a join that knew
    its inputs by size and time would keep the stale submission."""
    job, stub = stub_job
    _run_stub_job(job)
    stub.calls.clear()
    folder = job.out / "layout_xla_default"
    csv_path = folder / "predictions.csv"
    before = csv_path.stat()
    stub.weights[("layout_xla_default", 1)] = "layout_xla_default-w1-v2"
    (folder / "model_r1" / "weights").write_text("layout_xla_default-w1-v2")
    rows = _run_stub_job(job)
    assert rows == _expected_rows(job, stub, 2)
    assert "layout_xla_default:model_r1,layout_xla_default-w1-v2" in rows
    assert stub.calls == [
        "evaluate layout:xla:default (valid)",
        "rank layout:xla:default (test)",
        "join",
    ]
    assert csv_path.stat().st_size == before.st_size


def test_a_join_input_changed_in_content_only_is_joined_again(stub_job):
    """A re-ranked CSV of the same length and time stamp: only its content tells."""
    job, stub = stub_job
    _run_stub_job(job)
    csv_path = job.out / "tile_xla" / "predictions.csv"
    stat = csv_path.stat()
    head, first, second = csv_path.read_text().splitlines()
    csv_path.write_text("\n".join([head, second, first]) + "\n")  # the rows swapped
    os.utime(csv_path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert csv_path.stat().st_size == stat.st_size
    stub.calls.clear()
    rows = _run_stub_job(job)
    assert stub.calls == ["join"]
    assert rows[:2] == [second, first]


def test_each_report_row_shows_its_own_steps_time_and_memory(stub_job):
    """Every step returned a cost no other step had; report.md's table row of each step
    holds exactly that step's figures (wall seconds and peak RSS, rounded as shown)."""
    job, stub = stub_job
    _run_stub_job(job)
    path, written = job_lib.write_report(job, wall_s=5.0, where="stub")
    assert written
    table = path.read_text().split("## Time and memory", 1)[1]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[1].isdigit():
            rows[cells[0]] = (int(cells[1]), int(cells[2]))
    expected = {
        step: (round(cost["wall_s"]), round(cost["peak_rss_mb"]))
        for step, cost in stub.costs.items()
    }
    assert rows == expected
    assert len(set(rows.values())) == 2 * 2 + 2 * 2 + 1


@pytest.fixture
def two_candidates(tmp_path, monkeypatch):
    """(tile:xla with candidates baseline and recommended, 2 seeds each; the stub)."""
    stub = StubChildren()
    monkeypatch.setattr(job_lib, "run_child", stub)
    monkeypatch.setattr(job_lib, "finished_run", lambda *a: None)
    job = job_lib.plan_job(str(tmp_path), str(tmp_path / "out"), "tile:xla", seeds=2, toy=True)
    assert job.candidates["tile"] == ("baseline", "recommended")
    for seed in range(2):
        stub.weights[("tile_xla", seed)] = f"w{seed}"
    return job, stub


def _submitted_models(job) -> list[str]:
    rows = (job.out / "predictions_kaggle.csv").read_text().splitlines()[1:]
    return sorted(row.split(",")[0].split(":")[1] for row in rows)


def test_an_option_beyond_the_noise_on_validation_is_submitted_and_reported(two_candidates):
    """baseline beats recommended by +0.10 on every one of 4 items (standard error 0.0082):
    the ranking is made with baseline's two seeds, and the report says so with the paired
    difference worked out by hand."""
    job, stub = two_candidates
    stub.figures = {"recommended": [0.5, 0.4, 0.3, 0.4], "baseline": [0.6, 0.52, 0.38, 0.5]}
    _run_stub_job(job)
    assert _submitted_models(job) == ["model_b0", "model_b1"]
    path, _ = job_lib.write_report(job, wall_s=1.0, where="stub")
    section = path.read_text().split("## tile:xla\n", 1)[1].split("\n## ", 1)[0]
    assert "Submitted: **baseline**." in section
    assert "| option | Kaggle score (2 - top-5 best / best runtime) per seed |" in section
    row = next(line for line in section.splitlines() if line.startswith("| baseline |"))
    assert "| +0.1000 | 0.0082 | 4 | yes |" in row
    assert "| train tile:xla baseline seed 1 |" in path.read_text()


def test_a_difference_within_the_noise_keeps_the_recommended_recipe(two_candidates):
    """baseline's mean is higher (+0.025) but its paired differences (+0.3, -0.25, +0.2,
    -0.15) have a standard error of 0.13: recommended's seeds are submitted."""
    job, stub = two_candidates
    stub.figures = {"recommended": [0.5] * 4, "baseline": [0.8, 0.25, 0.7, 0.35]}
    _run_stub_job(job)
    assert _submitted_models(job) == ["model_r0", "model_r1"]
    choice = json.loads((job.out / "tile_xla" / job_lib.DONE).read_text())["choice"]
    assert choice["chosen"] == "recommended" and "cannot separate" in choice["reason"]


def test_the_blend_is_submitted_with_every_candidates_models(two_candidates):
    job, stub = two_candidates
    stub.figures = {"recommended": [0.5, 0.4, 0.3, 0.4], "blend": [0.7, 0.62, 0.48, 0.6]}
    _run_stub_job(job)
    assert _submitted_models(job) == ["model_b0", "model_b1", "model_r0", "model_r1"]


def test_a_rerun_that_adds_a_candidate_trains_only_that_candidate(two_candidates):
    job, stub = two_candidates
    _run_stub_job(job)
    stub.calls.clear()
    third = ROOT / "configs" / "ablation" / "try_plistmle.flags"
    more = dataclasses.replace(
        job, candidates={**job.candidates, "tile": (*job.candidates["tile"], str(third))}
    )
    _run_stub_job(more)
    trained = [call for call in stub.calls if call.startswith("train ")]
    assert trained == ["train tile:xla try_plistmle seed 0", "train tile:xla try_plistmle seed 1"]
    assert "evaluate tile:xla (valid)" in stub.calls  # three candidates now: chosen again


def test_a_missing_candidate_recipe_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(PipelineError, match="candidate recipe .*nosuch.flags does not exist"):
        job_lib.plan_job(
            str(tmp_path), str(tmp_path / "o"), toy=True, candidates={"layout": "nosuch"}
        )
    with pytest.raises(PipelineError, match="--tile_candidates: "):
        job_lib.plan_job(str(tmp_path), str(tmp_path / "o"), toy=True, candidates={"tile": "a,,b"})


@pytest.mark.slow
def test_the_choice_never_reads_test_labels(tmp_path):
    """The same tile job twice on a copy of the toy set, the second time with runtimes
    written into every test file (the toy test files, like Kaggle's, hold zeros): the
    choice, each option's validation figures and the submission are the same."""
    root = tmp_path / "data"
    tile = root / "npz" / "tile" / "xla"
    shutil.copytree(ROOT / "data" / "tile_xla_toy", tile)
    flags = ["--collections=tile:xla", f"--data_root={root}"]
    _job(tmp_path / "clean", *flags, toy=False)
    rng = np.random.default_rng(0)
    for path in sorted((tile / "test").glob("*.npz")):
        with np.load(path) as f:
            arrays = dict(f)
        arrays["config_runtime"] = rng.integers(1, 10**6, size=arrays["config_runtime"].shape)
        np.savez(path, **arrays)
    _job(tmp_path / "poisoned", *flags, toy=False)
    choices = [
        json.loads((tmp_path / run / "tile_xla" / job_lib.DONE).read_text())["choice"]
        for run in ("clean", "poisoned")
    ]
    assert choices[0] == choices[1]
    assert {o["option"] for o in choices[0]["options"]} == {"baseline", "recommended", "blend"}
    assert _rows(tmp_path / "clean" / "predictions_kaggle.csv") == _rows(
        tmp_path / "poisoned" / "predictions_kaggle.csv"
    )


@pytest.mark.slow
def test_the_toy_job_runs_on_a_local_dask_cluster_of_two_workers(tmp_path, monkeypatch):
    """A Dask LocalCluster of 2 worker processes on 127.0.0.1 (Beam's DaskRunner): the two
    trainings run on different workers, each step's worker is in report.md, and the
    submission is complete: every tile test file once, its top 5 distinct configurations."""
    distributed = pytest.importorskip("distributed", reason="the Dask extra: make install-dask")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the workers import the pipeline's steps
    out = tmp_path / "dask"
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None,
    )  # fmt: skip
    try:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "kaggle_submission.py"), "--toy_data=True"]
            + ["--collections=tile:xla", "--seeds=1", "--epochs=1", f"--out={out}"]
            + ["--runner=DaskRunner", f"--dask_client_address={cluster.scheduler_address}"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
        )
    finally:
        cluster.close()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "running on DaskRunner" in proc.stdout
    workers = {
        json.loads((out / "tile_xla" / c / "seed_0" / job_lib.DONE).read_text())["worker"]
        for c in ("baseline", "recommended")
    }
    assert len(workers) == 2
    report = (out / "report.md").read_text()
    assert all(f"| {worker} |" in report for worker in workers)
    rows = dict(_rows(out / "predictions_kaggle.csv"))
    tests = sorted((ROOT / "data" / "tile_xla_toy" / "test").glob("*.npz"))
    assert sorted(rows) == sorted(f"tile:xla:{p.stem}" for p in tests)
    for path in tests:
        configs = np.load(path)["config_feat"].shape[0]
        ranking = [int(i) for i in rows[f"tile:xla:{path.stem}"].split(";")]
        assert len(ranking) == len(set(ranking)) == min(5, configs)
        assert all(0 <= i < configs for i in ranking)


# ---------------------------------------------------------------------------
# The board: a collection ranked as soon as its own trainings end, and freed cores.


def test_a_training_starting_after_a_lane_ended_gets_its_cores(tmp_path):
    from baselines.jobs.board import Board

    board = Board(tmp_path, "run1", lanes=3, cores=6)
    assert board.threads() == 2  # 6 cores over 3 working lanes
    board.lane_ended(0)
    assert board.threads() == 3
    board.lane_ended(2)
    assert board.threads() == 6
    assert Board(tmp_path, "run1", lanes=3, cores=None).threads() is None  # the runner's call


def test_a_ranking_is_claimed_once_per_run(tmp_path):
    from baselines.jobs.board import Board

    first, second = Board(tmp_path, "run1", 2, 2), Board(tmp_path, "run1", 2, 2)
    assert first.claim("tile_xla") and not second.claim("tile_xla")
    assert second.claim("layout_xla_default")
    assert Board(tmp_path, "run2", 2, 2).claim("tile_xla")  # a later run claims afresh


def test_trainings_are_taken_longest_first():
    """Weights 5 (tile), 3 (nlp), 1 (xla): the job's order is tile, xla, xla, nlp, nlp; the
    lanes take tile's, then nlp's, then xla's, each collection's seeds in order."""
    from baselines.jobs.submission_pipeline import training_order

    one = {"tile": "recommended", "layout": "recommended"}
    job = job_lib.plan_job("", "out", toy=True, seeds=2, candidates=one)
    assert [c.name for c, _, _ in job.runs()][::2] == list(job_lib.COLLECTIONS)
    order = [(name, seed) for _, _, name, _, seed in training_order(job)]
    names = ["tile:xla", "layout:nlp:default", "layout:nlp:random"]
    names += ["layout:xla:default", "layout:xla:random"]
    assert order == [(n, s) for n in names for s in (0, 1)]


def test_a_lane_that_is_free_takes_the_next_training_no_lane_has_taken(stub_job, monkeypatch):
    """Two lanes walk the same list (tile's 2 seeds, then layout's 2): while lane 0 is held
    in its first training, lane 1 takes all three others and ranks layout; lane 0 then
    ranks tile. Each training runs once. (Trainings dealt to lanes in advance would leave
    lane 1 waiting with a fixed share, and lane 0 would never be released.)"""
    import threading

    from baselines.jobs.board import Board
    from baselines.jobs.submission_pipeline import run_lane, training_order

    job, stub = stub_job
    held, lanes_of = threading.Event(), {}
    record = stub.__call__

    def child(cmd, log_path, threads=None):
        name = threading.current_thread().name
        if "_train.py" in cmd[0]:
            lanes_of.setdefault(name, []).append(log_path.parents[2].name + log_path.parent.name)
            if name == "lane0":
                assert held.wait(60), "lane 1 did not take the other trainings"
        return record(cmd, log_path, threads)

    monkeypatch.setattr(job_lib, "run_child", child)
    keyed = training_order(job)
    ranked: dict[str, list[str]] = {}

    def lane(number: int, board: Board) -> None:
        rankings = run_lane(job, board, number, keyed, lambda _: None)
        ranked[f"lane{number}"] = [r["collection"] for r in rankings]

    first = threading.Thread(target=lane, args=(0, Board(job.out, "run", 2, 2)), name="lane0")
    first.start()
    while not lanes_of.get("lane0"):
        time.sleep(0.01)
    second = threading.Thread(target=lane, args=(1, Board(job.out, "run", 2, 2)), name="lane1")
    second.start()
    second.join(60)
    held.set()
    first.join(60)
    assert lanes_of == {
        "lane0": ["tile_xlaseed_0"],
        "lane1": ["tile_xlaseed_1", "layout_xla_defaultseed_0", "layout_xla_defaultseed_1"],
    }
    assert ranked == {"lane0": ["tile:xla"], "lane1": ["layout:xla:default"]}


def test_a_collection_is_ranked_as_soon_as_its_own_trainings_end(stub_job):
    """One lane, two collections: tile:xla's evaluation and ranking come before
    layout:xla:default's first training, not after every training (a barrier)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from baselines.jobs.beam import make_pipeline
    from baselines.jobs.board import Board
    from baselines.jobs.submission_pipeline import build_pipeline

    job, stub = stub_job
    options = PipelineOptions(["--direct_running_mode=in_memory", "--direct_num_workers=1"])
    pipeline = make_pipeline(options, "DirectRunner")
    build_pipeline(pipeline, job, Board(job.out, "run", 1, 2), lanes=1)
    pipeline.run().wait_until_finish()
    tile = [f"train tile:xla recommended seed {s}" for s in (0, 1)]
    layout = [f"train layout:xla:default recommended seed {s}" for s in (0, 1)]
    assert stub.calls == [
        *tile, "evaluate tile:xla (valid)", "rank tile:xla (test)",
        *layout, "evaluate layout:xla:default (valid)", "rank layout:xla:default (test)",
        "join",
    ]  # fmt: skip
