#!/usr/bin/env python3
"""Trains a layout cost model on one TpuGraphs layout collection and saves it with its run file.

    python layout_train.py --source=xla --search=default --epochs=2
    python layout_train.py --data_root=~/data/tpugraphs/npz/layout --source=nlp --max_configs=1000

Reads `<data_root>/<source>/<search>/{train,valid}` (duplicates dropped, at most
`--max_configs` per graph, pruned to `--prune_hops` hops around the configurable
nodes; through a memory-mapped cache in `--cache_dir` when given), trains with
`baselines.layout.train_lib.train_layout` and writes
`model_<hash>/` (weights.npz and a copy of the run record), `run_<hash>.jsonz`
and `tb_<hash>/` (TensorBoard, written after every epoch: learning rate,
losses, OPA, validation Kendall tau) into `--out_dir`. While training,
`backup_<hash>/` holds the last finished epoch: the same command started again
after a crash resumes there. `--strategy` as for tiles_train.py. The default
data root is the bundled synthetic TOY set.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import

prepare_tensorflow_import()

from baselines.core.cli import add_field_flags, entry_parser
from baselines.core.distribution import add_strategy_flag, check_strategy_environment
from baselines.core.errors import run_cli
from baselines.core.flagfile import expand_flagfiles
from baselines.core.io_utils import check_writable_dir, remove_stale_temporaries
from baselines.layout.cache import prepare_cache_dir
from baselines.layout.train_args import LayoutTrainArgs, resolve_layout_root, toy_banner


def build_parser() -> argparse.ArgumentParser:
    """One flag per LayoutTrainArgs field, with the field's default, and --strategy."""
    parser = entry_parser(
        __doc__,
        epilog="--flagfile=FILE reads one --flag=value per line (absl's convention); "
        "flags after it override it.",
    )
    add_field_flags(parser, LayoutTrainArgs, default=lambda field: field.default)
    # Not a LayoutTrainArgs field: the same recipe on 1 or N devices is the same run (hash).
    add_strategy_flag(parser)
    return parser


def parse_command(argv: list[str] | None = None) -> tuple[LayoutTrainArgs, str]:
    """Flags (with `--flagfile=FILE` expanded in place; later flags win): args, strategy."""
    argv = sys.argv[1:] if argv is None else argv
    argv = expand_flagfiles(argv, LayoutTrainArgs.flag_names() | {"strategy"})
    flags = vars(build_parser().parse_args(argv))
    strategy = flags.pop("strategy")
    return LayoutTrainArgs(**flags), strategy


def parse_args(argv: list[str] | None = None) -> LayoutTrainArgs:
    """The LayoutTrainArgs of a command line (see `parse_command`)."""
    return parse_command(argv)[0]


def main() -> int:
    args, strategy_name = parse_command()
    log = lambda line: print(line, flush=True)  # noqa: E731
    train_run(args, strategy_name=strategy_name, progress=sys.stderr.isatty(), log=log)
    return 0


def train_run(
    args: LayoutTrainArgs,
    *,
    strategy_name: str = "default",
    progress: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains and saves one layout run as this script does; returns its run record.

        record = train_run(LayoutTrainArgs(epochs=2, out_dir="out/layout"))
        record["run_hash"], record["val"]["kendall_tau"]

    Writes `model_<hash>/`, `run_<hash>.jsonz` and `tb_<hash>/` into
    `args.out_dir`; a bad flag is a PipelineError (one line) before TensorFlow
    works. `layout_beam_experiments.py` trains each run of a sweep with it. A
    worker that is not the chief of a `multi_worker` cluster saves nothing and
    returns an empty record.
    """
    args.check_flags()  # before the slow TensorFlow import
    check_strategy_environment(strategy_name, os.environ.get("TF_CONFIG"))
    root, toy = resolve_layout_root(args.data_root)
    out = Path(args.out_dir).expanduser()
    check_writable_dir(out, "--out_dir")
    prepare_cache_dir(args.cache_dir, log)
    if toy:
        log(toy_banner(root))
    run_hash = args.run_hash()
    folder = args.collection_dir(root)
    log(f"layout:{args.source}:{args.search} from {folder}; run {run_hash}")

    from baselines.core.distribution import is_chief, make_strategy
    from baselines.layout.run_data import load_run_split, max_configs_note
    from baselines.layout.run_files import build_model, save_layout_run
    from baselines.layout.train_lib import train_layout

    strategy = make_strategy(strategy_name)  # before any other TensorFlow op
    chief = is_chief(strategy)
    if chief:
        remove_stale_temporaries(out, log)
    reduce = dict(**args.split_kwargs(), log=log)
    train = load_run_split(folder / "train", training=True, **reduce)
    valid = load_run_split(folder / "valid", training=True, **reduce)
    note = max_configs_note(args.max_configs, [*train, *valid], distinct=args.drop_duplicates)
    if note:
        log(note)  # the flag stays in the run hash and run file as given
    model = build_model(args.model, args.model_kwargs())
    backup_dir, tb_dir = out / f"backup_{run_hash}", out / f"tb_{run_hash}"
    started = time.perf_counter()
    record = train_layout(
        train,
        valid,
        model,
        **args.train_kwargs(),
        progress=progress,
        strategy=strategy,
        backup_dir=backup_dir,
        tb_dir=tb_dir,
        log=log,
    )
    if not chief:
        log(f"trained {record['model']} as a worker; the chief evaluates and saves the run")
        return {}
    val = record["val"]
    averaged = record["averaged_epochs"]
    ended_on = (
        f"the mean of the weights of its last {averaged} epochs"
        if averaged
        else f"best epoch {record['best_epoch']}"
    )
    log(
        f"trained {record['model']} in {time.perf_counter() - started:.1f} s, {ended_on}: "
        f"validation Kendall tau {val['kendall_tau']:.4f}, "
        f"OPA {val['opa']:.4f} over {val['graphs']} graphs"
    )
    run = {
        "args": args.to_dict(),
        "run_hash": run_hash,
        "toy_data": toy,
        "data_root": str(root),
        "source": args.source,
        "search": args.search,
        "model": record["model"],
        "model_kwargs": record["model_kwargs"],
        "train": {k: v for k, v in record.items() if k not in ("model", "model_kwargs")},
        "val": val,
        "train_curve": record["train_curve"],
    }
    model_dir, run_path = out / f"model_{run_hash}", out / f"run_{run_hash}.jsonz"
    out.mkdir(parents=True, exist_ok=True)
    save_layout_run(model, run, model_dir, run_path)
    shutil.rmtree(backup_dir, ignore_errors=True)  # finished: a rerun starts afresh
    log(f"saved model: {model_dir}")
    log(f"saved run file: {run_path}")
    log(f"TensorBoard: {tb_dir}")
    if toy:
        log(toy_banner(root))
    return run


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
