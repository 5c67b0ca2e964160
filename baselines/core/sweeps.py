"""Sweeps of training runs on Apache Beam, for any collection: what to train, the summary.

A sweep is a list of flag dicts (keys = the training script's flag names) on
top of base flags; every run is `kind.args_type(**{**base, **entry, **overrides})`,
where `overrides` are the flags given on the command line (they win in every
run). A `SweepKind` holds what differs between collections (the args record,
the training function, the summary's metric columns and ranking);
`baselines/tiles/task.py` and `baselines/layout/task.py` define theirs.

    sweep = load_sweep(kind, "seeds", num_seeds=3)       # or a named sweep, or "FILE.json"
    runs, repeats = expand_runs(kind, sweep, {"epochs": 3})
    result = run_one(kind, 0, len(runs), runs[0], train, print)
    write_summary(kind, out_dir, [result, ...], ensemble_top=3)
    main(kind, ["--sweep=seeds", "--num_seeds=3"], __doc__)   # the entry scripts' whole body

Nothing here imports TensorFlow, and Beam only inside the functions that run
the pipeline; `run_one` gets the training function as an argument, and the
Beam workers import it by name (`kind.train_function`).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import difflib
import importlib
import io
import json
import logging
import math
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.core.cli import HelpFormatter, add_field_flags, parse_bool
from baselines.core.errors import PipelineError
from baselines.core.flagfile import expand_flagfiles
from baselines.core.io_utils import atomic_write_text, read_user_text

ROOT = Path(__file__).resolve().parents[2]  # the repository: Beam workers import from it
SUMMARY_CSV = "sweep_summary.csv"
SUMMARY_MD = "sweep_summary.md"
DEBUG_RUNS = 2  # --debug trains the first two runs, as upstream's script does
DIRECT_RUNNERS = ("DirectRunner", "SwitchingDirectRunner")
# Local defaults; the workers' Beam log lines above ERROR are start-up noise.
DIRECT_DEFAULTS = {
    "direct_num_workers": "2",
    "direct_running_mode": "multi_processing",
    "default_sdk_harness_log_level": "ERROR",
}

Result = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Named runs: each entry's flags on top of `base`."""

    name: str
    base: dict[str, Any]
    entries: tuple[dict[str, Any], ...]


@dataclasses.dataclass(frozen=True)
class SweepKind:
    """What one collection's sweeps need; the rest of this module is the same for all.

        SweepKind("layout", LayoutTrainArgs, "layout_train.py", "baselines.layout.train_lib:train",
                  "layout_gen_predictions_csv.py", ("val_tau", "val_opa"), metric_cells,
                  summarize, sort_key, "validation Kendall's tau (higher is better)", done_line)

    `metric_cells(result)` gives the values of `metric_columns` for a trained
    run; `summarize(record)` turns a training function's run record into
    those result fields plus `best_epoch` and `epochs_run`; `sort_key(result)`
    orders trained runs best first; `done_line(result)` is the log line of a
    trained run. `named_sweeps` are the `--sweep` names besides `seeds`;
    `ensemble_key(result)`, when given, keeps the ensemble to runs whose key is
    the best run's (one layout collection).
    """

    name: str
    args_type: type
    train_script: str
    train_function: str  # "module:function", imported in the Beam workers
    predict_script: str
    metric_columns: tuple[str, ...]
    metric_cells: Callable[[Result], Sequence[float]]
    summarize: Callable[[Mapping[str, Any]], dict[str, Any]]
    sort_key: Callable[[Result], tuple]
    ranking: str
    done_line: Callable[[Result], str]
    named_sweeps: Mapping[str, Callable[[], Sweep]] = dataclasses.field(default_factory=dict)
    named_help: str = ""  # --sweep's help on the named sweeps, e.g. "paper (the paper's grid), "
    default_sweep: str | None = None
    sweep_example: str = '[{"seed": 0}, {"seed": 1, "lr": 0.01}]'
    ensemble_key: Callable[[Result], Any] | None = None


def seeds_sweep(num_seeds: int) -> Sweep:
    """Seeds 0..num_seeds-1 of one recipe (the recipe is the command line's flags).

    seeds_sweep(2).entries == ({"seed": 0}, {"seed": 1})
    """
    if num_seeds < 1:
        raise PipelineError(f"--num_seeds: must be at least 1, got {num_seeds}")
    return Sweep("seeds", {}, tuple({"seed": seed} for seed in range(num_seeds)))


