#!/usr/bin/env python3
"""End-to-end benchmark on a realistic-size synthetic tile set.

    .venv/bin/python bench/run_bench.py                 # 1000/200/200 kernels, ~400 configs each
    .venv/bin/python bench/run_bench.py --full          # sized like the real release (slow)

Generates the set with the project's own generator (data/make_synthetic.py),
then, `--repeats` times each, measures in fresh processes:

- cold load (empty cache) and warm load (cache) of the three splits;
- `tiles_train.py --epochs E` per model: wall time (load + train + full
  validation and test ranking + saving), training throughput in kernels/s and
  configs/s, full-validation evaluation time, peak RSS, validation top-5 error;
- `tiles_gen_predictions_csv.py` on the test split: wall time, ranking-loop
  kernels/s, peak RSS.

Medians go to <out>/bench.json and <out>/bench.md, with ratios against the
public baseline's figures, measured once on the same kind of machine and data
size (not in the same run: the ratios move with the machine's load).
"""

from __future__ import annotations

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

# The public baseline on a 2-core machine, 1000/200/200 synthetic kernels,
# ~577k configs, measured once when this project started: EarlyJoinSAGE
# --epochs 2 and the course's prediction script.
BASELINE = {
    "train_wall_s": 89.0,
    "train_peak_rss_mb": 2300.0,
    "predict_wall_s": 33.0,
    "predict_kernels_per_s": 9.0,
    "predict_peak_rss_mb": 1450.0,
}
SIZES = {
    "default": dict(train=1000, valid=200, test=200, min_configs=550, max_configs=1100),
    "full": dict(train=5709, valid=676, test=844, min_configs=2000, max_configs=4000),
}
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


