#!/usr/bin/env python3
"""Trains a sweep of tile models as an Apache Beam pipeline, one run per element.

    python tiles_beam_experiments.py --sweep=paper --debug      # the first 2 runs of the grid
    python tiles_beam_experiments.py --sweep=seeds --num_seeds=3 --flagfile=configs/baseline.flags
    python tiles_beam_experiments.py --sweep=my_sweep.json --epochs=3 --out_dir=out/sweep
    python tiles_beam_experiments.py --sweep=paper --runner=FlinkRunner --flink_master=host:8081

Every `tiles_train.py` flag given here (`--flagfile` included) overrides that
flag in every run. Other flags go to Apache Beam (`--runner` and its options);
without `--runner` the sweep runs on Beam's local runner in multi-processing
mode (`--direct_num_workers=2 --direct_running_mode=multi_processing`). Each
run trains as `tiles_train.py` would; a failed run is reported and the sweep
goes on. At the end `sweep_summary.csv` and `sweep_summary.md` are written to
`--out_dir`: the runs by validation top-5 error, the failures, and the command
that ensembles the best `--ensemble_top` runs. Exit status 1 if a run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import difflib
import io
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from baselines.core.cli import HelpFormatter, add_field_flags, parse_bool
from baselines.core.errors import PipelineError, run_cli
from baselines.core.flagfile import expand_flagfiles
from baselines.tiles import sweeps
from baselines.tiles.train_args import TrainArgs

DIRECT_RUNNERS = ("DirectRunner", "SwitchingDirectRunner")
# Local defaults; the workers' Beam log lines above ERROR are start-up noise.
DIRECT_DEFAULTS = {
    "direct_num_workers": "2",
    "direct_running_mode": "multi_processing",
    "default_sdk_harness_log_level": "ERROR",
}


def build_parser() -> argparse.ArgumentParser:
    """tiles_train.py's flags (one per TrainArgs field; only given ones override), the sweep's."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Flags not listed here are Apache Beam pipeline options (--runner, "
        "--direct_num_workers, --project, ...). --flagfile=FILE reads flags from a file.",
        allow_abbrev=False,  # a Beam option must never be taken for a tiles flag
        formatter_class=HelpFormatter,
    )
    # No default: a flag not given is absent, so it leaves the sweep's value alone.
    add_field_flags(
        parser,
        TrainArgs,
        default=lambda field: argparse.SUPPRESS,
        help=lambda field: f"tiles_train.py's --{field.name}, set in every run",
    )
    parser.add_argument(
        "--sweep",
        default="paper",
        help="paper (the paper's grid), seeds (--num_seeds N of the recipe given by the "
        "other flags), or FILE.json (a list of flag dicts)",
    )
    parser.add_argument("--num_seeds", type=int, default=None, help="seeds 0..N-1 (--sweep=seeds)")
    parser.add_argument(
        "--debug",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help=f"train only the first {sweeps.DEBUG_RUNS} runs",
    )
    parser.add_argument(
        "--ensemble_top", type=int, default=3, help="runs in the summary's ensemble command"
    )
    parser.add_argument(
        "--tf_threads",
        type=int,
        default=None,
        help="TensorFlow intra- and inter-op threads per worker process (default: on the "
        "local runner, cores / --direct_num_workers; elsewhere TensorFlow's own choice)",
    )

    def refuse(message: str):
        raise PipelineError(message)

    parser.error = refuse  # one line, as every bad input
    return parser


