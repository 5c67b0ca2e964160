"""The one-command submission job: its plan, its step records, and the whole Beam pipeline
at toy size on the multi-process local runner (2 workers), rerun and resumed."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from baselines.core import submission_job as job_lib
from baselines.core.errors import PipelineError
from baselines.core.submission_pipeline import local_workers, training_lanes

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
    for name in job_lib.LAYOUT:
        source, search = name.split(":")[1:]
        assert f"{name} (no .npz in {root}/npz/layout/{source}/{search}/" in message
    assert "tile:xla (" not in message
    assert f"echo_download_commands.py --collections layout --dest {root}`" in message
    assert "--collections tile" not in message
    assert message.endswith("or leave them out with --collections=tile:xla")
    # Left out, nothing is missing.
    job = job_lib.plan_job(str(root), str(tmp_path / "out"), collections="tile:xla", seeds=2)
    assert [(c.name, seed) for c, seed in job.runs()] == [("tile:xla", 0), ("tile:xla", 1)]


@pytest.mark.parametrize("kwargs, says", [({"seeds": 0}, "--seeds"), ({"epochs": 0}, "--epochs")])
def test_bad_counts_are_refused_before_anything_runs(tmp_path, kwargs, says):
    with pytest.raises(PipelineError, match=says):
        job_lib.plan_job(str(tmp_path), str(tmp_path / "out"), **kwargs)


def test_local_workers_are_bounded_by_cores_memory_and_trainings():
    assert local_workers(15, cores=2, mem_gb=24.0) == 2
    assert local_workers(15, cores=8, mem_gb=24.0) == 3  # 8 GB per training
    assert local_workers(1, cores=8, mem_gb=64.0) == 1
    assert local_workers(15, cores=8, mem_gb=4.0) == 1


def test_trainings_are_dealt_into_lanes_longest_first():
    job = job_lib.plan_job("", "out", toy=True, seeds=1)
    names = [c.name for c, _ in job.runs()]
    assert names == list(job_lib.COLLECTIONS)
    # Weights 5 (tile), 1, 1 (xla), 3, 3 (nlp), dealt longest first into the lighter lane:
    # tile -> 0 (5 | 0), nlp:default -> 1 (5 | 3), nlp:random -> 1 (5 | 6),
    # xla:default -> 0 (6 | 6), xla:random -> 0 on the tie (7 | 6).
    assert training_lanes(job.runs(), 2) == [0, 0, 0, 1, 1]
    assert training_lanes(job.runs(), 1) == [0] * 5
    assert sorted(training_lanes(job.runs(), 5)) == [0, 1, 2, 3, 4]
    # Three seeds: tile 15, nlp 18, xla 6 over 2 lanes -> 20 and 19, never one lane's 39.
    runs = job_lib.plan_job("", "out", toy=True, seeds=3).runs()
    lanes = training_lanes(runs, 2)
    weight = {"tile:xla": 5, "layout:xla:default": 1, "layout:xla:random": 1}
    loads = [0, 0]
    for (c, _), lane in zip(runs, lanes):
        loads[lane] += weight.get(c.name, 3)
    assert sorted(loads) == [19, 20]


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


# ---------------------------------------------------------------------------
# The whole pipeline at toy size.


def _job(out: Path, *extra: str) -> tuple[str, float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "kaggle_submission.py"), "--toy_data=True", "--seeds=1"]
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
    for name in job_lib.LAYOUT:
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
    """report.md: each collection's validation table (its evaluation.csv's values), a figure,
    and every step's time and memory."""
    report = (out / "report.md").read_text()
    for name in job_lib.COLLECTIONS:
        folder = out / name.replace(":", "_")
        with open(folder / "evaluation.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        if name == "tile:xla":
            value = next(r["top5_err"] for r in rows if r["program"] == "ALL")
        else:
            value = next(
                r["kendall_tau"] for r in rows if (r["configs"], r["level"]) == ("all",) * 2
            )
        section = report.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert "| seed 0 (model_" in section and f" {value} |" in section, section
        assert f"![{name}" in section
        assert f"| train {name} seed 0 |" in report and f"| rank {name} (test) |" in report


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

    before = _files(out)
    stdout, seconds = _job(out)
    assert _files(out) == before
    assert "started" not in stdout and stdout.count(": reused ") == 5 + 5 + 1
    assert "unchanged: " in stdout
    assert seconds < 60

    seed_dir = out / "tile_xla" / "seed_0"
    (seed_dir / job_lib.DONE).unlink()
    (out / "tile_xla" / job_lib.DONE).unlink()
    train_log = (seed_dir / "train.log").stat().st_mtime_ns
    submitted = _rows(out / "predictions_kaggle.csv")
    stdout, _ = _job(out)
    assert "started" not in stdout and "train tile:xla seed 0: reused " in stdout
    assert (seed_dir / "train.log").stat().st_mtime_ns == train_log
    assert "rank tile:xla: wrote" in stdout
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