def _field_types(args_type: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(args_type)}


def check_flag_value(kind: SweepKind, name: str, value: Any, where: str) -> Any:
    """`value` for flag `name` if its JSON type fits the flag's type, else PipelineError.

    check_flag_value(kind, "lr", 1, "run 1") == 1.0

    A dict is taken for `model_kwargs_json` (stored as its JSON text); null
    for a flag that may be None.
    """
    kind_of = _field_types(kind.args_type)[name]
    optional = kind_of.endswith(" | None")
    kind_of = kind_of.removesuffix(" | None")
    if name == "model_kwargs_json" and isinstance(value, dict):
        return json.dumps(value)
    if optional and value is None:
        return None
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }[kind_of]
    if not ok:
        wanted = {"bool": "true or false", "int": "an integer", "float": "a number"}
        wanted_text = wanted.get(kind_of, "a string") + (" or null" if optional else "")
        raise PipelineError(f"{where}: --{name} must be {wanted_text}, got {json.dumps(value)}")
    return float(value) if kind_of == "float" else value


def read_sweep_file(kind: SweepKind, path: Path | str) -> Sweep:
    """A JSON list of flag dicts (keys = the training script's flag names), checked.

    read_sweep_file(kind, "s.json").entries == ({"seed": 0}, {"seed": 1, "lr": 0.01})
    """
    path = Path(path).expanduser()
    text = read_user_text(path, "--sweep", "sweep file ")
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as e:
        raise PipelineError(
            f"--sweep: {path} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})"
        ) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise PipelineError(
            f"--sweep: {path} must hold a JSON list of objects of flags, e.g. {kind.sweep_example}"
        )
    if not entries:
        raise PipelineError(f"--sweep: {path} lists no runs")
    known = kind.args_type.flag_names()
    checked = []
    for number, entry in enumerate(entries, 1):
        where = f"--sweep: {path} run {number}"
        unknown = sorted(set(entry) - known)
        if unknown:
            near = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise PipelineError(
                f"{where}: unknown flag {', '.join(unknown)}{hint}; known flags: "
                f"{', '.join(sorted(known))}"
            )
        checked.append({k: check_flag_value(kind, k, v, where) for k, v in entry.items()})
    return Sweep(str(path), {}, tuple(checked))


def load_sweep(kind: SweepKind, name: str | None, num_seeds: int | None = None) -> Sweep:
    """One of `kind.named_sweeps`, `seeds` (with `num_seeds`), or a JSON sweep file's path.

    load_sweep(kind, "seeds", 3).name == "seeds"
    """
    choices = ", ".join([*kind.named_sweeps, "seeds"]) + " or a FILE.json"
    if name is None:
        raise PipelineError(f"--sweep: give one of {choices}")
    if num_seeds is not None and name != "seeds":
        raise PipelineError("--num_seeds: only for --sweep=seeds")
    if name in kind.named_sweeps:
        return kind.named_sweeps[name]()
    if name == "seeds":
        if num_seeds is None:
            raise PipelineError("--sweep=seeds needs --num_seeds N (seeds 0..N-1)")
        return seeds_sweep(num_seeds)
    if name.endswith(".json") or Path(name).expanduser().is_file():
        return read_sweep_file(kind, name)
    raise PipelineError(f"--sweep: unknown sweep '{name}'; use {choices}")


def expand_runs(kind: SweepKind, sweep: Sweep, overrides: Mapping[str, Any]) -> tuple[list, int]:
    """One args record per entry (base < entry < overrides) and how many repeats were dropped.

    expand_runs(kind, seeds_sweep(2), {"epochs": 1}) == ([Args(seed=0, epochs=1), ...], 0)

    Two entries that end up with the same flags (the same run hash) would
    train the same run into the same files; the later one is dropped.
    """
    if sweep.name == "seeds" and "seed" in overrides:
        raise PipelineError("--seed: not with --sweep=seeds, which sets the seed of every run")
    runs: dict[str, Any] = {}
    for entry in sweep.entries:
        args = kind.args_type(**{**sweep.base, **entry, **overrides})
        runs.setdefault(args.run_hash(), args)
    return list(runs.values()), len(sweep.entries) - len(runs)


def summary_dir(runs: Sequence[Any]) -> Path:
    """The one `--out_dir` of every run: where the summary goes.

    summary_dir([Args(out_dir="out/a"), Args(out_dir="out/a", seed=1)]) == Path("out/a")
    """
    dirs = sorted({str(Path(args.out_dir).expanduser()) for args in runs})
    if len(dirs) != 1:
        raise PipelineError(
            f"--out_dir: the sweep's runs write to {len(dirs)} folders ({', '.join(dirs)}); "
            "pass --out_dir to put every run and the summary in one"
        )
    return Path(dirs[0])


