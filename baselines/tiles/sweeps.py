"""Sweeps of training runs: what to train, and the table of what came out.

A sweep is a list of flag dicts (keys = `tiles_train.py` flag names) on top of
base flags; every run is `TrainArgs(**{**base, **entry, **overrides})`, where
`overrides` are the flags given on the command line (they win in every run).

    sweep = load_sweep("paper")                 # or "seeds" (num_seeds=N), or "FILE.json"
    runs = expand_runs(sweep, {"epochs": 3})    # [TrainArgs, ...], duplicates dropped
    result = run_one(0, len(runs), runs[0], train_lib.train, print)
    write_summary(out_dir, [result, ...], ensemble_top=3)

`tiles_beam_experiments.py` runs each `TrainArgs` as one element of an Apache
Beam pipeline. Nothing here imports TensorFlow or Beam; `run_one` gets the
training function as an argument.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import io
import itertools
import json
import math
import os
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_write_text, read_user_text
from baselines.tiles.train_args import TrainArgs

SUMMARY_CSV = "sweep_summary.csv"
SUMMARY_MD = "sweep_summary.md"
TOP_KS = ("1", "5", "10")  # keys of a run record's final_error["val"]
DEBUG_RUNS = 2  # --debug trains the first two runs, as upstream's script does

# The paper's hyperparameter grid (TpuGraphs paper, Table 5), as the
# upstream sweep `tiles_beam_experiments.py` spells it: every (model, kwargs)
# row below is crossed with every combination of PAPER_TRAINING_AXES, in
# upstream's loop order (model, loss, run id, clip norm, learning rate).
# Model kwargs keep upstream's names (num_gnns, op_embed_dim, mlp_layers; see
# models.KWARG_ALIASES): the rows are upstream's, all 20 of them.
PAPER_BASE_FLAGS: dict[str, Any] = {
    "out_dir": "~/out/tpugraphs_tiles/beam",
    "test_mode": "metrics",
    "validate_batches": 50,
    "early_stop": 10,
    "epochs": 500,
    "configs": 8,
    "batch": 10,
    "eval_every": 2,
}
PAPER_MODEL_GRID: tuple[tuple[str, dict[str, Any]], ...] = (
    ("MLP", {"op_embed_dim": 64, "hidden_dim": 64, "mlp_layers": 2}),
    ("MLP", {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 2}),
    ("MLP", {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 3}),
    ("MLP", {"op_embed_dim": 256, "hidden_dim": 128, "mlp_layers": 3}),
    ("EarlyJoinSAGE", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("LateJoinSAGE", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("EarlyJoinResGCN", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("LateJoinResGCN", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
)
PAPER_TRAINING_AXES: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("losses", ("ListMLELoss:1,MSE:0.02", "MSE:1", "ListMLELoss:1")),
    ("run_id", ("0", "1", "2")),
    ("clip_norm", (1e-3, 100.0)),
    ("lr", (1e-2, 1e-3)),
)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Named runs: each entry's flags on top of `base`."""

    name: str
    base: dict[str, Any]
    entries: tuple[dict[str, Any], ...]


def paper_sweep() -> Sweep:
    """The paper's grid: PAPER_MODEL_GRID x PAPER_TRAINING_AXES on PAPER_BASE_FLAGS."""
    names = [name for name, _ in PAPER_TRAINING_AXES]
    entries = [
        {"model": model, "model_kwargs_json": json.dumps(kwargs), **dict(zip(names, values))}
        for model, kwargs in PAPER_MODEL_GRID
        for values in itertools.product(*(values for _, values in PAPER_TRAINING_AXES))
    ]
    return Sweep("paper", dict(PAPER_BASE_FLAGS), tuple(entries))


def seeds_sweep(num_seeds: int) -> Sweep:
    """Seeds 0..num_seeds-1 of one recipe (the recipe is the command line's flags)."""
    if num_seeds < 1:
        raise PipelineError(f"--num_seeds: must be at least 1, got {num_seeds}")
    return Sweep("seeds", {}, tuple({"seed": seed} for seed in range(num_seeds)))


def _field_types() -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(TrainArgs)}


