#!/usr/bin/env python3
"""Evaluates saved models, alone and as an ensemble, on every validation kernel.

    python tiles_evaluate.py --dirs out/model_<h1>,out/model_<h2>,out/model_<h3>

Prints top-1/5/10 error, Kaggle score and OPA per program for each model and,
with two or more, their ensemble (the mean of per-kernel standardized scores),
and writes the table as `<output>.md` and `.csv` with the figures
`<output>_per_program.png` and `<output>_pred_vs_true.png`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

prepare_tensorflow_import(tile_thread_pools())

from baselines.core.cli import entry_parser
from baselines.core.errors import run_cli
from baselines.core.rank_run import Request, add_groups_flag, add_run_flags, evaluate_run
from baselines.tiles.task import TileRanking
from baselines.tiles.tile_args import DEFAULT_DATA_ROOT


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    add_run_flags(
        parser,
        "--dirs",
        "model folders (<out_dir>/model_<hash>), comma-separated",
        f"folder holding the split (default: the first run's data root, then {DEFAULT_DATA_ROOT})",
        max_files=True,
    )
    parser.add_argument("--cache_dir", default=None, help="optional cache of the loaded split")
    parser.add_argument(
        "--split",
        default="valid",
        choices=("valid", "train", "test"),
        help="labelled split to evaluate",
    )
    parser.add_argument(
        "--output",
        default="evaluation",
        help="writes <output>.md, <output>.csv and the figures <output>_*.png; "
        "its folder is created if missing",
    )
    add_groups_flag(parser)
    return parser


def main() -> int:
    args = build_parser().parse_args()
    evaluate_run(TileRanking(), Request.of(args, "--dirs"), lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