def one_line(text: Any) -> str:
    """`text` on one line, runs of white space as one space: one_line("a\\n  b") == "a b"."""
    return " ".join(str(text).split())


def run_one(
    kind: SweepKind,
    index: int,
    total: int,
    args: Any,
    train: Callable[..., Mapping[str, Any]],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains one run with `train(args, progress=False, log=...)`; a result either way.

    run_one(kind, 0, 3, args, train_lib.train, print)["status"] in ("ok", "error")

    The result is `status` "ok" with `kind.summarize(record)`'s fields (the
    validation metrics, best epoch, epochs) and the wall time, or `status`
    "error" with the failure in one line (PipelineError's message; other
    exceptions with their type). Only KeyboardInterrupt and SystemExit pass
    through.
    """
    run_hash = args.run_hash()
    label = f"[run {index + 1}/{total} {run_hash[:8]}]"
    result: dict[str, Any] = {
        "index": index,
        "run_hash": run_hash,
        "flags": args.to_dict(),
        "model_dir": str(Path(args.out_dir).expanduser() / f"model_{run_hash}"),
    }
    log(f"{label} start in process {os.getpid()}: {args.model} {args.model_kwargs_json}")
    started = time.perf_counter()
    try:
        record = train(args, progress=False, log=lambda line: log(f"{label} {line}"))
    except Exception as e:  # one failed run must not stop the sweep
        message = (
            one_line(e) if isinstance(e, PipelineError) else f"{type(e).__name__}: {one_line(e)}"
        )
        log(f"{label} failed: {message}")
        return {**result, "status": "error", "error": message or type(e).__name__}
    if record.get("run_hash", run_hash) != run_hash:  # named with its data identity
        result["run_hash"] = record["run_hash"]
        result["model_dir"] = str(Path(args.out_dir).expanduser() / f"model_{record['run_hash']}")
    result.update(status="ok", **kind.summarize(record), wall_s=time.perf_counter() - started)
    log(f"{label} done in {result['wall_s']:.0f} s: {kind.done_line(result)}")
    return result


def split_results(kind: SweepKind, results: Iterable[Result]) -> tuple[list[Result], list[Result]]:
    """Trained runs best first (by `kind.sort_key`), failed runs in sweep order.

    ok, failed = split_results(kind, results)
    """
    results = list(results)
    ok = sorted((r for r in results if r["status"] == "ok"), key=kind.sort_key)
    failed = sorted((r for r in results if r["status"] != "ok"), key=lambda r: r["index"])
    return ok, failed


def differing_flags(kind: SweepKind, results: Iterable[Result]) -> list[str]:
    """Flags whose value is not the same in every run, in the args record's field order.

    differing_flags(kind, results) == ["lr", "seed"]
    """
    results = list(results)
    names = [f.name for f in dataclasses.fields(kind.args_type)]
    return [
        n
        for n in names
        if len({json.dumps(r["flags"].get(n), sort_keys=True) for r in results}) > 1
    ]


def ensemble_dirs(kind: SweepKind, ranked: Sequence[Result], top: int) -> list[str]:
    """The model folders of the best `top` trained runs (`ranked`: best first).

    ensemble_dirs(kind, ok, 2) == ["a/model_1", "a/model_2"]

    With `kind.ensemble_key`, only runs that share the best run's key take part.
    """
    if kind.ensemble_key is not None and ranked:
        best = kind.ensemble_key(ranked[0])
        ranked = [r for r in ranked if kind.ensemble_key(r) == best]
    return [r["model_dir"] for r in ranked[:top]]


def ensemble_command(kind: SweepKind, ranked: Sequence[Result], top: int) -> str | None:
    """The command that ensembles the best `top` trained runs (None without any).

    ensemble_command(kind, ok, 2) == "python tiles_gen_predictions_csv.py --dir a/model_1,a/model_2"
    """
    dirs = ensemble_dirs(kind, ranked, top)
    if not dirs:
        return None
    return f"python {kind.predict_script} --dir " + shlex.quote(",".join(dirs))


def number(value: float, digits: int = 4) -> str:
    """A summary cell: number(0.12345) == "0.1235", NaN as "nan"."""
    return "nan" if math.isnan(value) else f"{value:.{digits}f}"


def summary_rows(kind: SweepKind, results: Iterable[Result]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: trained runs best first, then failed runs in sweep order.

    header, rows = summary_rows(kind, results)   # header[:3] == ["rank", "status", "run_hash"]
    """
    results = list(results)
    ok, failed = split_results(kind, results)
    flags = differing_flags(kind, results)
    header = ["rank", "status", "run_hash", *flags, *kind.metric_columns, "best_epoch"]
    header += ["wall_s", "model_dir", "error"]
    rows = []
    for rank, r in enumerate(ok, 1):
        rows.append(
            [str(rank), "ok", r["run_hash"], *(str(r["flags"][f]) for f in flags)]
            + [number(v) for v in kind.metric_cells(r)]
            + [str(r["best_epoch"]), f"{r['wall_s']:.1f}", r["model_dir"], ""]
        )
    for r in failed:
        rows.append(
            ["", "error", r["run_hash"], *(str(r["flags"][f]) for f in flags)]
            + [""] * (len(kind.metric_columns) + 2)
            + ["", r["error"]]
        )
    return header, rows


