"""The whole Kaggle submission as one job: train every collection's seeds, rank, join, report.

`plan_job` checks the whole job before anything runs. Each step runs a project
script in a child process (wall time and peak RSS recorded): train one run per
(collection, candidate, seed); rank, once a collection's seeds are trained (the
options evaluated on validation, then test ranked by the chosen one); join
(`create_kaggle_csv.py --no_dummy_rows`) and `report.md`. A step whose outputs
are finished (a run by its hash, a step by its `.done.json` inputs) does
nothing, so a rerun after completion rewrites nothing and a killed training
resumes at its last epoch. `jobs/submission_pipeline.py` runs the steps on
Beam; nothing here imports TensorFlow or Beam.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baselines.core.errors import PipelineError
from baselines.core.flagfile import expand_flagfiles
from baselines.core.io_utils import atomic_write_text
from baselines.core.rank_run import BLEND, read_items_csv
from baselines.core.run_files import model_fingerprint, read_run
from baselines.core.submission import COLLECTIONS
from baselines.jobs.beam import build_parser
from baselines.jobs.choice import choose, mean_figure, option_names
from baselines.jobs.collections import ROOT, CollectionSpec
from baselines.jobs.layout_spec import LAYOUT_COLLECTIONS, layout_collection
from baselines.jobs.tile_spec import TILE_XLA

# Every collection of the submission, in its order: name -> spec.
SPECS: dict[str, CollectionSpec] = {
    TILE_XLA.name: TILE_XLA,
    **{name: layout_collection(name) for name in LAYOUT_COLLECTIONS},
}
SPLITS = ("train", "valid", "test")
# The candidate recipes each collection trains by default (flagfile names under its
# recipes' folder); the choice keeps "recommended" unless validation says otherwise.
DEFAULT_CANDIDATES = ("baseline", "recommended")
DEFAULT_OPTION = "recommended"
DONE = ".done.json"  # a finished step's record: its inputs, outputs, time and memory

Log = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Job:
    """What one command asks for, checked before anything runs."""

    collections: tuple[CollectionSpec, ...]
    seeds: int
    out: Path
    data_root: Path  # --data_root (absolute); unused with the toy sets
    train_flags: tuple[str, ...]  # given to every training (e.g. --epochs=2)
    join_flags: tuple[str, ...]  # create_kaggle_csv.py's data flags (roots, sample)
    toy: bool
    candidates: dict[str, tuple[str, ...]] = dataclasses.field(
        default_factory=lambda: {"tile": DEFAULT_CANDIDATES, "layout": DEFAULT_CANDIDATES}
    )  # per kind ("tile", "layout"): the candidate recipes' flagfile names or paths

    def runs(self) -> list[tuple[CollectionSpec, str, int]]:
        """(collection, candidate, seed) of every training."""
        return [
            (c, candidate, seed)
            for c in self.collections
            for candidate in self.candidates[c.kind]
            for seed in range(self.seeds)
        ]

    def recipe(self, c: CollectionSpec, candidate: str) -> Path:
        """A candidate's flagfile: a path, or a name in the collection's recipes' folder."""
        path = Path(candidate).expanduser()
        return (
            path.absolute() if path.suffix == ".flags" else c.recipe.parent / f"{candidate}.flags"
        )

    def folder(self, c: CollectionSpec) -> Path:
        """A collection's train/valid/test folders' parent."""
        return c.folder(self.data_root, self.toy)

    def data_flags(self, c: CollectionSpec) -> tuple[str, ...]:
        """The data flags every script of a collection gets."""
        return c.data_flags(self.data_root, self.toy)

    def cache_flag(self, c: CollectionSpec) -> str:
        """The job's cache of loaded splits, so each collection's npz files are read once
        (content-addressed, so concurrent writers are safe)."""
        return f"--cache_dir={self.out / 'cache' / c.kind}"