def check_flag_value(name: str, value: Any, where: str) -> Any:
    """`value` for flag `name` if its JSON type fits the flag's type, else PipelineError.

    A dict is taken for `model_kwargs_json` (stored as its JSON text).
    """
    kind = _field_types()[name]
    if name == "model_kwargs_json" and isinstance(value, dict):
        return json.dumps(value)
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "str": isinstance(value, str),
    }[kind]
    if not ok:
        wanted = {"bool": "true or false", "int": "an integer", "float": "a number"}
        raise PipelineError(
            f"{where}: --{name} must be {wanted.get(kind, 'a string')}, got {json.dumps(value)}"
        )
    return float(value) if kind == "float" else value


def read_sweep_file(path: Path | str) -> Sweep:
    """A JSON list of flag dicts (keys = tiles_train.py flag names), checked."""
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
            f"--sweep: {path} must hold a JSON list of objects of flags, "
            'e.g. [{"model": "MLP"}, {"model": "EarlyJoinSAGE", "lr": 0.01}]'
        )
    if not entries:
        raise PipelineError(f"--sweep: {path} lists no runs")
    known = TrainArgs.flag_names()
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
        checked.append({k: check_flag_value(k, v, where) for k, v in entry.items()})
    return Sweep(str(path), {}, tuple(checked))


def load_sweep(name: str, num_seeds: int | None = None) -> Sweep:
    """`paper`, `seeds` (with `num_seeds`), or the path of a JSON sweep file."""
    if num_seeds is not None and name != "seeds":
        raise PipelineError("--num_seeds: only for --sweep=seeds")
    if name == "paper":
        return paper_sweep()
    if name == "seeds":
        if num_seeds is None:
            raise PipelineError("--sweep=seeds needs --num_seeds N (seeds 0..N-1)")
        return seeds_sweep(num_seeds)
    if name.endswith(".json") or Path(name).expanduser().is_file():
        return read_sweep_file(name)
    raise PipelineError(f"--sweep: unknown sweep '{name}'; use paper, seeds or a FILE.json")


def expand_runs(sweep: Sweep, overrides: Mapping[str, Any]) -> tuple[list[TrainArgs], int]:
    """One TrainArgs per entry (base < entry < overrides) and how many repeats were dropped.

    Two entries that end up with the same flags (the same run hash) would
    train the same run into the same files; the later one is dropped.
    """
    if sweep.name == "seeds" and "seed" in overrides:
        raise PipelineError("--seed: not with --sweep=seeds, which sets the seed of every run")
    runs: dict[str, TrainArgs] = {}
    for entry in sweep.entries:
        args = TrainArgs(**{**sweep.base, **entry, **overrides})
        runs.setdefault(args.run_hash(), args)
    return list(runs.values()), len(sweep.entries) - len(runs)


