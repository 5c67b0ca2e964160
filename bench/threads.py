#!/usr/bin/env python3
"""TensorFlow's thread pools: its own choice against the project's setting, paired.

    .venv/bin/python bench/threads.py --data_root /work/rel/data --cache_dir /work/rel/cache \\
        --layout_root /work/lq1x/sets/standard-2e379689 --layout_cache /work/lq1x/cache

On a machine of 2 cores or fewer the tile scripts give TensorFlow one thread
inside each op and two ops at a time (`baselines/core/startup.tile_thread_pools`).
This measures what that buys against TensorFlow's own choice (both variables
0), the two settings alternating within each of `--rounds` rounds (their order
reversed every other round; all tile rounds, then all layout rounds), each
step a fresh process on warm caches:

- tile (`--data_root`, a release-sized set): a 3-epoch training of the
  recommended recipe (`bench/scale.py`'s training child; the steady epoch is
  the median of the later epochs' training steps) and the prediction of the
  test split with its model (`tiles_gen_predictions_csv.py`: wall time, and
  the ranking time it prints). Both settings' validation errors are reported:
  they are expected to agree;
- layout (`--layout_root`, a set of `bench/layout_quality.py --preset`): a
  3-epoch training of the recommended layout recipe on xla:default
  (`layout_train.py`; the median of the later epochs' training steps).

Writes `<out>/threads.{json,md}`: every round's figures, the medians and the
ratio of the project's setting to TensorFlow's.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import tile_profile  # a run record's epoch figures
from bench_common import code_version

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.io_utils import atomic_write_text
from baselines.core.startup import THREAD_POOL_VARIABLES, available_cores, tile_thread_pools

TRAIN_EPOCHS = 3


def settings(cores: int) -> dict[str, dict[str, str]]:
    """The environment of each setting: TensorFlow's own choice (0) and the project's."""
    return {
        "tensorflow": dict.fromkeys(THREAD_POOL_VARIABLES, "0"),
        "project": tile_thread_pools(cores),
    }


def _env(variables: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_POOL_VARIABLES}
    return dict(env, TF_CPP_MIN_LOG_LEVEL="3", **variables)


def _run(cmd: list[str], variables: dict[str, str]) -> tuple[float, str, str]:
    """(wall seconds, stdout, stderr) of `cmd` run under the setting's `variables`."""
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=_env(variables), capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["failed"]
        raise PipelineError(f"{Path(cmd[1]).name} failed: {tail[0]}")
    return wall, proc.stdout, proc.stderr