def parse_collections(text: str) -> tuple[str, ...]:
    """--collections: "all" or comma-separated names, in the submission's order."""
    names = COLLECTIONS if text.strip() == "all" else tuple(n.strip() for n in text.split(","))
    unknown = [n for n in names if n not in COLLECTIONS]
    if unknown or not names:
        raise PipelineError(
            f"--collections: unknown {', '.join(unknown) or 'empty list'}; "
            f"use all or some of {','.join(COLLECTIONS)}"
        )
    return tuple(n for n in COLLECTIONS if n in names)


def candidate_name(candidate: str) -> str:
    """A candidate's name in folders and reports: its flagfile's stem."""
    return Path(candidate).stem


def parse_candidates(flag: str, text: str) -> tuple[str, ...]:
    """A --*_candidates list: comma-separated flagfile names or paths, each once."""
    items = tuple(item.strip() for item in text.split(","))
    names = [candidate_name(item) for item in items]
    if not text.strip() or any(not item for item in items) or len(set(names)) != len(names):
        raise PipelineError(
            f"{flag}: {text!r} is not a list of distinct recipe names, e.g. baseline,recommended"
        )
    return items


def missing_recipes(job: Job) -> list[str]:
    """The candidates' flagfiles that do not exist."""
    recipes = {job.recipe(c, candidate) for c, candidate, _ in job.runs()}
    return sorted(str(path) for path in recipes if not path.is_file())


def missing_data(job: Job) -> dict[str, str]:
    """{collection: what is missing} for each collection with a split folder without .npz."""
    missing = {}
    for c in job.collections:
        folder = job.folder(c)
        empty = [s for s in SPLITS if not any((folder / s).glob("*.npz"))]
        if empty:
            missing[c.name] = f"no .npz in {folder}/{{{','.join(empty)}}}"
    return missing


def plan_job(
    data_root: str,
    out: str,
    collections: str = "all",
    seeds: int = 3,
    toy: bool = False,
    epochs: int | None = None,
    sample: str | None = None,
    candidates: dict[str, str] | None = None,
) -> Job:
    """The job of one command line, or a PipelineError naming what is missing and how to get it."""
    if seeds < 1:
        raise PipelineError(f"--seeds: must be at least 1, got {seeds}")
    if epochs is not None and epochs < 1:
        raise PipelineError(f"--epochs: must be at least 1, got {epochs}")
    root = Path(data_root).expanduser().absolute()
    chosen = tuple(SPECS[n] for n in parse_collections(collections))
    # create_kaggle_csv.py finds Kaggle's sample beside the data; without one (the toy
    # or synthetic sets) --allow_missing takes the IDs from the test folders. The join's
    # --no_dummy_rows refuses any ID without a ranking either way. It takes the roots of
    # the chosen collections' kinds: a tile-only job on a tile-only root joins tile rows.
    out_dir = Path(out).expanduser().absolute()
    roots = {c.join_flag: c.root(root, toy) for c in chosen}
    # Without tile:xla, a --data_root that holds nothing, so no tile ID is expected.
    roots.setdefault(TILE_XLA.join_flag, out_dir / "join" / "no_tile_collection")
    join = [f"{flag}={path}" for flag, path in roots.items()] + ["--allow_missing"]
    if len(chosen) < len(SPECS):
        join.append(f"--collections={','.join(c.name for c in chosen)}")
    if sample is not None:
        join.append(f"--sample={Path(sample).expanduser().absolute()}")
    train = (f"--epochs={epochs}",) if epochs is not None else ()
    given = {"tile": ",".join(DEFAULT_CANDIDATES), "layout": ",".join(DEFAULT_CANDIDATES)}
    given.update(candidates or {})
    parsed = {kind: parse_candidates(f"--{kind}_candidates", text) for kind, text in given.items()}
    job = Job(chosen, seeds, out_dir, root, train, tuple(join), toy, parsed)
    absent = missing_recipes(job)
    if absent:
        raise PipelineError(
            f"candidate recipe {absent[0]} does not exist; name a flagfile of configs/ "
            "(tile) or configs/layout/ (layout), or give its path"
        )
    missing = missing_data(job)
    if missing:
        commands = sorted(
            {f"{c.download_command} --dest {root}" for c in chosen if c.name in missing}
        )
        others = [c.name for c in chosen if c.name not in missing]
        leave = f", or leave them out with --collections={','.join(others)}" if others else ""
        raise PipelineError(
            f"data missing under --data_root {root}: "
            + "; ".join(f"{name} ({what})" for name, what in missing.items())
            + f"; print the download commands with `{' && '.join(commands)}`{leave}"
        )
    return job


