#!/usr/bin/env python3
"""Trains every model on the bundled toy set and prints the README's toy-data table.

    python bench/toy_models.py [--epochs 40] [--early_stop 10] [--out out/toy_models]

Validation errors are measured on the toy valid split, which no model trains on.
Writes <out>/toy_models.json and <out>/toy_models.md.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

prepare_tensorflow_import(tile_thread_pools())

from baselines.core.cli import entry_parser
from baselines.core.errors import run_cli
from baselines.core.io_utils import atomic_write_text
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT, TrainArgs


def main() -> int:
    parser = entry_parser(__doc__)
    parser.add_argument("--epochs", type=int, default=40, help="maximum training epochs")
    parser.add_argument("--early_stop", type=int, default=10, help="tiles_train.py's --early_stop")
    parser.add_argument("--seed", type=int, default=0, help="training seed")
    parser.add_argument("--models", default="", help="models of models.py to train (all)")
    parser.add_argument("--out", default=str(ROOT / "out" / "toy_models"), help="results")
    flags = parser.parse_args()
    from baselines.tiles.model_builder import model_classes
    from baselines.tiles.task import train

    out = Path(flags.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in flags.models.split(",") if flags.models else model_classes():
        args = TrainArgs(
            model=name,
            epochs=flags.epochs,
            early_stop=flags.early_stop,
            max_files=100,  # upstream's --toy_data=True
            data_root=str(BUNDLED_TOY_ROOT),
            out_dir=str(out / "runs"),
            cache_dir=str(out / "cache"),
            seed=flags.seed,
        )
        started = time.perf_counter()
        record = train(args, progress=False, log=lambda _: None)
        wall = time.perf_counter() - started
        err = record["final_error"]["val"]
        rows.append(
            {
                "model": name,
                "top1": err["1"],
                "top5": err["5"],
                "top10": err["10"],
                "val_opa": record["val_summary"]["opa"],
                "epochs": len(record["train_curve"]["epoch"]),
                "train_s": record["timings"]["train_s"],
                "wall_s": wall,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    table = [
        "| model | val top-1 err | val top-5 err | val top-10 err | val OPA | epochs | train s |",
        "|---|---|---|---|---|---|---|",
    ]
    table += [
        f"| {r['model']} | {r['top1']:.3f} | {r['top5']:.3f} | {r['top10']:.3f} | "
        f"{r['val_opa']:.3f} | {r['epochs']} | {r['train_s']:.0f} |"
        for r in rows
    ]
    atomic_write_text(out / "toy_models.json", json.dumps(rows, indent=1))
    atomic_write_text(out / "toy_models.md", "\n".join(table) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    run_cli(main)
