#!/usr/bin/env python3
"""Validation Kendall's tau of layout recipes (configs/layout/<name>.flags) on the toy set.

    .venv/bin/python bench/layout_toy.py --recipes baseline,recommended --seeds 0,1,2

A recipe is a flagfile of layout_train.py. For every collection and seed the
bench parses `--flagfile=configs/layout/<recipe>.flags --source=.. --search=..
--seed=..` (and `--epochs=N` when `--epochs` is given) with layout_train.py's
own parser into `LayoutTrainArgs`, loads the train and valid graphs with its
`split_kwargs()` (pruning, duplicates, max_configs) and trains them through
the conductor's `train_run` with those args: what layout_train.py trains with
that file. The score is the mean Kendall's tau over the collection's valid graphs
(held-out program families), ranking all their configurations; test graphs are
never read. The recipe's own --source/--search/--seed/--data_root are
overridden.

Per collection it prints each recipe's tau per seed and mean ± std (population
std over seeds), then, for the last recipe against the first, the verdict:
"beats" when mean(last) - mean(first) > std(first) + std(last) (the difference
of means exceeds the sum of the two spreads), "loses" when the same holds the
other way round, otherwise "within spread".

The bundled set is synthetic and has 3 valid graphs per collection: the figures
compare recipes on this toy world only.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

COLLECTIONS = "xla:default,xla:random,nlp:default,nlp:random"


def verdict(first: list[float], last: list[float]) -> str:
    """The module docstring's rule on two recipes' per-seed taus."""
    import numpy as np

    gap = float(np.mean(last) - np.mean(first))
    spread = float(np.std(first) + np.std(last))
    if gap > spread:
        return f"beats (+{gap:.3f} > {spread:.3f})"
    if -gap > spread:
        return f"loses ({gap:.3f}, spread {spread:.3f})"
    return f"within spread ({gap:+.3f} vs {spread:.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipes", default="baseline,recommended")
    parser.add_argument("--collections", default=COLLECTIONS)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--epochs", type=int, default=None, help="override every recipe's")
    parser.add_argument("--data_root", default="data/layout_toy")
    args = parser.parse_args()

    import numpy as np

    import layout_train
    from baselines.core.conductor import train_run
    from baselines.core.data_roots import training_root
    from baselines.layout.layout_args import LAYOUT_PLACE
    from baselines.layout.run_data import load_run_split
    from baselines.layout.task import LayoutTask

    recipes = args.recipes.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    root, _, _ = training_root(LAYOUT_PLACE, args.data_root, log=lambda _: None)
    print("| collection | recipe | val tau per seed | mean ± std | train s (mean) |")
    print("|---|---|---|---|---|")
    verdicts = []
    for collection in args.collections.split(","):
        source, search = collection.split(":")
        taus: dict[str, list[float]] = {}
        for recipe in recipes:
            taus[recipe], walls = [], []
            for seed in seeds:
                argv = [
                    f"--flagfile={ROOT / 'configs' / 'layout' / f'{recipe}.flags'}",
                    f"--source={source}",
                    f"--search={search}",
                    f"--seed={seed}",
                    f"--data_root={args.data_root}",
                ]
                if args.epochs is not None:
                    argv.append(f"--epochs={args.epochs}")
                run = layout_train.parse_args(argv)
                run.check_flags()
                folder = run.collection_dir(root)
                split = dict(**run.split_kwargs(), log=None)
                train = load_run_split(folder / "train", training=True, **split)
                valid = load_run_split(folder / "valid", training=True, **split)
                started = time.perf_counter()
                with tempfile.TemporaryDirectory() as out:  # the run's files, not kept
                    record = train_run(
                        LayoutTask(graphs=(train, valid)),
                        dataclasses.replace(run, out_dir=out),
                        progress=False,
                        log=lambda _: None,
                    )
                walls.append(time.perf_counter() - started)
                taus[recipe].append(record["val"]["kendall_tau"])
            cells = ", ".join(f"{t:.3f}" for t in taus[recipe])
            print(
                f"| {collection} | {recipe} | {cells} | {np.mean(taus[recipe]):.3f} ± "
                f"{np.std(taus[recipe]):.3f} | {np.mean(walls):.0f} |",
                flush=True,
            )
        if len(recipes) > 1:
            verdicts.append((collection, verdict(taus[recipes[0]], taus[recipes[-1]])))
    for collection, text in verdicts:
        print(f"{collection}: {recipes[-1]} vs {recipes[0]}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
