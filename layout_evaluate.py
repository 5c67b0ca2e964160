#!/usr/bin/env python3
"""Evaluates saved layout models, alone and as an ensemble, on every graph of a labelled split.

    python layout_evaluate.py --dirs out/layout/model_<h1>,out/layout/model_<h2>

Scores every configuration of `<data_root>/<source>/<search>/<split>` (pruned as
the runs were) with each model and, with two or more, their ensemble (the mean of
per-graph z-scores). Reports Kendall's tau and slowdown@1/10/100 per graph, per
program and overall, on all configurations and on fixed subsets of
`--subset_size` per graph. Writes `<output>.md`, `.csv`, `_subsets.json` and the
figures `<output>_tau_per_graph.png` and `<output>_pred_vs_true.png`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import

prepare_tensorflow_import()

from baselines.core.cli import entry_parser
from baselines.core.errors import run_cli
from baselines.core.rank_run import Request, add_groups_flag, add_run_flags, evaluate_run
from baselines.layout.cache import CACHE_DIR_HELP
from baselines.layout.task import LayoutRanking


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    add_run_flags(
        parser,
        "--dirs",
        "layout model folders (<out_dir>/model_<hash>), comma-separated, one collection",
        "layout data root (default: the first run's)",
        max_files=True,
    )
    parser.add_argument(
        "--split", default="valid", choices=("valid", "train"), help="labelled split to evaluate"
    )
    parser.add_argument("--cache_dir", default=None, help=CACHE_DIR_HELP)
    parser.add_argument(
        "--subset_size",
        type=int,
        default=1000,
        help="configurations per graph in the fixed subsets (all of a graph with fewer)",
    )
    parser.add_argument(
        "--subset_seed", type=int, default=0, help="seed of the subsets' draw (with the graph id)"
    )
    parser.add_argument(
        "--subsets",
        default=None,
        help="reuse the subsets recorded in this <output>_subsets.json instead of drawing them",
    )
    parser.add_argument(
        "--output",
        default="layout_evaluation",
        help="writes <output>.md, <output>.csv, <output>_subsets.json and <output>_*.png; "
        "its folder is created if missing",
    )
    add_groups_flag(parser)
    return parser


def main() -> int:
    args = build_parser().parse_args()
    evaluate_run(LayoutRanking(), Request.of(args, "--dirs"), lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
