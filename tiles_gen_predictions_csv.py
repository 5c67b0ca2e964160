#!/usr/bin/env python3
"""Ranks every kernel of a split with a trained model and writes `ID,TopConfigs`.

    python tiles_gen_predictions_csv.py --dir ~/out/tpugraphs_tiles/model_<hash>

Rebuilds the run's model, normalizes features with the statistics saved in the
run (train and valid are never loaded to predict test) and writes the five
predicted-fastest configurations of every kernel. `--split valid` also prints
top-1/5/10 errors and the Kaggle score. `--dir a,b,c` ranks with an ensemble:
the mean of each model's per-kernel standardized scores.
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
from baselines.core.rank_run import Request, add_run_flags, rank_run
from baselines.tiles.task import TileRanking
from baselines.tiles.tile_args import DEFAULT_DATA_ROOT


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    add_run_flags(
        parser,
        "--dir",
        "<out_dir>/model_<hash> from tiles_train.py, or several separated by commas: "
        "an ensemble (mean of per-kernel standardized scores)",
        "folder holding the split (default: the first run's data root, then "
        f"{DEFAULT_DATA_ROOT}, then the bundled toy set)",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=("test", "valid", "train"),
        help="split to rank; valid (labelled) also prints top-K errors per program",
    )
    parser.add_argument(
        "--output",
        default="predictions_output_model.csv",
        help="CSV to write (ID,TopConfigs); its folder is created if missing",
    )
    parser.add_argument("--cache_dir", default=None, help="optional cache of the loaded split")
    parser.add_argument("--top", type=int, default=5, help="configurations listed per kernel")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    rank_run(TileRanking(), Request.of(args, "--dir"), lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
