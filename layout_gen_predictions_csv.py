#!/usr/bin/env python3
"""Ranks every configuration of every test graph of a layout run and writes `ID,TopConfigs`.

    python layout_gen_predictions_csv.py --dir ~/out/tpugraphs_layout/model_<hash>

Rebuilds the run's model, reads `<data_root>/<source>/<search>/test` (pruned as
in training, every configuration kept; cached in `--cache_dir` when given) and
writes one row per test file, `layout:<source>:<search>:<file stem>`, listing
every configuration index fastest (lowest score) first, ties in file order.
`--dir a,b` ranks with an ensemble: the mean of each model's per-graph
standardized scores (all of one source and search).
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
from baselines.core.rank_run import Request, add_run_flags, rank_run
from baselines.layout.cache import CACHE_DIR_HELP
from baselines.layout.task import LayoutRanking


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    add_run_flags(
        parser,
        "--dir",
        "<out_dir>/model_<hash> from layout_train.py, or several separated by commas (an ensemble)",
        "layout data root (default: the first run's)",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=("test", "valid"),
        help="split to rank; valid (labelled) also prints Kendall tau",
    )
    parser.add_argument("--cache_dir", default=None, help=CACHE_DIR_HELP)
    parser.add_argument(
        "--output",
        default=None,
        help="CSV to write (default: <first dir's parent>/"
        "layout_<source>_<search>_predictions.csv)",
    )
    return parser


def main() -> int:
    args = build_parser().parse_args()
    rank_run(LayoutRanking(), Request.of(args, "--dir"), lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
