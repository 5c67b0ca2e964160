#!/usr/bin/env python3
"""The layout pipeline on the real TpuGraphs layout samples: load, train, rank, submit.

    .venv/bin/python bench/layout_real.py --samples ../shared/real_samples --out out/layout_real

Runs the entry scripts as a user would, in fresh processes, and writes
`<out>/layout_real.md` and `<out>/layout_real.json`:

1. every real layout file is read and validated (nodes, configurable nodes,
   configurations, distinct configurations, seconds);
2. each recipe (`--recipes`, files `configs/layout/<name>.flags`) trains on the
   real xla:default train file, once per seed, and the run file's validation
   Kendall's tau on the real xla:default valid file is reported beside the tau of
   random scores. One train graph and one valid graph: this proves the pipeline
   runs on real data, it says nothing about quality;
3. one model per collection, trained on the bundled toy set with `--toy_recipe`,
   ranks that collection's real test file(s) (`layout_gen_predictions_csv.py
   --data_root <samples>/layout`); each row must list every configuration once;
4. `create_kaggle_csv.py` joins the four layout CSVs with the real
   `sample_submission.csv` (`--allow_missing`: the samples hold 4 of the 50
   layout test files and no tile predictions are made here, so every other row
   is a dummy row, counted in the summary line quoted in the report).
"""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import atomic_write_text

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
COLLECTIONS = [(so, se) for so in ("xla", "nlp") for se in ("default", "random")]


def run(cmd: list[str]) -> tuple[str, float]:
    """Runs one entry script; returns its stdout and wall seconds (a failure is one line)."""
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise PipelineError(f"{' '.join(cmd[1:3])} failed (exit {proc.returncode}): {tail}")
    return proc.stdout, time.perf_counter() - started


def saved_model(stdout: str) -> Path:
    match = re.search(r"^saved model: (.+)$", stdout, re.M)
    if not match:
        raise PipelineError("layout_train.py did not say where it saved the model")
    return Path(match.group(1).strip())


def read_run(model_dir: Path) -> dict:
    from baselines.layout.run_data import read_layout_run

    return read_layout_run(model_dir)


def load_files(layout_root: Path) -> list[dict]:
    import numpy as np

    from baselines.layout.data import read_layout_file

    rows = []
    for path in sorted(layout_root.glob("*/*/*/*.npz")):
        started = time.perf_counter()
        graph = read_layout_file(path)
        seconds = time.perf_counter() - started
        distinct = len(np.unique(graph.node_config_feat.reshape(graph.num_configs, -1), axis=0))
        rows.append(
            {
                "file": str(path.relative_to(layout_root)),
                "nodes": graph.num_nodes,
                "configurable": int(len(graph.node_config_ids)),
                "configs": graph.num_configs,
                "distinct": distinct,
                "read_s": round(seconds, 3),
            }
        )
    return rows


def random_tau(valid_file: Path, draws: int = 200) -> float:
    import numpy as np

    from baselines.layout.data import read_layout_file
    from baselines.layout.metrics import kendall_tau

    graph = read_layout_file(valid_file)
    rng = np.random.default_rng(0)
    return float(
        np.mean(
            [kendall_tau(rng.random(graph.num_configs), graph.config_runtime) for _ in range(draws)]
        )
    )


def check_rows(csv_path: Path, layout_root: Path) -> list[dict]:
    from baselines.layout.data import read_config_count

    found = []
    with open(csv_path, newline="") as f:
        for row_id, ranking in list(csv.reader(f))[1:]:
            _, source, search, stem = row_id.split(":")
            configs = read_config_count(layout_root / source / search / "test" / f"{stem}.npz")
            order = [int(x) for x in ranking.split(";")]
            if sorted(order) != list(range(configs)):
                raise PipelineError(f"{csv_path}: {row_id} is not a permutation of {configs}")
            found.append({"id": row_id, "configs": configs})
    return found