def run_measured(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """Runs a command; returns wall seconds, peak RSS (MB) of that process, stdout."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    # ru_maxrss of the children waited for so far: each call runs in its own
    # helper process, so this is the peak of exactly this command.
    if proc.returncode != 0:
        last = err.strip().splitlines()[-1] if err.strip() else ""
        raise PipelineError(f"benchmark step failed: {' '.join(cmd)}: {last}")
    return wall, _child_peak_mb(), out


def _child_peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def measure(cmd: list[str], cwd: Path) -> dict:
    """Runs `cmd` inside a fresh helper so RUSAGE_CHILDREN covers it alone."""
    helper = [sys.executable, __file__, "--_measure", json.dumps(cmd)]
    proc = subprocess.run(helper, cwd=cwd, env=ENV, capture_output=True, text=True)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
        raise PipelineError(last.removeprefix("error: "))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _measure_main(cmd_json: str) -> int:
    wall, peak, out = run_measured(json.loads(cmd_json), Path.cwd())
    print(json.dumps({"wall_s": wall, "peak_rss_mb": peak, "stdout": out[-4000:]}))
    return 0


def generate(data_root: Path, size: dict, seed: int) -> None:
    if all((data_root / s).is_dir() for s in ("train", "valid", "test")):
        return
    cmd = [sys.executable, str(ROOT / "data" / "make_synthetic.py"), "--out", str(data_root)]
    for key, value in size.items():
        cmd += [f"--{key}", str(value)]
    cmd += ["--seed", str(seed), "--quiet"]
    print(f"generating {data_root} ...", flush=True)
    subprocess.run(cmd, check=True, env=ENV)


LOAD_SNIPPET = """
import sys, time, json
sys.path.insert(0, {root!r})
from baselines.tiles.data import load_splits
t = time.perf_counter()
splits = load_splits({data!r}, cache_dir={cache!r}, progress=False)
print(json.dumps({{"seconds": time.perf_counter() - t,
                   "kernels": sum(len(s) for s in splits.values()),
                   "configs": int(sum(s.num_configs.sum() for s in splits.values()))}}))
"""


def bench_load(data_root: Path, work: Path, repeats: int) -> dict:
    cold, warm = [], []
    info = {}
    for r in range(repeats):
        cache = work / f"load_cache_{r}"
        snippet = LOAD_SNIPPET.format(root=str(ROOT), data=str(data_root), cache=str(cache))
        for bucket in (cold, warm):
            res = measure([sys.executable, "-c", snippet], work)
            info = json.loads(res["stdout"].strip().splitlines()[-1])
            bucket.append(info["seconds"])
    return {
        "cold_load_s": statistics.median(cold),
        "warm_load_s": statistics.median(warm),
        "kernels": info["kernels"],
        "configs": info["configs"],
    }


def bench_model(model: str, data_root: Path, work: Path, epochs: int, repeats: int) -> dict:
    runs = []
    for r in range(repeats):
        out = work / f"train_{model}_{r}"
        res = measure(
            [
                sys.executable,
                str(ROOT / "tiles_train.py"),
                f"--model={model}",
                f"--epochs={epochs}",
                f"--data_root={data_root}",
                f"--out_dir={out}",
                f"--cache_dir={work / f'cache_{model}_{r}'}",
                "--test_mode=predictions",
            ],
            work,
        )
        # Imported here: the measuring helper runs this file too and needs no TensorFlow.
        from baselines.tiles.run_records import read_run_file

        (run_file,) = out.glob("run_*.jsonz")
        record = read_run_file(run_file)
        n_train = int(re.search(r"\((\d+) train", res["stdout"]).group(1))
        epochs_run = len(record["train_curve"]["epoch"])
        t = record["timings"]
        runs.append(
            {
                "wall_s": res["wall_s"],
                "peak_rss_mb": res["peak_rss_mb"],
                "load_s": t["load_s"],
                "train_s": t["train_s"],
                "val_eval_s": t["val_eval_s"],
                "test_eval_s": t["test_eval_s"],
                "train_kernels_per_s": n_train * epochs_run / t["train_s"],
                "train_configs_per_s": n_train * epochs_run * record["configs"] / t["train_s"],
                "val_top5_err": record["final_error"]["val"]["5"],
                "model_dir": str(next(out.glob("model_*"))),
            }
        )
    summary = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "model_dir"}
    summary["model_dir"] = runs[0]["model_dir"]
    return summary


def bench_predict(model_dir: str, data_root: Path, work: Path, repeats: int) -> dict:
    """The README's command, `--dir` alone: the data root comes from the run file."""
    runs = []
    for r in range(repeats):
        res = measure(
            [
                sys.executable,
                str(ROOT / "tiles_gen_predictions_csv.py"),
                f"--dir={model_dir}",
                f"--output={work / f'pred_{r}.csv'}",
            ],
            work,
        )
        if f"data: {data_root} (from the run file)" not in res["stdout"]:
            raise SystemExit(f"prediction did not read {data_root} from the run file")
        rate = float(re.search(r"\(([\d.]+) kernels/s\)", res["stdout"]).group(1))
        runs.append(
            {"wall_s": res["wall_s"], "peak_rss_mb": res["peak_rss_mb"], "kernels_per_s": rate}
        )
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def markdown(result: dict) -> str:
    load = result["load"]
    lines = [
        f"Data: {load['kernels']} kernels, {load['configs']} configs "
        f"({result['size']}); {result['repeats']} repeats, medians; machine: {result['machine']}.",
        "",
        f"Load (3 splits): cold {load['cold_load_s']:.1f} s, "
        f"warm (cache) {load['warm_load_s']:.2f} s.",
        "",
        "| model | train wall s | vs baseline | train kernels/s | train configs/s | "
        "full val eval s | val top-5 err | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, m in result["models"].items():
        ratio = BASELINE["train_wall_s"] / m["wall_s"]
        lines.append(
            f"| {name} | {m['wall_s']:.1f} | {ratio:.1f}x faster | "
            f"{m['train_kernels_per_s']:.0f} | {m['train_configs_per_s']:.0f} | "
            f"{m['val_eval_s']:.1f} | {m['val_top5_err']:.3f} | {m['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        "| prediction (test split) | wall s | vs baseline | ranking kernels/s | peak RSS MB |",
        "|---|---|---|---|---|",
    ]
    for name, p in result["predict"].items():
        lines.append(
            f"| {name} | {p['wall_s']:.1f} | "
            f"{BASELINE['predict_wall_s'] / p['wall_s']:.1f}x faster | {p['kernels_per_s']:.0f} "
            f"| {p['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        f"Public baseline (measured once, same machine kind and data size): train "
        f"{BASELINE['train_wall_s']:.0f} s and {BASELINE['train_peak_rss_mb']:.0f} MB for "
        f"EarlyJoinSAGE --epochs 2; prediction {BASELINE['predict_wall_s']:.0f} s, "
        f"{BASELINE['predict_kernels_per_s']:.0f} kernels/s, "
        f"{BASELINE['predict_peak_rss_mb']:.0f} MB.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--_measure":
        return _measure_main(sys.argv[2])
    parser = entry_parser(__doc__)
    parser.add_argument("--full", action="store_true", help="real-release size (slow)")
    parser.add_argument(
        "--models", default="EarlyJoinSAGE,LateJoinGAT", help="models to train and predict with"
    )
    parser.add_argument("--epochs", type=int, default=2, help="training epochs per run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each step (medians)")
    parser.add_argument("--seed", type=int, default=0, help="data set seed")
    parser.add_argument("--out", default=str(ROOT / "out" / "bench"), help="set and results")
    parser.add_argument("--data_root", default=None, help="use this set instead of generating")
    args = parser.parse_args()
    size_name = "full" if args.full else "default"
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data_root = (
        Path(args.data_root).resolve() if args.data_root else out / f"data_{size_name}_{args.seed}"
    )
    generate(data_root, SIZES[size_name], args.seed)

    result = {"size": size_name, "repeats": args.repeats, "baseline": BASELINE}
    result["machine"] = f"{os.cpu_count()} cores, {_mem_gb():.0f} GiB"
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        work = Path(tmp)
        result["load"] = bench_load(data_root, work, args.repeats)
        print(json.dumps({"load": result["load"]}), flush=True)
        result["models"], result["predict"] = {}, {}
        for model in args.models.split(","):
            m = bench_model(model, data_root, work, args.epochs, args.repeats)
            print(json.dumps({model: m}), flush=True)
            result["predict"][model] = bench_predict(
                m.pop("model_dir"), data_root, work, args.repeats
            )
            print(json.dumps({f"predict {model}": result["predict"][model]}), flush=True)
            result["models"][model] = m
    atomic_write_text(out / "bench.json", json.dumps(result, indent=1))
    table = markdown(result)
    atomic_write_text(out / "bench.md", table)
    print(table)
    return 0


def _mem_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


if __name__ == "__main__":
    run_cli(main)