# Child processes and step records.


def run_child(cmd: Sequence[str], log_path: Path, threads: int | None = None) -> dict[str, float]:
    """Runs a script, its output to `log_path`; its wall and CPU time and peak RSS. A failure is a
    PipelineError with the child's last output line and the log's path."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if threads:
        env.update(TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS=str(threads))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            [sys.executable, *cmd], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
        last = lines[-1].strip() if lines else f"exit status {proc.returncode}"
        raise PipelineError(f"{Path(cmd[0]).name} failed: {last} (log: {log_path})")
    cpu = usage.ru_utime + usage.ru_stime  # the step's own work, whatever else runs beside it
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
    }


def read_done(folder: Path, inputs: dict[str, Any]) -> dict[str, Any] | None:
    """A step's record if it finished on exactly `inputs` and its outputs still exist."""
    try:
        done = json.loads((folder / DONE).read_text())
    except (OSError, ValueError):
        return None
    if done.get("inputs") != inputs:
        return None
    if not all(Path(p).exists() for p in done.get("outputs", [])):
        return None
    return done


def write_done(folder: Path, inputs: dict[str, Any], outputs: list[str], **facts: Any) -> dict:
    """A finished step's record, with the worker (host:pid) it ran on."""
    done = {
        "inputs": inputs,
        "outputs": outputs,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        **facts,
    }
    atomic_write_text(folder / DONE, json.dumps(done, indent=1, sort_keys=True) + "\n")
    return done


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes ("missing" when it is gone): a step knows its inputs by
    content, since a re-ranked CSV keeps its length and a retrained model its folder name."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"


def model_identity(model_dir: str) -> str:
    """A saved run's content: its model folder's fingerprint and its `run_<hash>.jsonz`."""
    folder = Path(model_dir)
    run_file = folder.parent / f"run_{folder.name.removeprefix('model_')}.jsonz"
    return f"{model_fingerprint(folder)}:{file_digest(run_file)}"


# The three steps.


def run_hash_of(c: CollectionSpec, flags: Sequence[str]) -> str:
    """The run hash the training script gives these flags (parsed as it parses them)."""
    names = c.args_type.flag_names()
    given, unknown = build_parser(c, "").parse_known_args(expand_flagfiles(flags, names))
    if unknown:
        raise PipelineError(f"{c.train_script}: unknown flags {' '.join(unknown)}")
    return c.args_type(**{k: v for k, v in vars(given).items() if k in names}).run_hash()


def finished_run(c: CollectionSpec, out_dir: Path, run_hash: str) -> str | None:
    """`model_<hash>` if it holds a finished, readable run of the collection, else None."""
    model_dir = out_dir / f"model_{run_hash}"
    if not (out_dir / f"run_{run_hash}.jsonz").is_file() or not model_dir.is_dir():
        return None
    try:
        read_run(model_dir, c.kind, required=())
    except PipelineError:
        return None
    return str(model_dir)


def train_inputs(job: Job, c: CollectionSpec, candidate: str, seed: int) -> tuple[Path, dict]:
    """(step folder, inputs) of one (collection, candidate, seed) training."""
    out_dir = job.out / c.slug
    recipe = job.recipe(c, candidate)
    flags = [f"--flagfile={recipe}", *job.data_flags(c), *job.train_flags, f"--seed={seed}"]
    flags += [*c.collection_flags, f"--out_dir={out_dir}", job.cache_flag(c)]
    step_dir = out_dir / candidate_name(candidate) / f"seed_{seed}"
    return step_dir, {"script": c.train_script, "flags": flags}


