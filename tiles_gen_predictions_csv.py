#!/usr/bin/env python3
"""Ranks every kernel of a split with a trained model and writes `ID,TopConfigs`.

    python tiles_gen_predictions_csv.py --dir ~/out/tpugraphs_tiles/model_<hash>

Rebuilds the model class named in `run_<hash>.jsonz` beside the model folder,
copies the saved weights in, normalizes features with the statistics saved in
the run (train and valid are never loaded to predict test) and writes the five
predicted-fastest configurations of every kernel. `--split valid` also prints
top-1/5/10 errors and the Kaggle score, overall and per program.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.tiles.startup import prepare_tensorflow_import

prepare_tensorflow_import()

from baselines.tiles.errors import PipelineError, run_cli
from baselines.tiles.train_args import DEFAULT_DATA_ROOT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="<out_dir>/model_<hash> from tiles_train.py")
    parser.add_argument(
        "--data_root",
        default=None,
        help="folder holding the split (default: the run's data root, then "
        f"{DEFAULT_DATA_ROOT}, then the bundled toy set)",
    )
    parser.add_argument("--split", default="test", choices=("test", "valid", "train"))
    parser.add_argument("--output", default="predictions_output_model.csv")
    parser.add_argument("--cache_dir", default=None, help="optional cache of the loaded split")
    parser.add_argument("--top", type=int, default=5, help="configurations listed per kernel")
    return parser


def choose_data_root(flag: str | None, run_root: str | None) -> tuple[Path, str]:
    """The data root to read and where that choice came from."""
    from baselines.tiles.data import BUNDLED_TOY_ROOT

    if flag is not None:
        return Path(flag).expanduser(), "--data_root"
    for candidate, origin in ((run_root, "the run file"), (DEFAULT_DATA_ROOT, "the default")):
        if candidate and Path(candidate).expanduser().is_dir():
            return Path(candidate).expanduser(), origin
    return BUNDLED_TOY_ROOT, "the bundled toy set (no other data root exists)"


def main() -> int:
    args = build_parser().parse_args()
    if args.top < 1:
        raise PipelineError(f"--top: must be at least 1, got {args.top}")
    from baselines.tiles.data import load_split
    from baselines.tiles.predict import SavedRanker, ranking_rows
    from baselines.tiles.run_files import read_run_for_model
    from baselines.tiles.submission import HEADER, write_csv_atomic

    record, _ = read_run_for_model(Path(args.dir))
    root, origin = choose_data_root(args.data_root, record.get("data_root"))
    print(f"data: {root} (from {origin}); model {record['model']}", flush=True)
    # Files are read in another process while this one rebuilds the model and
    # traces its scoring function (both hold the GIL most of the time).
    with ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        loading = pool.submit(
            load_split, root / args.split, name=args.split, cache_dir=args.cache_dir
        )
        ranker = SavedRanker.load(Path(args.dir), record)
        ranker.scorer.warm_up()
        split = loading.result()
    started = time.perf_counter()
    scores = ranker.score(split)
    seconds = time.perf_counter() - started
    rows = ranking_rows(split.tile_ids, scores, args.top)
    write_csv_atomic(Path(args.output), HEADER, rows)
    print(f"wrote {args.output}: {len(rows)} kernels of {root / args.split}")
    print(
        f"ranked {len(rows)} kernels, {int(split.num_configs.sum())} configs in {seconds:.2f} s "
        f"({len(rows) / max(seconds, 1e-9):.1f} kernels/s)"
    )
    if split.has_labels:
        report_errors(split, scores)
    return 0


def report_errors(split, scores) -> None:
    from baselines.tiles import metrics

    runtimes = split.normalized_runtimes()
    ids = [str(t) for t in split.tile_ids]
    rows = [("ALL", metrics.summarize(ids, scores, runtimes))]
    rows += list(metrics.summarize_by_program(ids, scores, runtimes).items())
    width = max(len(name) for name, _ in rows)
    print(f"{'program':<{width}}  kernels  top1_err  top5_err  top10_err  kaggle_score")
    for name, m in rows:
        print(
            f"{name:<{width}}  {m['kernels']:>7}  {m['1']:>8.4f}  {m['5']:>8.4f}  "
            f"{m['10']:>9.4f}  {m['kaggle_score']:>12.4f}"
        )


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