def tile_round(args, variables: dict[str, str], out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    spec = {
        "recipe": str(ROOT / "configs" / "recommended.flags"),
        "data_root": args.data_root,
        "cache_dir": args.cache_dir,
        "out_dir": str(out),
        "epochs": TRAIN_EPOCHS,
    }
    child = [sys.executable, str(ROOT / "bench" / "scale.py"), "--_train", json.dumps(spec)]
    timings = json.loads(_run(child, variables)[1].strip().splitlines()[-1])
    csv = out / "test.csv"
    wall, stdout, stderr = _run(
        [
            sys.executable,
            str(ROOT / "tiles_gen_predictions_csv.py"),
            "--dir",
            timings["model_dir"],
            "--output",
            str(csv),
        ],
        variables,
    )
    ranked = re.search(r"ranked \d+ kernels, \d+ configs in ([0-9.]+) s", stdout + stderr)
    return {
        "steady_epoch_s": tile_profile.epoch_figures(timings)["steady_epoch_s"],
        "val_top5_err": timings["val_top5_err"],
        "predict_wall_s": wall,
        "ranking_s": float(ranked[1]) if ranked else None,
    }


def layout_round(args, variables: dict[str, str], out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        sys.executable,
        str(ROOT / "layout_train.py"),
        f"--flagfile={ROOT / 'configs' / 'layout' / 'recommended.flags'}",
        "--source=xla",
        "--search=default",
        f"--epochs={TRAIN_EPOCHS}",
        f"--early_stop={TRAIN_EPOCHS}",
        "--seed=0",
        f"--data_root={args.layout_root}",
        f"--cache_dir={args.layout_cache}",
        f"--out_dir={out}",
    ]
    _run(cmd, variables)
    record = json.loads(gzip.open(next(out.glob("run_*.jsonz"))).read())
    epochs = tile_profile.epoch_figures(record["timings"])
    return {"layout_steady_epoch_s": epochs["steady_epoch_s"]}


PARTS = (("tile", tile_round, "data_root"), ("layout", layout_round, "layout_root"))


def _read_through(folder: Path) -> None:
    """Reads every file under `folder` once, so that it sits in the page cache."""
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass


def summarize(rounds: list[dict]) -> dict:
    """Per figure and setting, the median over rounds; per figure the ratio project / tensorflow."""
    figures = sorted({k for r in rounds for s in r.values() for k in s})
    out = {}
    for figure in figures:
        medians = {
            name: statistics.median(
                r[name][figure] for r in rounds if r[name].get(figure) is not None
            )
            for name in ("tensorflow", "project")
        }
        out[figure] = dict(medians, ratio=medians["project"] / medians["tensorflow"])
    return out


def markdown(result: dict) -> str:
    lines = [
        f"Thread pools, paired ({result['cores']} cores; project setting "
        f"{result['settings']['project'] or 'none: TensorFlow decides'}; "
        f"{len(result['rounds'])} rounds; commit {result['commit']}).",
        "",
        "| figure | TensorFlow's choice (per round) | project's setting (per round) | "
        "median: TensorFlow / project | ratio |",
        "|---|---|---|---|---|",
    ]
    for figure, s in result["summary"].items():
        per = {
            name: " / ".join(
                f"{r[name][figure]:.4g}"
                for r in result["rounds"]
                if r[name].get(figure) is not None
            )
            for name in ("tensorflow", "project")
        }
        lines.append(
            f"| {figure} | {per['tensorflow']} | {per['project']} | "
            f"{s['tensorflow']:.4g} / {s['project']:.4g} | {s['ratio']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def build_parser():
    parser = entry_parser(__doc__)
    parser.add_argument("--data_root", help="a release-sized tile set (tile figures)")
    parser.add_argument("--cache_dir", help="its warm cache folder")
    parser.add_argument("--layout_root", help="a release-sized layout set (layout figure)")
    parser.add_argument("--layout_cache", help="its warm cache folder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "threads")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    if not args.data_root and not args.layout_root:
        raise PipelineError("nothing to measure: give --data_root and/or --layout_root")
    if args.rounds < 1:
        raise PipelineError(f"--rounds: must be at least 1, got {args.rounds}")
    cores = available_cores()
    envs = settings(cores)
    args.out.mkdir(parents=True, exist_ok=True)
    # All tile rounds, then all layout rounds (each part's files stay in the page cache for its
    # rounds), the settings' order reversed every other round so neither always runs first.
    parts = [(label, fn) for label, fn, root in PARTS if getattr(args, root)]
    rounds = [{name: {} for name in envs} for _ in range(args.rounds)]
    if args.data_root and args.cache_dir:
        _read_through(Path(args.cache_dir))  # the first tile run starts from the page cache too
    for label, measure in parts:
        for r in range(args.rounds):
            order = list(envs) if r % 2 == 0 else list(envs)[::-1]
            for name in order:
                figures = measure(args, envs[name], args.out / f"{label}_{name}_{r}")
                rounds[r][name] |= figures
                print(f"{label} round {r + 1} {name}: {json.dumps(figures)}", flush=True)
    result = {
        "cores": cores,
        "settings": envs,
        "commit": code_version(),
        "rounds": rounds,
        "summary": summarize(rounds),
    }
    atomic_write_text(args.out / "threads.json", json.dumps(result, indent=1))
    atomic_write_text(args.out / "threads.md", markdown(result))
    print(markdown(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