def trained_models(job: Job, c: CollectionSpec) -> dict[str, list[str]] | None:
    """{candidate: model folders} once every training of a collection has its record for
    this job's inputs; None while one is missing."""
    trained: dict[str, list[str]] = {}
    for candidate in job.candidates[c.kind]:
        for seed in range(job.seeds):
            done = read_done(*train_inputs(job, c, candidate, seed))
            if done is None:
                return None
            trained.setdefault(candidate_name(candidate), []).append(done["model_dir"])
    return trained


def train_step(
    job: Job, c: CollectionSpec, candidate: str, seed: int, threads: int | None, log: Log
) -> dict:
    """One (collection, candidate, seed) training, unless its run is finished already (by its
    hash)."""
    out_dir = job.out / c.slug
    name = candidate_name(candidate)
    step_dir, inputs = train_inputs(job, c, candidate, seed)
    flags = inputs["flags"]
    label = f"train {c.name} {name} seed {seed}"
    done = read_done(step_dir, inputs)
    if done is not None:
        log(f"{label}: reused {done['model_dir']}")
        return {**done, "collection": c.name, "candidate": name, "seed": seed, "reused": True}
    finished = finished_run(c, out_dir, run_hash_of(c, flags))
    if finished is not None:  # trained before its step record was written
        done = write_done(step_dir, inputs, [finished], model_dir=finished, wall_s=None)
        log(f"{label}: reused {finished}")
        return {**done, "collection": c.name, "candidate": name, "seed": seed, "reused": True}
    log(f"{label}: started" + (f" on {threads} TensorFlow threads" if threads else ""))
    cost = run_child([c.train_script, *flags], step_dir / "train.log", threads)
    cost["threads"] = threads
    saved = re.findall(r"^saved model: (.+)$", (step_dir / "train.log").read_text(), re.M)
    if not saved:
        raise PipelineError(f"{label}: no saved model in {step_dir / 'train.log'}")
    model_dir = saved[-1].strip()
    done = write_done(step_dir, inputs, [model_dir], model_dir=model_dir, **cost)
    log(f"{label}: done in {cost['wall_s']:.0f} s, peak RSS {cost['peak_rss_mb']:.0f} MB")
    return {**done, "collection": c.name, "candidate": name, "seed": seed, "reused": False}


def rank_step(
    job: Job, c: CollectionSpec, trained: dict[str, list[str]], threads: int | None, log: Log
):
    """Evaluates every candidate's seed ensemble and their blend on validation, chooses one
    (`choice.choose`), then ranks test with it; `trained`: {candidate: model folders}."""
    step_dir = job.out / c.slug
    trained = {name: sorted(dirs) for name, dirs in trained.items()}
    every = sorted(d for dirs in trained.values() for d in dirs)
    csv_path = step_dir / "predictions.csv"
    evaluation = step_dir / "evaluation"
    inputs = {
        "models": {n: {d: model_identity(d) for d in dirs} for n, dirs in trained.items()},
        "data": list(job.data_flags(c)),
    }
    done = read_done(step_dir, inputs)
    if done is not None:
        log(f"rank {c.name}: reused {csv_path} ({done['choice']['chosen']})")
        return {**done, "collection": c.name, "reused": True}
    log(f"rank {c.name}: evaluating {len(every)} runs of {len(trained)} candidates on valid")
    data = [f for f in job.data_flags(c) if f.startswith("--data_root=")] + [job.cache_flag(c)]
    groups = f"--groups_json={json.dumps(trained)}"
    eval_cost = run_child(
        [c.evaluate_script, f"--dirs={','.join(every)}", *data, groups, f"--output={evaluation}"],
        step_dir / "evaluate.log",
        threads,
    )
    eval_cost["threads"] = threads
    choice = choose_option(trained, Path(f"{evaluation}_items.csv"))
    chosen = every if choice["chosen"] == BLEND else trained[choice["chosen"]]
    rank_cost = run_child(
        [c.predict_script, f"--dir={','.join(chosen)}", *data, f"--output={csv_path}"],
        step_dir / "predict.log",
        threads,
    )
    rank_cost["threads"] = threads
    outputs = [str(csv_path), f"{evaluation}.csv", f"{evaluation}.md", f"{evaluation}_items.csv"]
    done = write_done(
        step_dir,
        inputs,
        outputs,
        csv=str(csv_path),
        evaluation=str(evaluation),
        choice=choice,
        evaluate=eval_cost,
        predict=rank_cost,
    )
    log(f"choice {c.name}: {choice['chosen']}: {choice['reason']}")
    return {**done, "collection": c.name, "reused": False}


