"""A sweep's command line and Apache Beam pipeline, for any collection: one element per run,
the summary once every run has ended. Beam is imported only where the pipeline runs."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import importlib
import io
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from baselines.core.args_record import old_spelling_notes
from baselines.core.cli import HelpFormatter, add_bool_flag, add_field_flags
from baselines.core.errors import PipelineError
from baselines.core.flagfile import expand_flagfiles
from baselines.jobs.collections import ROOT, CollectionSpec
from baselines.jobs.sweeps import (
    DEBUG_RUNS,
    SUMMARY_CSV,
    SUMMARY_MD,
    Sweep,
    count_failed,
    expand_runs,
    load_sweep,
    run_one,
    summary_dir,
    write_summary,
)

DIRECT_RUNNERS = ("DirectRunner", "SwitchingDirectRunner")
# Local defaults; the workers' Beam log lines above ERROR are start-up noise.
DIRECT_DEFAULTS = {
    "direct_num_workers": "2",
    "direct_running_mode": "multi_processing",
    "default_sdk_harness_log_level": "ERROR",
}


def build_parser(spec: CollectionSpec, doc: str) -> argparse.ArgumentParser:
    """The sweep script's parser: the training flags (given ones override), the sweep's own."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        epilog="Flags not listed here are Apache Beam pipeline options (--runner, "
        "--direct_num_workers, --project, ...). --flagfile=FILE reads flags from a file.",
        allow_abbrev=False,  # a Beam option must never be taken for a training flag
        formatter_class=HelpFormatter,
    )
    # No default: a flag not given is absent, so it leaves the sweep's value alone.
    add_field_flags(
        parser,
        spec.args_type,
        default=lambda field: argparse.SUPPRESS,
        help=lambda field: f"{spec.train_script}'s --{field.name}, set in every run",
    )
    parser.add_argument(
        "--sweep",
        default=spec.default_sweep,
        help=f"{spec.named_help}seeds (--num_seeds N of the recipe given by the "
        "other flags), or FILE.json (a list of flag dicts)",
    )
    parser.add_argument("--num_seeds", type=int, default=None, help="seeds 0..N-1 (--sweep=seeds)")
    add_bool_flag(parser, "--debug", f"train only the first {DEBUG_RUNS} runs")
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


def beam_options(spec: CollectionSpec, beam_args: list[str]):
    """(PipelineOptions, runner, parsed options) of the flags that are not training flags:
    locally two worker processes by default and unknown options refused; other runners get
    them as they are, but for near-misses of a training flag."""
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
        near = difflib.get_close_matches(name, sorted(spec.args_type.flag_names()), n=1)
        if runner in DIRECT_RUNNERS or near:
            hint = f"; did you mean --{near[0]}?" if near else ""
            raise PipelineError(
                f"unknown flag --{name}: neither a training flag ({spec.args_type.__name__}) "
                f"nor a Beam pipeline option{hint}"
            )
    return options, runner, parsed


def make_pipeline(options, runner: str):
    """A Beam pipeline; locally Beam's FnApiRunner with --direct_num_workers processes
    (the DirectRunner would try Prism, which runs every element in this process)."""
    import apache_beam as beam

    if runner in DIRECT_RUNNERS:
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.fn_api_runner import fn_runner
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        # Local worker processes import `baselines` from this repository (ROOT).
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


