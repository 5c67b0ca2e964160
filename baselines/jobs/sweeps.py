"""Sweeps of training runs for any collection (`expand_runs`) and their summary. No TensorFlow."""

from __future__ import annotations

import csv
import dataclasses
import difflib
import json
import math
import os
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.core.args_record import flag_type
from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_write_text, read_user_text
from baselines.core.tables import csv_table, markdown_table
from baselines.jobs.collections import CollectionSpec, Result

SUMMARY_CSV = "sweep_summary.csv"
SUMMARY_MD = "sweep_summary.md"
DEBUG_RUNS = 2  # --debug trains the first two runs, as upstream's script does


@dataclasses.dataclass(frozen=True)
class Sweep:
    """Named runs: each entry's flags on top of `base`."""

    name: str
    base: dict[str, Any]
    entries: tuple[dict[str, Any], ...]


def seeds_sweep(num_seeds: int) -> Sweep:
    """Seeds 0..num_seeds-1 of one recipe (the recipe is the command line's flags)."""
    if num_seeds < 1:
        raise PipelineError(f"--num_seeds: must be at least 1, got {num_seeds}")
    return Sweep("seeds", {}, tuple({"seed": seed} for seed in range(num_seeds)))


def check_flag_value(spec: CollectionSpec, name: str, value: Any, where: str) -> Any:
    """`value` for flag `name` if its JSON type fits the flag's type, else PipelineError
    (a dict for `model_kwargs_json`, as JSON text; null for an optional flag)."""
    kind_of = next(flag_type(f) for f in spec.args_type.flag_fields() if f.name == name)
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


def read_sweep_file(spec: CollectionSpec, path: Path | str) -> Sweep:
    """A JSON list of flag dicts (keys = the training script's flag names), checked."""
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
            f"--sweep: {path} must hold a JSON list of objects of flags, e.g. {spec.sweep_example}"
        )
    if not entries:
        raise PipelineError(f"--sweep: {path} lists no runs")
    known = spec.args_type.flag_names()
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
        checked.append({k: check_flag_value(spec, k, v, where) for k, v in entry.items()})
    return Sweep(str(path), {}, tuple(checked))


def load_sweep(spec: CollectionSpec, name: str | None, num_seeds: int | None = None) -> Sweep:
    """One of `spec.named_sweeps`, `seeds` (with `num_seeds`), or a JSON sweep file's path."""
    choices = ", ".join([*spec.named_sweeps, "seeds"]) + " or a FILE.json"
    if name is None:
        raise PipelineError(f"--sweep: give one of {choices}")
    if num_seeds is not None and name != "seeds":
        raise PipelineError("--num_seeds: only for --sweep=seeds")
    if name in spec.named_sweeps:
        return spec.named_sweeps[name]()
    if name == "seeds":
        if num_seeds is None:
            raise PipelineError("--sweep=seeds needs --num_seeds N (seeds 0..N-1)")
        return seeds_sweep(num_seeds)
    if name.endswith(".json") or Path(name).expanduser().is_file():
        return read_sweep_file(spec, name)
    raise PipelineError(f"--sweep: unknown sweep '{name}'; use {choices}")


def expand_runs(
    spec: CollectionSpec, sweep: Sweep, overrides: Mapping[str, Any]
) -> tuple[list, int]:
    """One args record per entry (base < entry < overrides), and how many repeats were dropped."""
    if sweep.name == "seeds" and "seed" in overrides:
        raise PipelineError("--seed: not with --sweep=seeds, which sets the seed of every run")
    runs: dict[str, Any] = {}
    for entry in sweep.entries:
        args = spec.args_type(**{**sweep.base, **entry, **overrides})
        runs.setdefault(args.run_hash(), args)
    return list(runs.values()), len(sweep.entries) - len(runs)


def summary_dir(runs: Sequence[Any]) -> Path:
    """The one `--out_dir` of every run: where the summary goes."""
    dirs = sorted({str(Path(args.out_dir).expanduser()) for args in runs})
    if len(dirs) != 1:
        raise PipelineError(
            f"--out_dir: the sweep's runs write to {len(dirs)} folders ({', '.join(dirs)}); "
            "pass --out_dir to put every run and the summary in one"
        )
    return Path(dirs[0])


def one_line(text: Any) -> str:
    return " ".join(str(text).split())