def summary_csv(kind: SweepKind, results: Iterable[Result]) -> str:
    """The summary as CSV text: summary_csv(kind, results).splitlines()[0].startswith("rank,")."""
    header, rows = summary_rows(kind, results)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _cell(text: str) -> str:
    return one_line(text).replace("|", "\\|") or " "


def summary_markdown(kind: SweepKind, results: Iterable[Result], ensemble_top: int) -> str:
    """The summary as markdown: the ranked table, the failures, the ensemble command.

    summary_markdown(kind, results, 3).startswith("# Sweep summary")
    """
    results = list(results)
    ok, failed = split_results(kind, results)
    header, rows = summary_rows(kind, results)
    keep = [i for i, name in enumerate(header) if name not in ("status", "model_dir", "error")]
    lines = [
        "# Sweep summary",
        "",
        f"{len(results)} runs: {len(ok)} trained, {len(failed)} failed. Trained runs sorted "
        f"by {kind.ranking} (val OPA: the best epoch's; wall s: the whole run).",
        "",
    ]
    if ok:
        lines.append("| " + " | ".join(header[i] for i in keep) + " |")
        lines.append("|" + "---|" * len(keep))
        lines += ["| " + " | ".join(_cell(row[i]) for i in keep) + " |" for row in rows[: len(ok)]]
        lines.append("")
    if failed:
        flags = differing_flags(kind, results)
        lines += ["## Failed runs", ""]
        lines.append("| run_hash | " + " | ".join([*flags, "error"]) + " |")
        lines.append("|" + "---|" * (len(flags) + 2))
        for r in failed:
            cells = [r["run_hash"], *(str(r["flags"][f]) for f in flags), r["error"]]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    command = ensemble_command(kind, ok, ensemble_top)
    if command:
        count = len(ensemble_dirs(kind, ok, ensemble_top))
        lines += [
            f"## Ensemble of the best {count}",
            "",
            "```bash",
            command,
            "```",
            "",
        ]
    return "\n".join(lines)