def sweep_pipeline(
    spec: CollectionSpec, pipeline, runs: list, out_dir: Path, ensemble_top: int, tf_threads: int
) -> None:
    """Create -> Reshuffle (spread over workers) -> train each -> one summary."""
    import apache_beam as beam

    total = len(runs)

    class TrainRun(beam.DoFn):
        """Trains one args element; TensorFlow is imported in the worker."""

        def setup(self):
            if str(ROOT) not in sys.path:
                sys.path.insert(0, str(ROOT))
            from baselines.core.startup import prepare_tensorflow_import

            prepare_tensorflow_import()
            import tensorflow as tf

            if tf_threads > 0:
                with contextlib.suppress(RuntimeError):  # TensorFlow already running: keep it
                    tf.config.threading.set_intra_op_parallelism_threads(tf_threads)
                    tf.config.threading.set_inter_op_parallelism_threads(tf_threads)

        def process(self, element):
            module, name = spec.train_function.split(":")
            train = getattr(importlib.import_module(module), name)
            index, args = element
            log = lambda line: print(line, flush=True)  # noqa: E731
            yield run_one(spec, index, total, args, train, log)

    def write(results):
        csv_path, md_path = write_summary(spec, out_dir, results, ensemble_top)
        print(f"wrote {csv_path} and {md_path}", flush=True)

    _ = (
        pipeline
        | "Runs" >> beam.Create(list(enumerate(runs)))
        | "Spread" >> beam.Reshuffle()
        | "Train" >> beam.ParDo(TrainRun())
        | "Collect" >> beam.combiners.ToList()
        | "Summary" >> beam.Map(write)
    )


@dataclasses.dataclass
class Plan:
    """What a command line asks for, checked, before anything runs."""

    sweep: Sweep
    runs: list
    repeats: int  # entries dropped as repeats of another run
    out_dir: Path
    flags: argparse.Namespace
    beam_args: list[str]


def plan(spec: CollectionSpec, doc: str, argv: list[str], log: Callable = lambda _: None) -> Plan:
    """Parses and checks the command line (no Beam, no TensorFlow yet); what an old spelling
    (e.g. --toy_data) does in the new ones is said through `log`."""
    argv = expand_flagfiles(argv, spec.args_type.flag_names())
    flags, beam_args = build_parser(spec, doc).parse_known_args(argv)
    for note in old_spelling_notes(vars(flags)):
        log(note)
    if flags.ensemble_top < 1:
        raise PipelineError(f"--ensemble_top: must be at least 1, got {flags.ensemble_top}")
    if flags.tf_threads is not None and flags.tf_threads < 0:
        raise PipelineError(f"--tf_threads: must be 0 or more, got {flags.tf_threads}")
    overrides = {k: v for k, v in vars(flags).items() if k in spec.args_type.flag_names()}
    sweep = load_sweep(spec, flags.sweep, flags.num_seeds)
    runs, repeats = expand_runs(spec, sweep, overrides)
    if flags.debug:
        runs = runs[:DEBUG_RUNS]
    return Plan(sweep, runs, repeats, summary_dir(runs), flags, beam_args)


def main(spec: CollectionSpec, doc: str, argv: list[str] | None = None) -> int:
    """Plans, runs the sweep on Beam, prints the summary; 1 if a run failed. `argv`: the command
    line's (`doc`: the script's docstring)."""
    argv = sys.argv[1:] if argv is None else argv
    for name in ("apache_beam", None):  # Beam's start-up warnings; runs print their own lines
        logging.getLogger(name).setLevel(logging.ERROR)
    todo = plan(spec, doc, argv, log=lambda line: print(line, flush=True))
    runs, out_dir = todo.runs, todo.out_dir
    options, runner, parsed = beam_options(spec, todo.beam_args)
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
    sweep_pipeline(spec, pipeline, runs, out_dir, todo.flags.ensemble_top, tf_threads)
    started = time.time()
    try:
        pipeline.run().wait_until_finish()
    except Exception as e:  # the runner's own failure (the runs' are in the summary)
        lines = [line for line in str(e).splitlines() if line.strip()] or [type(e).__name__]
        raise PipelineError(f"the Beam pipeline failed: {lines[-1].strip()}") from None

    md_path, csv_path = out_dir / SUMMARY_MD, out_dir / SUMMARY_CSV
    if not (md_path.is_file() and md_path.stat().st_mtime >= started - 1):
        print(f"the summary is written by the pipeline's workers to {md_path}", flush=True)
        return 0
    print(md_path.read_text(encoding="utf-8"), flush=True)
    failed = count_failed(csv_path)
    if failed:
        print(f"error: {failed} of {len(runs)} runs failed (see {md_path})", file=sys.stderr)
        return 1
    return 0
