#!/usr/bin/env python3
"""What a tile recipe change costs: one recipe's epoch and prediction against another's.

    .venv/bin/python bench/recipe_cost.py --data_root <data> --out out/recipe_cost

Each round trains every recipe in turn (A B A B ...: a machine whose speed drifts
moves both alike) for `--epochs` epochs through `tiles_train.py` on the same
data root and warm cache, then predicts the data root's test split with that
model through `tiles_gen_predictions_csv.py`. Per recipe it reports the median
over rounds of the first epoch's training steps (tracing included), of the
steady epoch (the median of the later epochs' training steps, from the run
record's `timings`), and of the prediction's wall seconds, start to CSV; then
each figure of every recipe over the first recipe's, round by round, as the
median ratio. A full training's time follows as the steady epoch times the
recipe's epochs, which is how docs/performance.md extrapolates.

Writes `<out>/recipe_cost.{json,md}`.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import recipe_path  # noqa: E402
from quality_report import markdown_table  # noqa: E402

from baselines.core.cli import entry_parser  # noqa: E402
from baselines.core.errors import PipelineError, run_cli  # noqa: E402
from baselines.core.io_utils import atomic_write_text  # noqa: E402

FIGURES = ("first_epoch_s", "steady_epoch_s", "predict_s")


def _run(cmd: list[str], what: str) -> float:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise PipelineError(f"{what} failed: {tail}")
    return time.perf_counter() - started


def epoch_figures(timings: dict) -> tuple[float, float]:
    """(first epoch's training steps, median of the later epochs') from a run's `timings`."""
    train = timings["epoch_train_s"]
    if len(train) < 2:
        raise PipelineError("recipe_cost: a run needs 2 epochs or more for a steady epoch")
    return train[0], statistics.median(train[1:])


def one_round(recipe: Path, args, work: Path) -> dict[str, float]:
    """Trains `recipe` for `args.epochs` epochs and predicts the test split; its figures."""
    from baselines.tiles.run_records import read_run_file  # needs TensorFlow: imported late

    shutil.rmtree(work, ignore_errors=True)
    train = [sys.executable, str(ROOT / "tiles_train.py"), f"--flagfile={recipe}"]
    train += [f"--epochs={args.epochs}", f"--data_root={args.data_root}", f"--out_dir={work}"]
    train += [f"--cache_dir={args.cache_dir}", "--seed=0"]
    _run(train, f"training {recipe.name}")
    (run,) = work.glob("run_*.jsonz")
    record = read_run_file(run)
    first, steady = epoch_figures(record["timings"])
    model = work / f"model_{record['run_hash']}"
    predict = [sys.executable, str(ROOT / "tiles_gen_predictions_csv.py"), f"--dir={model}"]
    predict += [f"--data_root={args.data_root}", f"--output={work / 'test.csv'}"]
    predict_s = _run(predict, f"predicting with {recipe.name}")
    return {"first_epoch_s": first, "steady_epoch_s": steady, "predict_s": predict_s}


def summarize(rounds: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per recipe, each figure's median over rounds and its median ratio, round by round, to
    the first recipe's (`<figure>_ratio`)."""
    names = list(rounds)
    first = rounds[names[0]]
    out = {}
    for name in names:
        mine = rounds[name]
        out[name] = {f: statistics.median(r[f] for r in mine) for f in FIGURES}
        for f in FIGURES:
            out[name][f"{f}_ratio"] = statistics.median(m[f] / b[f] for m, b in zip(mine, first))
    return out


def build_parser():
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--data_root", type=Path, required=True, help="a tile data root, as tiles_train.py takes"
    )
    parser.add_argument("--cache_dir", type=Path, default=None, help="default: <out>/cache")
    parser.add_argument(
        "--recipes",
        default="ablation/before_architecture,recommended",
        help="comma-separated flagfile names under configs/ or paths; ratios are to the first",
    )
    parser.add_argument("--epochs", type=int, default=4, help="epochs per training run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every recipe in turn")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "recipe_cost")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if args.epochs < 2 or args.rounds < 1:
        raise PipelineError("--epochs must be at least 2 and --rounds at least 1")
    names = [n for n in args.recipes.split(",") if n]
    recipes = {n: recipe_path(n) for n in names}
    args.out.mkdir(parents=True, exist_ok=True)
    args.cache_dir = args.cache_dir or args.out / "cache"
    rounds: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for i in range(args.rounds):
        for name, recipe in recipes.items():
            figures = one_round(recipe, args, args.out / "runs" / name.replace("/", "_"))
            rounds[name].append(figures)
            print(f"round {i + 1} {name}: {json.dumps(figures)}", flush=True)
    summary = summarize(rounds)
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "rounds": rounds}
    result["summary"] = summary
    atomic_write_text(args.out / "recipe_cost.json", json.dumps(result, indent=1) + "\n")
    header = ["recipe", *(f"{f} (median)" for f in FIGURES), *(f"{f} / first's" for f in FIGURES)]
    rows = [
        [n, *(f"{s[f]:.2f}" for f in FIGURES), *(f"{s[f + '_ratio']:.2f}" for f in FIGURES)]
        for n, s in summary.items()
    ]
    text = (
        f"{args.rounds} rounds, {args.epochs} epochs a training, data {args.data_root}.\n\n"
        + markdown_table(header, rows)
    )
    atomic_write_text(args.out / "recipe_cost.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    run_cli(main)