def run_one(
    spec: CollectionSpec,
    index: int,
    total: int,
    args: Any,
    train: Callable[..., Mapping[str, Any]],
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains one run: `status` "ok" with `spec.summarize(record)` and the wall time, or "error"."""
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
    result.update(status="ok", **spec.summarize(record), wall_s=time.perf_counter() - started)
    log(f"{label} done in {result['wall_s']:.0f} s: {spec.done_line(result)}")
    return result


def split_results(
    spec: CollectionSpec, results: Iterable[Result]
) -> tuple[list[Result], list[Result]]:
    """Trained runs best first (by `spec.sort_key`), failed runs in sweep order."""
    results = list(results)
    ok = sorted((r for r in results if r["status"] == "ok"), key=spec.sort_key)
    failed = sorted((r for r in results if r["status"] != "ok"), key=lambda r: r["index"])
    return ok, failed


def differing_flags(spec: CollectionSpec, results: Iterable[Result]) -> list[str]:
    """Flags whose value is not the same in every run, in the args record's field order."""
    results = list(results)
    names = [f.name for f in dataclasses.fields(spec.args_type)]
    return [
        n
        for n in names
        if len({json.dumps(r["flags"].get(n), sort_keys=True) for r in results}) > 1
    ]


def ensemble_dirs(spec: CollectionSpec, ranked: Sequence[Result], top: int) -> list[str]:
    """The model folders of the best `top` runs (`ranked`) sharing the best run's `ensemble_key`."""
    if spec.ensemble_key is not None and ranked:
        best = spec.ensemble_key(ranked[0])
        ranked = [r for r in ranked if spec.ensemble_key(r) == best]
    return [r["model_dir"] for r in ranked[:top]]


def ensemble_command(spec: CollectionSpec, ranked: Sequence[Result], top: int) -> str | None:
    """The command that ensembles the best `top` trained runs (None without any)."""
    dirs = ensemble_dirs(spec, ranked, top)
    if not dirs:
        return None
    return f"python {spec.predict_script} --dir " + shlex.quote(",".join(dirs))


def number(value: float, digits: int = 4) -> str:
    return "nan" if math.isnan(value) else f"{value:.{digits}f}"


def summary_rows(
    spec: CollectionSpec, results: Iterable[Result]
) -> tuple[list[str], list[list[str]]]:
    """Header and rows: trained runs best first, then failed runs in sweep order."""
    results = list(results)
    ok, failed = split_results(spec, results)
    flags = differing_flags(spec, results)
    header = ["rank", "status", "run_hash", *flags, *spec.metric_columns, "best_epoch"]
    header += ["wall_s", "model_dir", "error"]
    rows = []
    for rank, r in enumerate(ok, 1):
        rows.append(
            [str(rank), "ok", r["run_hash"], *(str(r["flags"][f]) for f in flags)]
            + [number(v) for v in spec.metric_cells(r)]
            + [str(r["best_epoch"]), f"{r['wall_s']:.1f}", r["model_dir"], ""]
        )
    for r in failed:
        rows.append(
            ["", "error", r["run_hash"], *(str(r["flags"][f]) for f in flags)]
            + [""] * (len(spec.metric_columns) + 2)
            + ["", r["error"]]
        )
    return header, rows


def _cell(text: str) -> str:
    return one_line(text).replace("|", "\\|") or " "


def summary_markdown(spec: CollectionSpec, results: Iterable[Result], ensemble_top: int) -> str:
    """The summary as markdown: the ranked table, the failures, the ensemble command."""
    results = list(results)
    ok, failed = split_results(spec, results)
    header, rows = summary_rows(spec, results)
    keep = [i for i, name in enumerate(header) if name not in ("status", "model_dir", "error")]
    lines = [
        "# Sweep summary",
        "",
        f"{len(results)} runs: {len(ok)} trained, {len(failed)} failed. Trained runs sorted "
        f"by {spec.ranking} (val OPA: the best epoch's; wall s: the whole run).",
        "",
    ]
    if ok:
        table = [[_cell(row[i]) for i in keep] for row in rows[: len(ok)]]
        lines.append(markdown_table([header[i] for i in keep], table))
    if failed:
        flags = differing_flags(spec, results)
        table = [[r["run_hash"], *(str(r["flags"][f]) for f in flags), r["error"]] for r in failed]
        table = [[_cell(c) for c in cells] for cells in table]
        lines += ["## Failed runs", "", markdown_table(["run_hash", *flags, "error"], table)]
    command = ensemble_command(spec, ok, ensemble_top)
    if command:
        count = len(ensemble_dirs(spec, ok, ensemble_top))
        lines += [f"## Ensemble of the best {count}", "", "```bash", command, "```", ""]
    return "\n".join(lines)


def write_summary(
    spec: CollectionSpec, out_dir: Path | str, results: Iterable[Result], ensemble_top: int
) -> tuple[Path, Path]:
    results = list(results)
    out_dir = Path(out_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out_dir / SUMMARY_CSV, out_dir / SUMMARY_MD
    atomic_write_text(csv_path, csv_table(*summary_rows(spec, results)))
    atomic_write_text(md_path, summary_markdown(spec, results, ensemble_top))
    return csv_path, md_path


def count_failed(csv_path: Path) -> int:
    with open(csv_path, encoding="utf-8", newline="") as f:
        return sum(row["status"] != "ok" for row in csv.DictReader(f))
