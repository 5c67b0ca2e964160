#!/usr/bin/env python3
"""Ranking quality of training recipes on programs never seen in training.

    .venv/bin/python bench/quality.py                               # full size, 3 seeds
    .venv/bin/python bench/quality.py --size small --seeds 2 \\
        --recipes baseline,ablation/gat_defaults,ablation/gat_configs64

Generates two labelled synthetic sets with the project's generator
(data/make_synthetic.py --test_labels): one with the default cost-model
constants and one with other constants (`--hardware alternate`: less on-chip
memory, lower bandwidth, a costlier grid step, wider alignment), so a gain that
fits one cost model only shows up. Valid and test kernels come from programs
that train never holds (the generator's program lists are disjoint).

Each recipe is a flagfile (`configs/<name>.flags`, or a path) trained by
`tiles_train.py --flagfile=...` once per seed and set. Every saved model is
then scored on the full valid and test splits through the prediction path
(`SavedRanker`), and the seeds of a recipe also as an ensemble (mean of
per-kernel standardized scores). Reported: val and test top-1/5/10 error, OPA,
Kaggle score and training wall time, mean ± std over seeds, the ensemble's
figures and a per-program table; written to `<out>/quality.{json,md}`, with
the figures `<out>/quality_per_program.png` (test top-5 error per program and
recipe) and `<out>/quality_ablation.png` (val and test top-5 error per recipe).
Trained runs stay in `<out>/runs/<size>_<set>/<recipe>-<digest>/s<seed>` and
are reused while the flags the recipe resolves to (the digest) are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # this process scores the saved models

from baselines.tiles import plots
from baselines.tiles.cli import entry_parser
from baselines.tiles.errors import PipelineError, run_cli
from baselines.tiles.io_utils import atomic_write_text

SIZES = {
    "small": dict(train=300, valid=60, test=60, min_configs=50, max_configs=1500),
    "full": dict(train=1000, valid=200, test=200, min_configs=100, max_configs=3000),
}
HARDWARE = ("default", "alternate")
METRICS = ("top1_err", "top5_err", "top10_err", "opa", "kaggle_score")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


def recipe_path(name: str) -> Path:
    path = Path(name)
    if path.suffix == ".flags" and path.is_file():
        return path.resolve()
    path = ROOT / "configs" / f"{name}.flags"
    if not path.is_file():
        raise PipelineError(f"--recipes: no flagfile for '{name}' (looked for {path})")
    return path


def recipe_digest(recipe: Path) -> str:
    """Hash of the training flags a recipe resolves to: a changed recipe never reuses old runs.

    Of the resolved flags, not of the file's lines, so how a recipe file is
    written (flat, or including another) does not change its digest.
    """
    import tiles_train

    args = tiles_train.parse_args([f"--flagfile={recipe}"])
    return hashlib.sha256(json.dumps(args.to_dict(), sort_keys=True).encode()).hexdigest()[:8]


def generate(root: Path, size: str, hardware: str, seed: int) -> None:
    """Makes the set once; a finished set is marked by its parameters."""
    params = dict(SIZES[size], hardware=hardware, seed=seed)
    marker = root / "quality_set.json"
    if marker.is_file() and json.loads(marker.read_text()) == params:
        return
    flags = [f"--{k}={v}" for k, v in SIZES[size].items()]
    cmd = [sys.executable, str(ROOT / "data" / "make_synthetic.py"), f"--out={root}", *flags]
    cmd += [f"--hardware={hardware}", f"--seed={seed}", "--test_labels", "--quiet"]
    subprocess.run(cmd, check=True, env=ENV)
    atomic_write_text(marker, json.dumps(params))


def train_run(recipe: Path, data_root: Path, out_dir: Path, seed: int) -> dict:
    """Trains one seed of a recipe (reused when its run file exists); returns the record."""
    runs = sorted(out_dir.glob("run_*.jsonz"))
    if not runs:
        cmd = [sys.executable, str(ROOT / "tiles_train.py"), f"--flagfile={recipe}"]
        cmd += [f"--seed={seed}", f"--data_root={data_root}", f"--out_dir={out_dir}"]
        cmd += [f"--cache_dir={data_root.parent / 'cache'}", "--test_mode=metrics"]
        started = time.perf_counter()
        proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise PipelineError(f"training {recipe.name} seed {seed} failed: {tail[0]}")
        (out_dir / "wall_s.txt").write_text(f"{time.perf_counter() - started:.1f}\n")
        runs = sorted(out_dir.glob("run_*.jsonz"))
    from baselines.tiles.run_files import read_run_file  # needs TensorFlow: imported late

    record = read_run_file(runs[0])
    record["wall_s"] = float((out_dir / "wall_s.txt").read_text())
    record["model_dir"] = str(out_dir / f"model_{record['run_hash']}")
    return record


def evaluate(model_dirs: list[str], splits: dict) -> dict:
    """Per split: each model's and the ensemble's error table rows."""
    from baselines.tiles.evaluate import error_table
    from baselines.tiles.predict import SavedRanker, ensemble_scores

    rankers = [SavedRanker.load(d) for d in model_dirs]
    tables = {}
    for name, split in splits.items():
        members = {str(i): r.score(split, progress=False) for i, r in enumerate(rankers)}
        members["ensemble"] = ensemble_scores(list(members.values()))
        tables[name] = error_table(split, members)
    return tables


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(tables: dict, walls: list[float], seeds: int) -> dict:
    """Mean ± std over seeds of the "ALL" rows, the ensemble's, and per-program means."""
    out: dict = {"train_wall_s": mean_std(walls)}
    for split, rows in tables.items():
        every = [r for r in rows if r["program"] == "ALL"]
        members = [r for r in every if r["model"] != "ensemble"]
        (ensemble,) = [r for r in every if r["model"] == "ensemble"]
        out[split] = {m: mean_std([r[m] for r in members]) for m in METRICS}
        out[split]["ensemble"] = {m: ensemble[m] for m in METRICS} if seeds > 1 else None
        programs = sorted({r["program"] for r in rows} - {"ALL"})
        out[split]["programs"] = {
            p: {
                "kernels": next(r["kernels"] for r in rows if r["program"] == p),
                **{
                    m: statistics.mean(
                        r[m] for r in rows if r["program"] == p and r["model"] != "ensemble"
                    )
                    for m in ("top1_err", "top5_err")
                },
                "top5_err_std": mean_std(
                    [r["top5_err"] for r in rows if r["program"] == p and r["model"] != "ensemble"]
                )[1],
            }
            for p in programs
        }
    return out


