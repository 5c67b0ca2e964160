#!/usr/bin/env python3
"""Trains a tile cost model on TpuGraphs tile:xla and saves it with its run file.

    python tiles_train.py --model=EarlyJoinSAGE --max_files=100
    python tiles_train.py --flagfile=configs/recommended.flags --epochs=5

Writes `model_<hash>/`, `run_<hash>.jsonz`, `tb_<hash>/` (TensorBoard) and, with
`--test_mode=predictions`, `results_<ms timestamp>.csv` into `--out_dir`. While
training, `backup_<hash>/` holds the last finished epoch: the same command
started again after a crash resumes there.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

prepare_tensorflow_import(tile_thread_pools())

from baselines.core.cli import parse_training_command, training_parser
from baselines.core.data_roots import training_root
from baselines.core.distribution import check_strategy_environment, make_strategy
from baselines.core.errors import run_cli
from baselines.tiles.tile_args import TILE_PLACE, TrainArgs


def build_parser() -> argparse.ArgumentParser:
    return training_parser(__doc__, TrainArgs)


def parse_command(
    argv: list[str] | None = None, log: Callable[[str], None] = lambda _: None
) -> tuple[TrainArgs, str]:
    """TrainArgs and --strategy (`--flagfile=FILE` expanded; an old spelling said to `log`)."""
    return parse_training_command(build_parser(), TrainArgs, argv, log)


def parse_args(argv: list[str] | None = None) -> TrainArgs:
    return parse_command(argv)[0]


def main() -> int:
    args, strategy_name = parse_command(log=lambda line: print(line, flush=True))
    # Flags first: importing TensorFlow takes seconds.
    args.check_flags()
    # A mistyped --data_root too (the toy-set banner is printed by train()).
    training_root(TILE_PLACE, args.data_root, log=lambda _: None)
    check_strategy_environment(strategy_name, os.environ.get("TF_CONFIG"))
    from baselines.tiles.task import train  # validates args before loading data

    strategy = make_strategy(strategy_name)  # before any other TensorFlow op
    train(args, log=lambda line: print(line, flush=True), strategy=strategy)
    return 0


if __name__ == "__main__":
    run_cli(main)
