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

from baselines.core.args_record import old_spelling_notes
from baselines.core.cli import add_field_flags, entry_parser, field_help
from baselines.core.data_roots import training_root
from baselines.core.distribution import add_strategy_flag, check_strategy_environment
from baselines.core.errors import run_cli
from baselines.core.flagfile import expand_flagfiles
from baselines.tiles.tile_args import TILE_PLACE, TrainArgs


def build_parser() -> argparse.ArgumentParser:
    """One flag per TrainArgs field, with the field's default."""
    parser = entry_parser(
        __doc__,
        epilog="--flagfile=FILE reads one --flag=value per line (absl's convention); "
        "flags after it override it.",
    )
    add_field_flags(parser, TrainArgs, default=lambda field: field.default, help=field_help)
    # Not a TrainArgs field: the same recipe on 1 or N devices is the same run (hash).
    add_strategy_flag(parser)
    return parser


def parse_command(
    argv: list[str] | None = None, log: Callable[[str], None] = lambda _: None
) -> tuple[TrainArgs, str]:
    """Flags (with `--flagfile=FILE` expanded in place; later flags win): TrainArgs, strategy;
    what an old spelling does is said through `log`."""
    argv = sys.argv[1:] if argv is None else argv
    argv = expand_flagfiles(argv, TrainArgs.flag_names() | {"strategy"})
    flags = vars(build_parser().parse_args(argv))
    strategy = flags.pop("strategy")
    for note in old_spelling_notes(flags):
        log(note)
    return TrainArgs(**flags), strategy


def parse_args(argv: list[str] | None = None) -> TrainArgs:
    return parse_command(argv)[0]


def main() -> int:
    args, strategy_name = parse_command(log=lambda line: print(line, flush=True))
    # Flags first: importing TensorFlow takes seconds.
    args.check_flags()
    # A mistyped --data_root too (the toy-set banner is printed by train()).
    training_root(TILE_PLACE, args.data_root, log=lambda _: None)
    check_strategy_environment(strategy_name, os.environ.get("TF_CONFIG"))
    from baselines.core.distribution import make_strategy
    from baselines.tiles.task import train  # validates args before loading data

    strategy = make_strategy(strategy_name)  # before any other TensorFlow op
    train(args, log=lambda line: print(line, flush=True), strategy=strategy)
    return 0


if __name__ == "__main__":
    run_cli(main)
