"""The submission job (`jobs/submission_job.py`) as one Apache Beam pipeline, and its options.

    Create (lane, (collection, candidate, seed)) -> GroupByKey(lane)
        -> train each, and rank a collection once its last training ends -> ToList -> join

Beam's local runner hands each worker a fixed share of a stage's keys and runs
it one element after another, so there the trainings are first dealt into one
lane per worker, longest first (`training_lanes`); elsewhere every training is
a lane of its own. The lanes meet on a board of files (`jobs/board.py`): a
collection is ranked by the lane that ends its last training, and a training
takes the cores of the lanes that have ended. The local workers are processes of
this machine, as many as its cores and memory allow (`local_workers`); a portable
runner (Flink, Spark, Dataflow) needs the repository, the data and `--out` on
storage every worker sees. Beam is imported only inside these functions.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence

from baselines.core.errors import PipelineError
from baselines.jobs.beam import DIRECT_RUNNERS, _beam_parse, make_pipeline
from baselines.jobs.board import Board
from baselines.jobs.collections import CollectionSpec
from baselines.jobs.submission_job import Job, join_step, rank_step, train_step, trained_models

TRAINING_BUDGET_GB = 8.0  # peak RSS one recommended training may reach at the real size
DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"


def training_lanes(runs: Sequence[tuple[CollectionSpec, int]], lanes: int) -> list[int]:
    """The lane of each run: longest first, each into the lane with the least work so far.

    The collections' `training_weight`s 5, 3 and 1 are a recommended training's time on
    2 cores: about 26 min on tile:xla, 15 on an nlp layout collection, 5 on an xla one.
    """
    load = [0.0] * lanes
    lane_of = [0] * len(runs)
    order = sorted(range(len(runs)), key=lambda i: -runs[i][0].training_weight)
    for i in order:
        lane = min(range(lanes), key=lambda k: (load[k], k))
        lane_of[i] = lane
        load[lane] += runs[i][0].training_weight
    return lane_of


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


def build_pipeline(pipeline, job: Job, board: Board, lanes: int | None = None) -> None:
    """Adds the job's steps to a Beam pipeline; `lanes`: the local runner's workers, sharing
    the board's cores (None: every training is an element of its own, placed where the
    runner likes)."""
    import apache_beam as beam

    by_name = {c.name: c for c in job.collections}
    runs = job.runs()
    lane_of = training_lanes(runs, lanes) if lanes else list(range(len(runs)))
    # Longest first within a lane: the short trainings left at the end start once other
    # lanes have ended, and take their cores.
    keyed = [
        (lane, (-c.training_weight, i, c.name, candidate, seed))
        for i, (lane, (c, candidate, seed)) in enumerate(zip(lane_of, runs))
    ]

    def log(line: str) -> None:
        print(line, flush=True)

    def train(element):
        lane, trainings = element
        for _, _, name, candidate, seed in sorted(trainings):
            c = by_name[name]
            train_step(job, c, candidate, seed, board.threads(), log)
            trained = trained_models(job, c)
            # The lane that sees the collection's last training end ranks it, once.
            if trained is not None and board.claim(c.slug):
                yield rank_step(job, c, trained, board.threads(), log)
        board.lane_ended(lane)

    def join(ranked):
        missing = sorted(set(by_name) - {r["collection"] for r in ranked})
        if missing:
            raise PipelineError(f"no ranking of {', '.join(missing)}: rerun the job to resume")
        join_step(job, ranked, log)

    if lanes:
        lanes_of_runs = pipeline | "Runs" >> beam.Create(keyed) | "Lanes" >> beam.GroupByKey()
    else:  # no grouping: a group's elements would run in one place
        lanes_of_runs = pipeline | "Runs" >> beam.Create([(lane, [run]) for lane, run in keyed])
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
    build_pipeline(pipeline, job, board, workers)
    try:
        pipeline.run().wait_until_finish()
    except Exception as e:  # a step's PipelineError arrives wrapped by the runner
        lines = [line for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        step = [line for line in lines if "PipelineError" in line]
        reason = (step or lines)[-1].split("PipelineError: ", 1)[-1].strip()
        raise PipelineError(f"the submission pipeline failed: {reason}") from None
    shutil.rmtree(board.folder, ignore_errors=True)
    return where
