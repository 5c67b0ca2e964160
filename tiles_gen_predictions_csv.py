#!/usr/bin/env python3
"""Ranks every kernel of a split with a trained model and writes `ID,TopConfigs`.

    python tiles_gen_predictions_csv.py --dir ~/out/tpugraphs_tiles/model_<hash>

Rebuilds the model class named in `run_<hash>.jsonz` beside the model folder,
copies the saved weights in, normalizes features with the statistics saved in
the run (train and valid are never loaded to predict test) and writes the five
predicted-fastest configurations of every kernel. `--split valid` also prints
top-1/5/10 errors and the Kaggle score, overall and per program.

`--dir a,b,c` ranks with an ensemble: the mean of each model's per-kernel
standardized scores (models of any classes).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

prepare_tensorflow_import(tile_thread_pools())

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.tiles.tile_args import DEFAULT_DATA_ROOT

if TYPE_CHECKING:
    from baselines.tiles.data import TileSplit
    from baselines.tiles.features import FeatureStats


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--dir",
        required=True,
        help="<out_dir>/model_<hash> from tiles_train.py, or several separated by commas: "
        "an ensemble (mean of per-kernel standardized scores)",
    )
    parser.add_argument(
        "--data_root",
        default=None,
        help="folder holding the split (default: the first run's data root, then "
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


def read_split(
    root: Path, split: str, cache_dir: str | None, stats: FeatureStats | None, estimates: bool
) -> TileSplit:
    """The split as the files hold it, or normalized with `stats` (a FeatureStats)."""
    from baselines.tiles.data import load_split

    raw = load_split(root / split, name=split, cache_dir=cache_dir)
    return raw if stats is None else stats.normalize_split(raw, estimates=estimates)


def main() -> int:
    args = build_parser().parse_args()
    if args.top < 1:
        raise PipelineError(f"--top: must be at least 1, got {args.top}")
    from baselines.core.io_utils import check_output_file, ensure_parent, remove_stale_temporaries

    # Refused now, not after the ranking; a missing folder is made when writing.
    output = check_output_file(Path(args.output), "--output")

    # Leftovers of killed runs; in the output's folder (any folder) only those
    # whose writer is known to be gone, in the cache also old foreign ones.
    if output.parent.is_dir():
        remove_stale_temporaries(output.parent, max_age_s=None)
    if args.cache_dir:
        remove_stale_temporaries(Path(args.cache_dir))

    # Files are read in another process while this one imports TensorFlow,
    # rebuilds the models and traces their scoring functions (all of which
    # hold the GIL most of the time). The run records are read first, without
    # TensorFlow (a bad --dir list is refused before any data is read), so the
    # data root is known, whether from --data_root or the run file, before
    # TensorFlow is imported (about 3 s); with one model the split is also
    # normalized in the reading process with its statistics.
    from baselines.tiles.data_roots import choose_data_root, toy_notice
    from baselines.tiles.features import FeatureStats, uses_estimates
    from baselines.tiles.run_records import read_model_list

    models = read_model_list(args.dir, "--dir")
    records = [record for _, record in models]
    stats = FeatureStats.from_dict(records[0]["feature_stats"]) if len(models) == 1 else None
    root, origin = choose_data_root(args.data_root, records[0].get("data_root"))
    notice = toy_notice(root, origin)
    if notice:
        print(notice, flush=True)
    names = ", ".join(r["model"] for r in records)
    print(f"data: {root} (from {origin}); model {names}", flush=True)
    with ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        estimates = uses_estimates(records[0]["model_kwargs"])
        loading = pool.submit(read_split, root, args.split, args.cache_dir, stats, estimates)

        from baselines.core.ranking import ensemble_scores
        from baselines.core.submission import HEADER, write_csv_atomic
        from baselines.tiles.predict import SavedRanker, ranking_rows

        rankers = [SavedRanker.load(d, record) for d, record in models]
        for ranker in rankers:
            ranker.scorer.warm_up()
        split = loading.result()
    started = time.perf_counter()
    if stats is not None:  # normalized while it was read
        members = [rankers[0].scorer.score_split(split)]
    else:
        members = [ranker.score(split) for ranker in rankers]
    scores = ensemble_scores(members)
    seconds = time.perf_counter() - started
    rows = ranking_rows(split.tile_ids, scores, args.top)
    write_csv_atomic(ensure_parent(output), HEADER, rows)
    print(f"wrote {args.output}: {len(rows)} kernels of {root / args.split}")
    print(
        f"ranked {len(rows)} kernels, {int(split.num_configs.sum())} configs in {seconds:.2f} s "
        f"({len(rows) / max(seconds, 1e-9):.1f} kernels/s)"
    )
    if split.has_labels:
        from baselines.tiles.error_table import error_table, markdown

        label = "ensemble" if len(members) > 1 else records[0]["model"]
        print(markdown(error_table(split, {label: scores})), end="")
    if notice:
        print(notice)
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
