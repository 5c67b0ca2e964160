#!/usr/bin/env python3
"""Ranks every configuration of every test graph of a layout run and writes `ID,TopConfigs`.

    python layout_gen_predictions_csv.py --dir ~/out/tpugraphs_layout/model_<hash>

Rebuilds the model class named in the run record (`model_<hash>/run.jsonz`),
copies the saved weights in, reads `<data_root>/<source>/<search>/test` of that
run (pruned as in training, every configuration kept; through a memory-mapped
cache in `--cache_dir` when given), scores all
configurations in chunks and writes one row per test file,
`layout:<source>:<search>:<file stem>`, listing every configuration index,
fastest (lowest score) first, equal scores in file order. `--dir a,b` ranks
with an ensemble: the mean of each model's per-graph standardized scores (all
of one source and search).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.startup import prepare_tensorflow_import

prepare_tensorflow_import()

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.layout.cache import CACHE_DIR_HELP, prepare_cache_dir


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--dir",
        required=True,
        help="<out_dir>/model_<hash> from layout_train.py, or several separated by commas "
        "(an ensemble)",
    )
    parser.add_argument(
        "--data_root", default=None, help="layout data root (default: the first run's)"
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=("test", "valid"),
        help="split to rank; valid (labelled) also prints Kendall tau",
    )
    parser.add_argument(
        "--cache_dir",
        default=None,
        help=CACHE_DIR_HELP,
    )
    parser.add_argument(
        "--output",
        default=None,
        help="CSV to write (default: <first dir's parent>/"
        "layout_<source>_<search>_predictions.csv)",
    )
    return parser


def main() -> int:
    args = build_parser().parse_args()
    from baselines.layout.run_data import read_layout_models

    models = read_layout_models(args.dir, "--dir")
    first_dir, first = models[0]
    source, search = first["source"], first["search"]
    from baselines.core.io_utils import check_output_file, ensure_parent
    from baselines.layout.layout_args import resolve_layout_root, toy_banner

    output = Path(
        args.output or first_dir.parent / f"layout_{source}_{search}_predictions.csv"
    ).expanduser()
    output = check_output_file(output, "--output")
    prepare_cache_dir(args.cache_dir)
    root, toy = resolve_layout_root(args.data_root or first["args"]["data_root"])
    if toy:
        print(toy_banner(root), flush=True)
    folder = root / source / search / args.split
    print(f"ranking {folder} with {', '.join(r['model'] for _, r in models)}", flush=True)

    import numpy as np

    from baselines.core.ranking import ensemble_scores, ranking_cell
    from baselines.core.submission import HEADER, write_csv_atomic
    from baselines.layout.metrics import kendall_tau
    from baselines.layout.scoring import score_runs

    graphs, members = score_runs(models, folder, log=print, cache_dir=args.cache_dir)
    scores = ensemble_scores(members)
    rows = []
    for graph, graph_scores in zip(graphs, scores, strict=True):
        if not np.all(np.isfinite(graph_scores)):
            raise PipelineError(f"{graph.graph_id}: the model gave non-finite scores")
        rows.append((f"layout:{source}:{search}:{graph.graph_id}", ranking_cell(graph_scores)))
    write_csv_atomic(ensure_parent(output), HEADER, rows)
    configs = sum(len(s) for s in scores)
    print(f"wrote {output}: {len(rows)} graphs, {configs} configurations of {folder}")
    if args.split == "valid":
        taus = [kendall_tau(s, g.config_runtime) for g, s in zip(graphs, scores, strict=True)]
        print(f"valid Kendall tau (mean over {len(taus)} graphs): {np.nanmean(taus):.4f}")
    if toy:
        print(toy_banner(root))
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