def summary_dir(runs: Sequence[TrainArgs]) -> Path:
    """The one `--out_dir` of every run: where the summary goes."""
    dirs = sorted({str(Path(args.out_dir).expanduser()) for args in runs})
    if len(dirs) != 1:
        raise PipelineError(
            f"--out_dir: the sweep's runs write to {len(dirs)} folders ({', '.join(dirs)}); "
            "pass --out_dir to put every run and the summary in one"
        )
    return Path(dirs[0])


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def run_one(
    index: int,
    total: int,
    args: TrainArgs,
    train: Callable[..., dict[str, Any]],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains one run with `train(args, progress=False, log=...)`; a result either way.

    The result is `status` "ok" with the run's validation errors, best
    validation OPA, epochs and wall time, or `status` "error" with the
    failure in one line (PipelineError's message; other exceptions with their
    type). Only KeyboardInterrupt and SystemExit pass through.
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
    # None marks epochs without validation (--eval_every > 1).
    val_opa = [v for v in record.get("train_curve", {}).get("val_opa", []) if v is not None]
    val_opa = val_opa or [math.nan]
    result.update(
        status="ok",
        val_error={k: float(record["final_error"]["val"][k]) for k in TOP_KS},
        val_opa=float(max(val_opa)),
        best_epoch=int(record.get("best_epoch", -1)),
        epochs_run=len(record.get("train_curve", {}).get("epoch", [])),
        wall_s=time.perf_counter() - started,
    )
    log(
        f"{label} done in {result['wall_s']:.0f} s: val top-1/5/10 error "
        + " / ".join(f"{result['val_error'][k]:.4f}" for k in TOP_KS)
    )
    return result


def _sort_key(result: Mapping[str, Any]) -> tuple:
    errors = [result["val_error"][k] for k in ("5", "1", "10")]
    return (*((math.isnan(e), e) for e in errors), result["run_hash"])


def split_results(
    results: Iterable[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """Trained runs by validation top-5 error (then top-1, top-10; NaN last), failed runs."""
    results = list(results)
    ok = sorted((r for r in results if r["status"] == "ok"), key=_sort_key)
    failed = sorted((r for r in results if r["status"] != "ok"), key=lambda r: r["index"])
    return ok, failed


def differing_flags(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """Flags whose value is not the same in every run, in TrainArgs field order."""
    results = list(results)
    names = [f.name for f in dataclasses.fields(TrainArgs)]
    return [
        n
        for n in names
        if len({json.dumps(r["flags"].get(n), sort_keys=True) for r in results}) > 1
    ]


def ensemble_command(ranked: Sequence[Mapping[str, Any]], top: int) -> str | None:
    """The command that ensembles the best `top` trained runs (None without any)."""
    dirs = [r["model_dir"] for r in ranked[:top]]
    if not dirs:
        return None
    return "python tiles_gen_predictions_csv.py --dir " + shlex.quote(",".join(dirs))


def _number(value: float, digits: int = 4) -> str:
    return "nan" if math.isnan(value) else f"{value:.{digits}f}"


def summary_rows(results: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: trained runs best first, then failed runs in sweep order."""
    results = list(results)
    ok, failed = split_results(results)
    flags = differing_flags(results)
    header = ["rank", "status", "run_hash", *flags]
    header += ["val_top1_err", "val_top5_err", "val_top10_err", "val_opa", "best_epoch"]
    header += ["wall_s", "model_dir", "error"]
    rows = []
    for rank, r in enumerate(ok, 1):
        rows.append(
            [str(rank), "ok", r["run_hash"], *(str(r["flags"][f]) for f in flags)]
            + [_number(r["val_error"][k]) for k in TOP_KS]
            + [_number(r["val_opa"]), str(r["best_epoch"]), f"{r['wall_s']:.1f}"]
            + [r["model_dir"], ""]
        )
    for r in failed:
        rows.append(
            ["", "error", r["run_hash"], *(str(r["flags"][f]) for f in flags)]
            + [""] * 6
            + ["", r["error"]]
        )
    return header, rows


def summary_csv(results: Iterable[Mapping[str, Any]]) -> str:
    header, rows = summary_rows(results)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _cell(text: str) -> str:
    return one_line(text).replace("|", "\\|") or " "


def summary_markdown(results: Iterable[Mapping[str, Any]], ensemble_top: int) -> str:
    results = list(results)
    ok, failed = split_results(results)
    header, rows = summary_rows(results)
    keep = [i for i, name in enumerate(header) if name not in ("status", "model_dir", "error")]
    lines = [
        "# Sweep summary",
        "",
        f"{len(results)} runs: {len(ok)} trained, {len(failed)} failed. Trained runs sorted "
        "by validation top-5 error (val OPA: the best epoch's; wall s: the whole run).",
        "",
    ]
    if ok:
        lines.append("| " + " | ".join(header[i] for i in keep) + " |")
        lines.append("|" + "---|" * len(keep))
        lines += ["| " + " | ".join(_cell(row[i]) for i in keep) + " |" for row in rows[: len(ok)]]
        lines.append("")
    if failed:
        flags = differing_flags(results)
        lines += ["## Failed runs", ""]
        lines.append("| run_hash | " + " | ".join([*flags, "error"]) + " |")
        lines.append("|" + "---|" * (len(flags) + 2))
        for r in failed:
            cells = [r["run_hash"], *(str(r["flags"][f]) for f in flags), r["error"]]
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    command = ensemble_command(ok, ensemble_top)
    if command:
        count = min(ensemble_top, len(ok))
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
    out_dir: Path | str, results: Iterable[Mapping[str, Any]], ensemble_top: int
) -> tuple[Path, Path]:
    """Writes sweep_summary.csv and sweep_summary.md into `out_dir`, each atomically."""
    results = list(results)
    out_dir = Path(out_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / SUMMARY_CSV, out_dir / SUMMARY_MD
    atomic_write_text(csv_path, summary_csv(results))
    atomic_write_text(md_path, summary_markdown(results, ensemble_top))
    return csv_path, md_path
