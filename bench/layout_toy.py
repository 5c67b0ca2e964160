#!/usr/bin/env python3
"""Validation Kendall's tau of the layout models on the bundled toy set, over seeds.

    .venv/bin/python bench/layout_toy.py --collections xla:default,xla:random --seeds 0,1,2

Each model trains on one collection's train graphs of `data/layout_toy` and is
scored on its valid graphs (held-out program families): mean Kendall's tau over
the valid graphs, per seed, beside the mean tau of random scores. A smoke-level
quality check of the layout training core (3 valid graphs per collection), not a
quality claim.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collections", default="xla:default,xla:random,nlp:default,nlp:random")
    parser.add_argument("--models", default="ResModel,LayoutSAGE")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()

    import numpy as np

    from baselines.layout import kendall_tau, load_layout_split, models
    from baselines.layout.train_lib import train_layout

    seeds = [int(s) for s in args.seeds.split(",")]
    print("| collection | model | val tau per seed | mean ± std | train s (mean) |")
    print("|---|---|---|---|---|")
    for collection in args.collections.split(","):
        source, search = collection.split(":")
        root = ROOT / "data" / "layout_toy" / source / search
        train = load_layout_split(root / "train", log=None)
        valid = load_layout_split(root / "valid", log=None)
        rng = np.random.default_rng(0)
        random_tau = np.mean(
            [
                kendall_tau(rng.random(g.num_configs), g.config_runtime)
                for g in valid
                for _ in range(20)
            ]
        )
        for name in args.models.split(","):
            taus, walls = [], []
            for seed in seeds:
                model = getattr(models, name)(16)
                started = time.perf_counter()
                record = train_layout(
                    train,
                    valid,
                    model,
                    epochs=args.epochs,
                    configs=16,
                    batch=4,
                    lr=3e-3,
                    clip_norm=1.0,
                    seed=seed,
                    progress=False,
                )
                walls.append(time.perf_counter() - started)
                taus.append(record["val"]["kendall_tau"])
            cells = ", ".join(f"{t:.3f}" for t in taus)
            print(
                f"| {collection} | {name} | {cells} | {np.mean(taus):.3f} ± {np.std(taus):.3f} "
                f"| {np.mean(walls):.0f} |",
                flush=True,
            )
        print(f"| {collection} | random scores | | {random_tau:.3f} | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