def fmt(pair) -> str:
    mean, std = pair
    return f"{mean:.3f} ± {std:.3f}"


def markdown(result: dict) -> str:
    lines = [
        f"Size {result['size']} ({result['sizes']}), {result['seeds']} seeds; "
        f"valid/test programs never seen in training. Mean ± std over seeds; "
        "`ens` = the seeds' ensemble.",
        "",
        "| set | recipe | val top-1 | val top-5 | val top-10 | val OPA | test top-1 | "
        "test top-5 | test top-10 | test OPA | val/test top-5 ens | train s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, s in result["results"].items():
        hardware, recipe = key.split("|")
        ens = [s[x]["ensemble"] for x in ("valid", "test")]
        ens_text = (
            f"{ens[0]['top5_err']:.3f} / {ens[1]['top5_err']:.3f}" if ens[0] is not None else "-"
        )
        lines.append(
            f"| {hardware} | {recipe} | "
            + " | ".join(fmt(s["valid"][m]) for m in ("top1_err", "top5_err", "top10_err", "opa"))
            + " | "
            + " | ".join(fmt(s["test"][m]) for m in ("top1_err", "top5_err", "top10_err", "opa"))
            + f" | {ens_text} | {s['train_wall_s'][0]:.0f} |"
        )
    lines += ["", "Per program (mean over seeds), top-5 error:", ""]
    for key, s in result["results"].items():
        for split in ("valid", "test"):
            programs = s[split]["programs"]
            cells = ", ".join(
                f"{p} ({v['kernels']}) {v['top5_err']:.3f}" for p, v in programs.items()
            )
            lines.append(f"- {key.replace('|', ' / ')} / {split}: {cells}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--size",
        choices=sorted(SIZES),
        default="full",
        help="full: 1000/200/200 kernels, 100-3000 configs each; small: 300/60/60, 50-1500",
    )
    parser.add_argument("--seeds", type=int, default=3, help="training seeds per recipe and set")
    parser.add_argument("--sets", default=",".join(HARDWARE), help="hardware presets to test on")
    parser.add_argument("--recipes", default="baseline,recommended", help="flagfile names or paths")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "out" / "quality",
        help="sets, trained runs (reused while a recipe is unchanged), tables and figures",
    )
    parser.add_argument("--data_seed", type=int, default=1, help="seed of the generated sets")
    args = parser.parse_args()
    if args.seeds < 1:
        raise PipelineError(f"--seeds: must be at least 1, got {args.seeds}")
    sets = [s.strip() for s in args.sets.split(",")]
    unknown = [s for s in sets if s not in HARDWARE]
    if unknown:
        raise PipelineError(f"--sets: unknown {', '.join(unknown)}; choose from {HARDWARE}")
    recipes = {name.strip(): recipe_path(name.strip()) for name in args.recipes.split(",")}

    from baselines.tiles.data import load_split

    out = args.out.expanduser().resolve()
    results = {}
    for hardware in sets:
        data_root = out / "sets" / f"{args.size}_{hardware}"
        generate(data_root, args.size, hardware, args.data_seed)
        splits = {s: load_split(data_root / s, name=s, progress=False) for s in ("valid", "test")}
        for name, recipe in recipes.items():
            records = []
            for seed in range(args.seeds):
                folder = f"{name.replace('/', '_')}-{recipe_digest(recipe)}"
                run_dir = out / "runs" / f"{args.size}_{hardware}" / folder / f"s{seed}"
                records.append(train_run(recipe, data_root, run_dir, seed))
                print(f"{hardware} {name} seed {seed}: {records[-1]['final_error']}", flush=True)
            tables = evaluate([r["model_dir"] for r in records], splits)
            results[f"{hardware}|{name}"] = summarize(
                tables, [r["wall_s"] for r in records], args.seeds
            )
    result = {
        "size": args.size,
        "sizes": SIZES[args.size],
        "seeds": args.seeds,
        "recipes": {
            k: str(v.relative_to(ROOT)) if v.is_relative_to(ROOT) else str(v)
            for k, v in recipes.items()
        },
        "results": results,
    }
    atomic_write_text(out / "quality.json", json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    atomic_write_text(out / "quality.md", text)
    per_program, ablation = plots.quality_figures(result)
    plots.save_png(per_program, out / "quality_per_program.png")
    plots.save_png(ablation, out / "quality_ablation.png")
    print(text)
    return 0


if __name__ == "__main__":
    run_cli(main)
