#!/usr/bin/env python3
"""Trains a layout cost model on one TpuGraphs layout collection and saves it with its run file.

    python layout_train.py --source=xla --search=default --epochs=2
    python layout_train.py --data_root=~/data/tpugraphs/npz/layout --source=nlp --max_configs=1000

Reads `<data_root>/<source>/<search>/{train,valid}` (duplicates dropped, at most
`--max_configs` per graph, pruned to `--prune_hops` hops around the configurable
nodes), trains with `baselines.layout.train_lib.train_layout` and writes
`model_<hash>/` (weights.npz and a copy of the run record), `run_<hash>.jsonz`
and `tb_<hash>/` (TensorBoard: the learning curve) into `--out_dir`. The
default data root is the bundled synthetic TOY set.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import

prepare_tensorflow_import()

from baselines.core.cli import add_field_flags, entry_parser
from baselines.core.errors import run_cli
from baselines.core.flagfile import expand_flagfiles
from baselines.core.io_utils import check_writable_dir
from baselines.layout.train_args import LayoutTrainArgs, resolve_layout_root, toy_banner


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(
        __doc__,
        epilog="--flagfile=FILE reads one --flag=value per line (absl's convention); "
        "flags after it override it.",
    )
    add_field_flags(parser, LayoutTrainArgs, default=lambda field: field.default)
    return parser


def parse_args(argv: list[str] | None = None) -> LayoutTrainArgs:
    argv = sys.argv[1:] if argv is None else argv
    argv = expand_flagfiles(argv, LayoutTrainArgs.flag_names())
    return LayoutTrainArgs(**vars(build_parser().parse_args(argv)))


def write_tensorboard(folder: Path, curve: dict[str, list]) -> None:
    """The learning curve as TensorBoard scalars (written after training, one step per epoch)."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(folder))
    with writer.as_default():
        for i, epoch in enumerate(curve.get("epoch", [])):
            for key, values in curve.items():
                if key != "epoch" and i < len(values) and values[i] is not None:
                    tf.summary.scalar(key, values[i], step=int(epoch))
    writer.close()


def main() -> int:
    args = parse_args()
    args.check_flags()  # before the slow TensorFlow import
    root, toy = resolve_layout_root(args.data_root)
    out = Path(args.out_dir).expanduser()
    check_writable_dir(out, "--out_dir")
    log = lambda line: print(line, flush=True)  # noqa: E731
    if toy:
        log(toy_banner(root))
    run_hash = args.run_hash()
    folder = args.collection_dir(root)
    log(f"layout:{args.source}:{args.search} from {folder}; run {run_hash}")

    from baselines.layout.run_data import load_run_split
    from baselines.layout.run_files import build_model, save_layout_run
    from baselines.layout.train_lib import train_layout

    reduce = dict(**args.split_kwargs(), log=log)
    train = load_run_split(folder / "train", training=True, **reduce)
    valid = load_run_split(folder / "valid", training=True, **reduce)
    model = build_model(args.model, args.model_kwargs())
    started = time.perf_counter()
    record = train_layout(
        train,
        valid,
        model,
        **args.train_kwargs(),
        progress=sys.stderr.isatty(),
    )
    val = record["val"]
    log(
        f"trained {record['model']} in {time.perf_counter() - started:.1f} s, best epoch "
        f"{record['best_epoch']}: validation Kendall tau {val['kendall_tau']:.4f}, "
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
    tb_dir = out / f"tb_{run_hash}"
    write_tensorboard(tb_dir, record["train_curve"])
    log(f"saved model: {model_dir}")
    log(f"saved run file: {run_path}")
    log(f"TensorBoard (learning curve): {tb_dir}")
    if toy:
        log(toy_banner(root))
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