def main() -> int:
    parser = entry_parser(__doc__)
    parser.add_argument("--samples", default=str(ROOT.parent / "shared" / "real_samples"))
    parser.add_argument("--recipes", default="baseline,recommended")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--toy_recipe", default="recommended")
    parser.add_argument("--out", default="out/layout_real")
    args = parser.parse_args()
    samples = Path(args.samples).expanduser().resolve()
    layout_root = samples / "layout"
    if not layout_root.is_dir():
        raise PipelineError(f"--samples: {layout_root} not found; pass the real_samples folder")
    out = Path(args.out).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    report: dict = {"commit": commit(), "samples": str(samples)}

    report["files"] = load_files(layout_root)
    print(f"read {len(report['files'])} real layout files", flush=True)

    seeds = [int(s) for s in args.seeds.split(",")]
    real_runs = []
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        for recipe in args.recipes.split(","):
            flags = ROOT / "configs" / "layout" / f"{recipe}.flags"
            taus, walls = [], []
            for seed in seeds:
                stdout, wall = run(
                    [py, "layout_train.py", f"--flagfile={flags}", "--source=xla",
                     "--search=default", f"--data_root={layout_root}", f"--seed={seed}",
                     f"--out_dir={scratch}/real_{recipe}"]
                )  # fmt: skip
                record = read_run(saved_model(stdout))
                taus.append(record["val"]["kendall_tau"])
                walls.append(wall)
                print(f"real xla:default {recipe} seed {seed}: tau {taus[-1]:.4f}", flush=True)
            real_runs.append(
                {"recipe": recipe, "taus": taus, "median_wall_s": statistics.median(walls)}
            )
        report["real_train"] = real_runs
        report["random_tau"] = random_tau(next((layout_root / "xla/default/valid").glob("*.npz")))

        csvs, ranked = [], []
        flags = ROOT / "configs" / "layout" / f"{args.toy_recipe}.flags"
        for source, search in COLLECTIONS:
            if not (layout_root / source / search / "test").is_dir():
                continue
            stdout, _ = run(
                [py, "layout_train.py", f"--flagfile={flags}", f"--source={source}",
                 f"--search={search}", f"--out_dir={scratch}/toy_{source}_{search}"]
            )  # fmt: skip
            model_dir = saved_model(stdout)
            csv_path = out / f"layout_{source}_{search}.csv"
            _, wall = run(
                [py, "layout_gen_predictions_csv.py", f"--dir={model_dir}",
                 f"--data_root={layout_root}", f"--output={csv_path}"]
            )  # fmt: skip
            rows = check_rows(csv_path, layout_root)
            ranked += [dict(r, predict_wall_s=round(wall, 1)) for r in rows]
            csvs.append(str(csv_path))
        report["toy_model_ranks_real_test"] = ranked
        stdout, _ = run(
            [py, "create_kaggle_csv.py", f"--inputcsv={','.join(csvs)}",
             f"--sample={samples / 'sample_submission.csv'}", f"--layout_root={layout_root}",
             "--allow_missing", f"--output={out / 'predictions_kaggle.csv'}"]
        )  # fmt: skip
        report["submission"] = [line for line in stdout.splitlines() if line.startswith("wrote")]
    atomic_write_text(out / "layout_real.json", json.dumps(report, indent=1))
    atomic_write_text(out / "layout_real.md", markdown(report))
    print(markdown(report), end="")
    return 0


def commit() -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return proc.stdout.strip() or "unknown"


def markdown(report: dict) -> str:
    lines = [f"Real layout samples ({report['samples']}), commit {report['commit']}", ""]
    lines += [
        "| file | nodes | configurable | configs | distinct | read s |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["files"]:
        lines.append(
            f"| {r['file']} | {r['nodes']:,} | {r['configurable']} | {r['configs']:,} | "
            f"{r['distinct']:,} | {r['read_s']} |"
        )
    lines += [
        "",
        "Trained on the real xla:default train file, Kendall's tau on its valid file:",
        "",
    ]
    lines += ["| recipe | tau per seed | mean | train wall s (median) |", "|---|---|---|---|"]
    for r in report["real_train"]:
        taus = ", ".join(f"{t:.3f}" for t in r["taus"])
        lines.append(
            f"| {r['recipe']} | {taus} | {statistics.mean(r['taus']):.3f} | "
            f"{r['median_wall_s']:.0f} |"
        )
    lines.append(f"| random scores | | {report['random_tau']:.3f} | |")
    lines += ["", "Toy-trained models ranking the real test files:", ""]
    lines += ["| row | configurations ranked | predict wall s |", "|---|---|---|"]
    for r in report["toy_model_ranks_real_test"]:
        lines.append(f"| {r['id']} | {r['configs']:,} | {r['predict_wall_s']} |")
    lines += ["", *report["submission"], ""]
    return "\n".join(lines)


if __name__ == "__main__":
    run_cli(main)
