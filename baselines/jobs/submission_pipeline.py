"""The submission job (`jobs/submission_job.py`) as one Apache Beam pipeline, and its options.

    Create (lane, (collection, candidate, seed)) -> GroupByKey(lane)
        -> train each, and rank a collection once its last training ends -> ToList -> join

Beam's local runner hands each worker a fixed share of a stage's keys and runs
it one element after another, so there each worker runs one lane, and every lane
walks the same list of trainings, longest first, taking each one no other lane
has taken (`run_lane`): a lane that finishes early takes the next training, so
no static plan has to guess the trainings' times. Elsewhere every training is a
lane of its own. The lanes meet on a board of files (`jobs/board.py`): a
training is claimed there, a collection is ranked by the lane that ends its
last training, and a training takes the cores of the lanes that have ended.
The local workers are processes of this machine, as many as its cores and
memory allow (`local_workers`); a portable runner (Flink, Spark, Dataflow) needs
the repository, the data and `--out` on storage every worker sees. Beam is
imported only inside these functions.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator, Sequence

from baselines.core.errors import PipelineError
from baselines.jobs.beam import DIRECT_RUNNERS, _beam_parse, make_pipeline
from baselines.jobs.board import Board
from baselines.jobs.submission_job import (
    Job,
    candidate_name,
    join_step,
    rank_step,
    train_step,
    trained_models,
)

TRAINING_BUDGET_GB = 8.0  # peak RSS one recommended training may reach at the real size
DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def memory_gb() -> float:
    """This machine's memory (Linux: /proc/meminfo; elsewhere 8 GB per core, a guess)."""
    try:
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
        return kb / 2**20
    except (OSError, StopIteration, ValueError):
        return 8.0 * (os.cpu_count() or 1)