def choose_option(trained: dict[str, list[str]], items_csv: Path) -> dict[str, Any]:
    """The choice among the candidates and their blend, from the validation figures per item
    (`<evaluation>_items.csv`), with each seed's mean figure for the report."""
    items = read_items_csv(items_csv)
    options = option_names(list(trained))
    default = DEFAULT_OPTION if DEFAULT_OPTION in trained else next(iter(trained))
    choice = choose({o: items[o] for o in options}, default)
    seeds = {
        name: [mean_figure(items[f"model {Path(d).name}"]) for d in dirs]
        for name, dirs in trained.items()
    }
    return {
        "chosen": choice.chosen,
        "default": choice.default,
        "reason": choice.reason,
        "options": [dataclasses.asdict(cmp) for cmp in choice.comparisons],
        "seeds": seeds,
    }


def join_step(job: Job, ranked: Sequence[dict], log: Log) -> dict:
    """create_kaggle_csv.py over the collections' CSVs (never a dummy row)."""
    output = job.out / "predictions_kaggle.csv"
    order = {name: i for i, name in enumerate(COLLECTIONS)}
    csvs = [r["csv"] for r in sorted(ranked, key=lambda r: order[r["collection"]])]
    inputs = {"csvs": {p: file_digest(Path(p)) for p in csvs}, "flags": list(job.join_flags)}
    join_dir = job.out / "join"
    done = read_done(join_dir, inputs)
    if done is not None:
        log(f"join: reused {output}")
        return {**done, "reused": True}
    cmd = ["create_kaggle_csv.py", f"--inputcsv={','.join(csvs)}", *job.join_flags]
    cost = run_child([*cmd, "--no_dummy_rows", f"--output={output}"], join_dir / "join.log")
    summary = [ln for ln in (join_dir / "join.log").read_text().splitlines() if "wrote" in ln]
    done = write_done(join_dir, inputs, [str(output)], output=str(output), **cost)
    log(summary[-1] if summary else f"join: wrote {output}")
    return {**done, "reused": False}