def write_summary(
    kind: SweepKind, out_dir: Path | str, results: Iterable[Result], ensemble_top: int
) -> tuple[Path, Path]:
    """Writes sweep_summary.csv and sweep_summary.md into `out_dir`, each atomically.

    csv_path, md_path = write_summary(kind, "out/sweep", results, ensemble_top=3)
    """
    results = list(results)
    out_dir = Path(out_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / SUMMARY_CSV, out_dir / SUMMARY_MD
    atomic_write_text(csv_path, summary_csv(kind, results))
    atomic_write_text(md_path, summary_markdown(kind, results, ensemble_top))
    return csv_path, md_path


def count_failed(csv_path: Path) -> int:
    """Rows of a written sweep_summary.csv whose status is not ok."""
    with open(csv_path, encoding="utf-8", newline="") as f:
        return sum(row["status"] != "ok" for row in csv.DictReader(f))


# --- the command line and the Beam pipeline ------------------------------------------------


def build_parser(kind: SweepKind, doc: str) -> argparse.ArgumentParser:
    """The sweep script's parser: the training flags (given ones override), the sweep's own.

    build_parser(kind, __doc__).parse_known_args(["--sweep=seeds", "--num_seeds=2"])
    """
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
        kind.args_type,
        default=lambda field: argparse.SUPPRESS,
        help=lambda field: f"{kind.train_script}'s --{field.name}, set in every run",
    )
    parser.add_argument(
        "--sweep",
        default=kind.default_sweep,
        help=f"{kind.named_help}seeds (--num_seeds N of the recipe given by the "
        "other flags), or FILE.json (a list of flag dicts)",
    )
    parser.add_argument("--num_seeds", type=int, default=None, help="seeds 0..N-1 (--sweep=seeds)")
    parser.add_argument(
        "--debug",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help=f"train only the first {DEBUG_RUNS} runs",
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


def beam_options(kind: SweepKind, beam_args: list[str]):
    """PipelineOptions from the flags that are not training flags, checked by Beam.

    options, runner, parsed = beam_options(kind, ["--direct_num_workers=2"])

    On the local runner the defaults are two worker processes; options Beam
    does not know are refused there. Other runners get them as they are
    (portable runners hand them to their job server), except near-misses of a
    training flag.
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
        near = difflib.get_close_matches(name, sorted(kind.args_type.flag_names()), n=1)
        if runner in DIRECT_RUNNERS or near:
            hint = f"; did you mean --{near[0]}?" if near else ""
            raise PipelineError(
                f"unknown flag --{name}: neither a training flag ({kind.args_type.__name__}) "
                f"nor a Beam pipeline option{hint}"
            )
    return options, runner, parsed


def make_pipeline(options, runner: str):
    """A Beam pipeline; the local runner is Beam's FnApiRunner, as the DirectRunner's batch mode.

    pipeline = make_pipeline(options, "DirectRunner")

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


def import_train_function(path: str) -> Callable[..., Mapping[str, Any]]:
    """The function a "module:name" path names.

    import_train_function("baselines.layout.train_lib:train")
    """
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def sweep_pipeline(
    kind: SweepKind, pipeline, runs: list, out_dir: Path, ensemble_top: int, tf_threads: int
) -> None:
    """Create -> Reshuffle (spread over workers) -> train each -> one summary.

    sweep_pipeline(kind, make_pipeline(options, runner), runs, Path("out/sweep"), 3, 1)
    """
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
                try:
                    tf.config.threading.set_intra_op_parallelism_threads(tf_threads)
                    tf.config.threading.set_inter_op_parallelism_threads(tf_threads)
                except RuntimeError:  # TensorFlow already running in this process: keep it
                    pass

        def process(self, element):
            train = import_train_function(kind.train_function)
            index, args = element
            log = lambda line: print(line, flush=True)  # noqa: E731
            yield run_one(kind, index, total, args, train, log)

    def write(results):
        csv_path, md_path = write_summary(kind, out_dir, results, ensemble_top)
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


def plan(kind: SweepKind, argv: list[str], doc: str) -> Plan:
    """Parses and checks the command line (no Beam, no TensorFlow yet).

    plan(kind, ["--sweep=seeds", "--num_seeds=3", "--epochs=1"], __doc__).runs
    """
    argv = expand_flagfiles(argv, kind.args_type.flag_names())
    flags, beam_args = build_parser(kind, doc).parse_known_args(argv)
    if flags.ensemble_top < 1:
        raise PipelineError(f"--ensemble_top: must be at least 1, got {flags.ensemble_top}")
    if flags.tf_threads is not None and flags.tf_threads < 0:
        raise PipelineError(f"--tf_threads: must be 0 or more, got {flags.tf_threads}")
    overrides = {k: v for k, v in vars(flags).items() if k in kind.args_type.flag_names()}
    sweep = load_sweep(kind, flags.sweep, flags.num_seeds)
    runs, repeats = expand_runs(kind, sweep, overrides)
    if flags.debug:
        runs = runs[:DEBUG_RUNS]
    return Plan(sweep, runs, repeats, summary_dir(runs), flags, beam_args)


def main(kind: SweepKind, argv: list[str], doc: str) -> int:
    """Plans, runs the sweep on Beam, prints the summary; 1 if a run failed.

    sys.exit(main(kind, sys.argv[1:], __doc__))
    """
    for name in ("apache_beam", None):  # Beam's start-up warnings; runs print their own lines
        logging.getLogger(name).setLevel(logging.ERROR)
    todo = plan(kind, argv, doc)
    runs, out_dir = todo.runs, todo.out_dir
    options, runner, parsed = beam_options(kind, todo.beam_args)
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
    sweep_pipeline(kind, pipeline, runs, out_dir, todo.flags.ensemble_top, tf_threads)
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
