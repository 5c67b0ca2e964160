#!/usr/bin/env python3
"""Trains a layout cost model on one TpuGraphs layout collection and saves it with its run file.

    python layout_train.py --source=xla --search=default --epochs=2
    python layout_train.py --data_root=~/data/tpugraphs/npz/layout --source=nlp --max_configs=1000

Reads `<data_root>/<source>/<search>/{train,valid}` (duplicates dropped, at most
`--max_configs` per graph, pruned to `--prune_hops` hops around the configurable
nodes; cached in `--cache_dir` when given) and writes `model_<hash>/`,
`run_<hash>.jsonz` and `tb_<hash>/` (TensorBoard) into `--out_dir`, then, as
upstream's script, every test graph's configurations ranked by the saved model
into `--results_csv` (default `<out_dir>/results_<ms>_<source>_<search>.csv`).
While training, `backup_<hash>/` holds the last finished epoch: the same command
started again after a crash resumes there. The default data root is the bundled
synthetic TOY set.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import

prepare_tensorflow_import()

from baselines.core.cli import parse_training_command, training_parser
from baselines.core.distribution import check_strategy_environment, make_strategy
from baselines.core.errors import run_cli
from baselines.layout.layout_args import LayoutTrainArgs, check_run


def build_parser() -> argparse.ArgumentParser:
    return training_parser(__doc__, LayoutTrainArgs)


def parse_command(
    argv: list[str] | None = None, log: Callable[[str], None] = lambda _: None
) -> tuple[LayoutTrainArgs, str]:
    """The args and --strategy (`--flagfile=FILE` expanded; an old spelling said to `log`)."""
    return parse_training_command(build_parser(), LayoutTrainArgs, argv, log)


def parse_args(argv: list[str] | None = None) -> LayoutTrainArgs:
    return parse_command(argv)[0]


def main() -> int:
    log = lambda line: print(line, flush=True)  # noqa: E731
    args, strategy_name = parse_command(log=log)
    # Flags, the data root and the output folder first: importing TensorFlow takes seconds.
    check_run(args)
    check_strategy_environment(strategy_name, os.environ.get("TF_CONFIG"))
    from baselines.layout.task import rank_test_split, train

    strategy = make_strategy(strategy_name)  # before any other TensorFlow op
    record = train(args, strategy=strategy, progress=sys.stderr.isatty(), log=log)
    if record.get("chief", True):  # the chief saved the run: it ranks the test split
        rank_test_split(args, record, log)
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