def _beam_parse(options) -> dict:
    """Beam's parse of its options; an option Beam rejects becomes a PipelineError."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            return options.get_all_options()
    except SystemExit:
        lines = [line for line in stderr.getvalue().splitlines() if line.strip()]
        reason = lines[-1].split("error: ", 1)[-1] if lines else "rejected"
        raise PipelineError(f"Beam pipeline option: {reason}") from None


def beam_options(beam_args: list[str]):
    """PipelineOptions from the flags that are not tiles flags, checked by Beam.

    On the local runner the defaults are two worker processes; options Beam
    does not know are refused there. Other runners get them as they are
    (portable runners hand them to their job server), except near-misses of a
    tiles flag.
    """
    from apache_beam.options.pipeline_options import PipelineOptions

    given = {arg[2:].split("=", 1)[0] for arg in beam_args if arg.startswith("--")}
    parsed = _beam_parse(PipelineOptions(beam_args))
    runner = parsed.get("runner") or "DirectRunner"
    if runner in DIRECT_RUNNERS:
        beam_args = beam_args + [f"--{k}={v}" for k, v in DIRECT_DEFAULTS.items() if k not in given]
    options = PipelineOptions(beam_args)
    parsed = _beam_parse(options)
    if runner in DIRECT_RUNNERS:
        if parsed["direct_num_workers"] < 0:
            raise PipelineError(
                f"--direct_num_workers: must be 0 (one per core) or more, "
                f"got {parsed['direct_num_workers']}"
            )
        if parsed["direct_running_mode"] == "multi_threading":
            raise PipelineError(
                "--direct_running_mode=multi_threading: runs share TensorFlow's process-wide "
                "seed and threads that way; use multi_processing (or in_memory, one at a time)"
            )
    unknown = sorted(set(options.get_all_options(retain_unknown_options=True)) - set(parsed))
    for name in unknown:
        near = difflib.get_close_matches(name, sorted(TrainArgs.flag_names()), n=1)
        if runner in DIRECT_RUNNERS or near:
            hint = f"; did you mean --{near[0]}?" if near else ""
            raise PipelineError(
                f"unknown flag --{name}: neither a training flag (TrainArgs) nor a Beam "
                f"pipeline option{hint}"
            )
    return options, runner, parsed


def make_pipeline(options, runner: str):
    """A Beam pipeline; the local runner is Beam's FnApiRunner, as the DirectRunner's batch mode.

    Beam's DirectRunner first tries the Prism runner (a Go binary it downloads)
    which runs every element in the launching process and ignores
    --direct_running_mode; the FnApiRunner is what runs batch pipelines with
    --direct_num_workers worker processes.
    """
    import apache_beam as beam

    if runner in DIRECT_RUNNERS:
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        # Local worker processes import `baselines` from this repository.
        path = os.environ.get("PYTHONPATH", "")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), path) if p)
        return beam.Pipeline(
            runner=fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(info)),
            options=options,
        )
    try:
        return beam.Pipeline(options=options)
    except (ValueError, ImportError) as e:
        raise PipelineError(f"--runner: {' '.join(str(e).split())}") from None


def sweep_pipeline(pipeline, runs, out_dir: Path, ensemble_top: int, tf_threads: int):
    """Create -> Reshuffle (spread over workers) -> train each -> one summary."""
    import apache_beam as beam

    total = len(runs)

    class TrainRun(beam.DoFn):
        """Trains one TrainArgs element; TensorFlow is imported in the worker."""

        def setup(self):
            if str(ROOT) not in sys.path:
                sys.path.insert(0, str(ROOT))
            from baselines.core.startup import prepare_tensorflow_import

            prepare_tensorflow_import()
            import tensorflow as tf

            if tf_threads > 0:
                try:
                    tf.config.threading.set_intra_op_parallelism_threads(tf_threads)
                    tf.config.threading.set_inter_op_parallelism_threads(tf_threads)
                except RuntimeError:  # TensorFlow already running in this process: keep it
                    pass

        def process(self, element):
            from baselines.tiles import train_lib

            index, args = element
            log = lambda line: print(line, flush=True)  # noqa: E731
            yield sweeps.run_one(index, total, args, train_lib.train, log)

    def write(results):
        csv_path, md_path = sweeps.write_summary(out_dir, results, ensemble_top)
        print(f"wrote {csv_path} and {md_path}", flush=True)

    _ = (
        pipeline
        | "Runs" >> beam.Create(list(enumerate(runs)))
        | "Spread" >> beam.Reshuffle()
        | "Train" >> beam.ParDo(TrainRun())
        | "Collect" >> beam.combiners.ToList()
        | "Summary" >> beam.Map(write)
    )


def count_failed(csv_path: Path) -> int:
    with open(csv_path, encoding="utf-8", newline="") as f:
        return sum(row["status"] != "ok" for row in csv.DictReader(f))


@dataclasses.dataclass
class Plan:
    """What a command line asks for, checked, before anything runs."""

    sweep: sweeps.Sweep
    runs: list[TrainArgs]
    repeats: int  # entries dropped as repeats of another run
    out_dir: Path
    flags: argparse.Namespace
    beam_args: list[str]


def plan(argv: list[str]) -> Plan:
    """Parses and checks the command line (no Beam, no TensorFlow yet)."""
    argv = expand_flagfiles(argv, TrainArgs.flag_names())
    flags, beam_args = build_parser().parse_known_args(argv)
    if flags.ensemble_top < 1:
        raise PipelineError(f"--ensemble_top: must be at least 1, got {flags.ensemble_top}")
    if flags.tf_threads is not None and flags.tf_threads < 0:
        raise PipelineError(f"--tf_threads: must be 0 or more, got {flags.tf_threads}")
    overrides = {k: v for k, v in vars(flags).items() if k in TrainArgs.flag_names()}
    sweep = sweeps.load_sweep(flags.sweep, flags.num_seeds)
    runs, repeats = sweeps.expand_runs(sweep, overrides)
    if flags.debug:
        runs = runs[: sweeps.DEBUG_RUNS]
    return Plan(sweep, runs, repeats, sweeps.summary_dir(runs), flags, beam_args)


def main(argv: list[str] | None = None) -> int:
    for name in ("apache_beam", None):  # Beam's start-up warnings; runs print their own lines
        logging.getLogger(name).setLevel(logging.ERROR)
    todo = plan(sys.argv[1:] if argv is None else argv)
    runs, out_dir = todo.runs, todo.out_dir
    options, runner, parsed = beam_options(todo.beam_args)
    local = runner in DIRECT_RUNNERS
    workers = max(1, int(parsed.get("direct_num_workers") or os.cpu_count() or 1))
    workers = 1 if parsed.get("direct_running_mode") == "in_memory" else workers
    tf_threads = todo.flags.tf_threads
    if tf_threads is None:  # the machine's cores shared by the local worker processes
        tf_threads = max(1, (os.cpu_count() or 1) // workers) if local else 0
    pipeline = make_pipeline(options, runner)
    where = runner
    if local:
        where += (
            f" ({workers} worker{'s' * (workers > 1)}, {parsed['direct_running_mode']}, "
            f"TensorFlow threads per worker: {tf_threads})"
        )
    note = f" ({todo.repeats} repeated runs dropped)" if todo.repeats else ""
    count = f"{len(runs)} run{'s' * (len(runs) > 1)}"
    print(f"sweep {todo.sweep.name}: {count}{note} on {where}; out_dir {out_dir}", flush=True)
    sweep_pipeline(pipeline, runs, out_dir, todo.flags.ensemble_top, tf_threads)
    started = time.time()
    try:
        pipeline.run().wait_until_finish()
    except Exception as e:  # the runner's own failure (the runs' are in the summary)
        lines = [line for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        raise PipelineError(f"the Beam pipeline failed: {lines[-1].strip()}") from None

    md_path, csv_path = out_dir / sweeps.SUMMARY_MD, out_dir / sweeps.SUMMARY_CSV
    if not (md_path.is_file() and md_path.stat().st_mtime >= started - 1):
        print(f"the summary is written by the pipeline's workers to {md_path}", flush=True)
        return 0
    print(md_path.read_text(encoding="utf-8"), flush=True)
    failed = count_failed(csv_path)
    if failed:
        print(f"error: {failed} of {len(runs)} runs failed (see {md_path})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    run_cli(main)