def local_workers(trainings: int, cores: int | None = None, mem_gb: float | None = None) -> int:
    """Local worker processes: one per core, as many as memory holds trainings of
    `TRAINING_BUDGET_GB`, no more than there are trainings, at least one.

        local_workers(15, cores=2, mem_gb=24.0) == 2; local_workers(15, 8, 24.0) == 3
    """
    cores = cores or os.cpu_count() or 1
    mem_gb = memory_gb() if mem_gb is None else mem_gb
    return max(1, min(cores, int(mem_gb // TRAINING_BUDGET_GB), trainings))


def pipeline_options(beam_args: Sequence[str], trainings: int):
    """(PipelineOptions, runner, workers or None off the local runner, TF threads per child).

    Locally the workers are `local_workers` processes unless --direct_num_workers
    says otherwise, each child gets the cores shared among them, and an option Beam
    does not know is refused.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    beam_args = [DASK_ARG if a == "--runner=DaskRunner" else a for a in beam_args]
    runner = _beam_parse(PipelineOptions(beam_args)).get("runner") or "DirectRunner"
    if runner == DASK_RUNNER:
        return dask_options(beam_args), "DaskRunner", None, None
    if runner not in DIRECT_RUNNERS:
        return PipelineOptions(beam_args), runner, None, None
    given = {arg[2:].split("=", 1)[0] for arg in beam_args if arg.startswith("--")}
    defaults = {
        "direct_num_workers": str(local_workers(trainings)),
        "direct_running_mode": "multi_processing",
        "default_sdk_harness_log_level": "ERROR",
    }
    beam_args += [f"--{k}={v}" for k, v in defaults.items() if k not in given]
    options = PipelineOptions(beam_args)
    parsed = _beam_parse(options)
    unknown = sorted(set(options.get_all_options(retain_unknown_options=True)) - set(parsed))
    if unknown:
        raise PipelineError(f"unknown flag --{unknown[0]}: neither this job's nor a Beam option")
    workers = parsed["direct_num_workers"]
    if workers < 1:
        raise PipelineError(f"--direct_num_workers: must be at least 1, got {workers}")
    if parsed["direct_running_mode"] != "multi_processing":
        workers = 1
    return options, runner, workers, max(1, (os.cpu_count() or 1) // workers)


DASK_ARG = f"--runner={DASK_RUNNER}"


def dask_options(beam_args: list[str]):
    """Beam's DaskRunner options: one Dask partition per element, so the cluster's workers
    share the trainings (`--dask_client_address` names a scheduler, else a local cluster)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise PipelineError(
            "--runner=DaskRunner needs the Dask extra: make install-dask "
            "(pip install -r requirements-dask.txt -c constraints.txt)"
        ) from None
    from apache_beam.options.pipeline_options import PipelineOptions

    given = {arg[2:].split("=", 1)[0] for arg in beam_args if arg.startswith("--")}
    if not given & {"dask_partition_size", "dask_npartitions"}:
        beam_args = [*beam_args, "--dask_partition_size=1"]
    return PipelineOptions(beam_args)


def training_order(job: Job) -> list[tuple[float, int, str, str, int]]:
    """Every training of the job as (-weight, index, collection, candidate, seed), longest
    first: the short trainings left at the end start once other lanes have ended, and take
    their cores."""
    runs = enumerate(job.runs())
    return sorted(
        (-c.training_weight, i, c.name, candidate, seed) for i, (c, candidate, seed) in runs
    )


def run_lane(job: Job, board: Board, lane: int, trainings, log) -> Iterator[dict]:
    """One lane: each of `trainings` (sort keys (-weight, index, collection, candidate,
    seed)) that no other lane has claimed, in order, then the ranking of each collection
    whose last training it ended; yields the rankings."""
    by_name = {c.name: c for c in job.collections}
    for _, _, name, candidate, seed in sorted(trainings):
        c = by_name[name]
        if not board.claim(f"train-{c.slug}-{candidate_name(candidate)}-{seed}"):
            continue  # another lane took it
        train_step(job, c, candidate, seed, board.threads(), log)
        trained = trained_models(job, c)
        # The lane that sees the collection's last training end ranks it, once.
        if trained is not None and board.claim(c.slug):
            yield rank_step(job, c, trained, board.threads(), log)
    board.lane_ended(lane)


def build_pipeline(pipeline, job: Job, board: Board, lanes: int | None = None) -> None:
    """Adds the job's steps to a Beam pipeline; `lanes`: the local runner's workers, each a
    lane over every training (None: every training is an element of its own, placed where
    the runner likes)."""
    import apache_beam as beam

    by_name = {c.name: c for c in job.collections}
    keyed = training_order(job)

    def log(line: str) -> None:
        print(line, flush=True)

    def train(element):
        lane, trainings = element
        yield from run_lane(job, board, lane, trainings, log)

    def join(ranked):
        missing = sorted(set(by_name) - {r["collection"] for r in ranked})
        if missing:
            raise PipelineError(f"no ranking of {', '.join(missing)}: rerun the job to resume")
        join_step(job, ranked, log)

    if lanes:
        every = [(lane, run) for lane in range(lanes) for run in keyed]
        lanes_of_runs = pipeline | "Runs" >> beam.Create(every) | "Lanes" >> beam.GroupByKey()
    else:  # no grouping: a group's elements would run in one place
        lanes_of_runs = pipeline | "Runs" >> beam.Create(
            [(i, [run]) for i, run in enumerate(keyed)]
        )
    _ = (
        lanes_of_runs
        | "TrainAndRank" >> beam.FlatMap(train)
        | "All" >> beam.combiners.ToList()
        | "Join" >> beam.Map(join)
    )


def run_pipeline(job: Job, beam_args: Sequence[str], log=print) -> str:
    """Runs the job on Beam (said first through `log`); the runner's description. A failed
    step ends the pipeline as one PipelineError; a rerun resumes it."""
    options, runner, workers, threads = pipeline_options(beam_args, len(job.runs()))
    cores = (os.cpu_count() or 1) if workers else None  # None: threads left to TensorFlow
    lanes = min(workers, len(job.runs())) if workers else len(job.runs())
    board = Board(job.out, uuid.uuid4().hex, lanes, cores)
    where = runner
    if workers is not None:
        where += (
            f" ({workers} worker{'s' * (workers > 1)}, "
            f"{threads} TensorFlow thread{'s' * (threads > 1)} per step, more once lanes end)"
        )
    log(f"running on {where}")
    pipeline = make_pipeline(options, runner)
    build_pipeline(pipeline, job, board, lanes if workers else None)
    try:
        pipeline.run().wait_until_finish()
    except Exception as e:  # a step's PipelineError arrives wrapped by the runner
        lines = [line for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        step = [line for line in lines if "PipelineError" in line]
        reason = (step or lines)[-1].split("PipelineError: ", 1)[-1].strip()
        raise PipelineError(f"the submission pipeline failed: {reason}") from None
    shutil.rmtree(board.folder, ignore_errors=True)
    return where