# The report.


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _cell(value: float, signed: bool = False) -> str:
    if not math.isfinite(value):
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def choice_table(choice: dict[str, Any], figure: str) -> list[str]:
    """The choice of a collection: each option's validation figure (per seed for a
    candidate), its paired difference against the default and its standard error."""
    default, chosen = choice["default"], choice["chosen"]
    lines = [
        f"| option | {figure} per seed | mean ± std over seeds | mean over items | "
        f"paired difference vs {default} | standard error | items | chosen |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for option in choice["options"]:
        name = option["option"]
        seeds = [v for v in choice["seeds"].get(name, []) if math.isfinite(v)]
        per_seed = ", ".join(f"{v:.4f}" for v in seeds) or "-"
        spread = "-"
        if seeds:
            mean = sum(seeds) / len(seeds)
            std = math.sqrt(sum((v - mean) ** 2 for v in seeds) / len(seeds))
            spread = f"{mean:.4f} ± {std:.4f}"
        diff = "0 (the default)" if name == default else _cell(option["diff"], signed=True)
        mark = "yes" if name == chosen else ""
        lines.append(
            f"| {name} | {per_seed} | {spread} | {_cell(option['mean'])} | {diff} | "
            f"{_cell(option['se']) if name != default else '-'} | {option['items'] or '-'} | "
            f"{mark} |"
        )
    return lines


def collection_section(job: Job, c: CollectionSpec) -> list[str]:
    """A collection's report section: the choice on validation and its figures."""
    rank = _read_json(job.out / c.slug / DONE)
    choice = rank.get("choice", {})
    evaluation = Path(rank.get("evaluation", job.out / c.slug / "evaluation"))
    lines = [f"## {c.name}", ""]
    if choice:
        lines += [f"Submitted: **{choice['chosen']}**. {choice['reason']}.", ""]
        lines += choice_table(choice, c.choice_figure)
    alt = f"{c.name}: each option's validation figure per item"
    lines += ["", f"![{alt}]({c.slug}/{evaluation.name}_options.png)"]
    alt = f"{c.name}: {c.figure.replace('_', ' ')}, every run and the ensemble of all"
    lines += ["", f"![{alt}]({c.slug}/{evaluation.name}_{c.figure}.png)", ""]
    return lines


def cost_rows(job: Job) -> list[str]:
    """The time and memory table: every training, ranking and the join."""

    def cell(cost: dict, worker: str | None = None) -> str:
        wall, rss = cost.get("wall_s"), cost.get("peak_rss_mb")
        if wall is None:
            return f"trained before this job's record | | | {worker or ''} |"
        threads = cost.get("threads") or "-"
        return f"{wall:.0f} | {rss:.0f} | {threads} | {worker or cost.get('worker', '')} |"

    lines = [
        "| step | wall s | peak RSS MB | TensorFlow threads | worker (host:pid) |",
        "|---|---|---|---|---|",
    ]
    for c in job.collections:
        for candidate in job.candidates[c.kind]:
            name = candidate_name(candidate)
            for seed in range(job.seeds):
                done = _read_json(job.out / c.slug / name / f"seed_{seed}" / DONE)
                lines.append(f"| train {c.name} {name} seed {seed} | {cell(done)}")
        rank = _read_json(job.out / c.slug / DONE)
        worker = rank.get("worker")
        lines.append(f"| evaluate {c.name} (valid) | {cell(rank.get('evaluate', {}), worker)}")
        lines.append(f"| rank {c.name} (test) | {cell(rank.get('predict', {}), worker)}")
    lines.append(f"| join | {cell(_read_json(job.out / 'join' / DONE))}")
    return lines


def write_report(job: Job, wall_s: float, where: str) -> tuple[Path, bool]:
    """`<out>/report.md` from the steps' records; written only when a step ran this time
    (or it is missing), so a rerun after completion rewrites nothing."""
    path = job.out / "report.md"
    records = [*job.out.glob(f"*/{DONE}"), *job.out.glob(f"*/*/*/{DONE}")]
    started = time.time() - wall_s
    if path.exists() and not any(r.stat().st_mtime >= started for r in records):
        return path, False
    joined = (job.out / "join" / "join.log").read_text(errors="replace").splitlines()
    summary = next((line for line in joined if line.startswith("wrote ")), "")
    lines = ["# Kaggle submission report", ""]
    if job.toy:
        lines += ["**TOY DATA: the bundled synthetic toy sets; these numbers say nothing about "
                  "real TPU programs.**", ""]  # fmt: skip
    lines += [
        f"Seeds 0..{job.seeds - 1} of each candidate recipe. Each collection submits the "
        f"{DEFAULT_OPTION} recipe's seed ensemble unless another candidate's ensemble, or the "
        "blend of all, beats it on the validation split (every kernel or graph and "
        "configuration) by more than two standard errors of the paired per-item difference. "
        "Test labels are never read.",
        "",
        f"Submission: {summary or job.out / 'predictions_kaggle.csv'}",
        "",
    ]
    for c in job.collections:
        lines += collection_section(job, c)
    lines += ["## Time and memory", "", f"This run of the job: {wall_s:.0f} s on {where}.", ""]
    lines += cost_rows(job)
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path, True
