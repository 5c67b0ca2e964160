#!/usr/bin/env python3
"""Scoring time of an untrained baseline ResModel: the whole graph per call against the reach.

    .venv/bin/python bench/layout_reach.py --configs 4096 \\
        <data>/nlp/default/valid <data>/nlp/random/valid

Per folder's first graph, loaded as `score_runs` loads it: `GraphScorer(model, reach=False)`
(old) and `GraphScorer(model)` (new, `baselines.layout.reach`) score the first `--configs`
configurations (0: all), alternating within each of `--rounds` rounds, TensorFlow on one
thread (a job step's core). Prints N, |N_L|, |S|, each round's seconds, the medians, their
ratio and the largest absolute and relative score difference between the paths.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from baselines.layout.batching import prepare_graphs  # noqa: E402
from baselines.layout.models import ResModel  # noqa: E402
from baselines.layout.reach import find_reach  # noqa: E402
from baselines.layout.run_data import load_run_split  # noqa: E402
from baselines.layout.scoring import GraphScorer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--configs", type=int, default=4096, help="first configurations; 0: all")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(0)
    model = ResModel().create_variables()  # configs/layout/baseline.flags: model defaults
    scorers = {"old": GraphScorer(model, reach=False), "new": GraphScorer(model)}
    for folder in args.folders:
        (raw,) = load_run_split(folder, training=False, prune_hops=None, max_files=1, log=None)
        count = args.configs or raw.num_configs
        (graph,) = prepare_graphs([raw.select_configs(np.arange(min(count, raw.num_configs)))])
        (warm,) = prepare_graphs([raw.select_configs(np.arange(8))])
        reach = find_reach(graph, len(model.convs))
        print(
            f"{folder}: N {raw.num_nodes}, |N_0| {reach.counts[0]}, |N_L| {reach.counts[-2]}, "
            f"|S| {reach.rows.size}, configurations {graph.num_configs} of {raw.num_configs}"
        )
        seconds: dict[str, list[float]] = {name: [] for name in scorers}
        scores = {}
        for scorer in scorers.values():
            scorer.score(warm)  # traced before timing
        for _ in range(args.rounds):
            for name, scorer in scorers.items():
                start = time.perf_counter()
                scores[name] = scorer.score(graph)
                seconds[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(s) for name, s in seconds.items()}
        for name, s in seconds.items():
            print(f"  {name}: {' '.join(f'{x:.2f}' for x in s)} s, median {medians[name]:.2f} s")
        diff = np.abs(scores["new"] - scores["old"])
        print(
            f"  old / new {medians['old'] / medians['new']:.2f}; max |diff| {diff.max():.3g}, "
            f"max |diff| / |old| {(diff / np.maximum(np.abs(scores['old']), 1e-30)).max():.3g}, "
            f"score range {np.ptp(scores['old']):.3g}"
        )


if __name__ == "__main__":
    main()
