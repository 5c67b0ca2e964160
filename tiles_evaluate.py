#!/usr/bin/env python3
"""Evaluates saved models, alone and as an ensemble, on every validation kernel.

    python tiles_evaluate.py --dirs out/model_<h1>,out/model_<h2>,out/model_<h3>

Prints top-1/5/10 error, Kaggle score and OPA per benchmark (program) for each
model and, with two or more models, for their ensemble (the mean of per-kernel
standardized scores, as `tiles_gen_predictions_csv.py --dir a,b` ranks), and
writes the table as `<output>.md` and `<output>.csv`, with two figures:
`<output>_per_program.png` (top-1/5/10 error per program, every model and the
ensemble) and `<output>_pred_vs_true.png` (scores against runtimes, of the
ensemble, or of the one model).
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
from baselines.tiles.tile_args import DEFAULT_DATA_ROOT


def build_parser() -> argparse.ArgumentParser:
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--dirs", required=True, help="model folders (<out_dir>/model_<hash>), comma-separated"
    )
    parser.add_argument(
        "--data_root",
        default=None,
        help="folder holding the split (default: the first run's data root, then "
        f"{DEFAULT_DATA_ROOT})",
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
    return parser


def main() -> int:
    args = build_parser().parse_args()
    from baselines.core.io_utils import check_output_file, ensure_parent

    # Refused now, not after scoring every model; a missing folder is made when writing.
    output = check_output_file(Path(args.output), "--output")
    from baselines.core import plots
    from baselines.core.io_utils import atomic_write_text
    from baselines.core.ranking import ensemble_scores
    from baselines.tiles.data import load_split
    from baselines.tiles.data_roots import choose_data_root
    from baselines.tiles.error_table import csv_text, error_table, markdown
    from baselines.tiles.predict import SavedRanker
    from baselines.tiles.run_records import read_model_list

    models = read_model_list(args.dirs, "--dirs")
    root, origin = choose_data_root(args.data_root, models[0][1].get("data_root"))
    print(f"data: {root / args.split} (from {origin})", flush=True)
    split = load_split(root / args.split, name=args.split, cache_dir=args.cache_dir)
    scores = {}
    for d, record in models:
        label = f"{record['model']} {d.name}"
        scores[label] = SavedRanker.load(d, record).score(split, progress=False)
    if len(scores) > 1:
        scores["ensemble"] = ensemble_scores(list(scores.values()))
    rows = error_table(split, scores)
    text = markdown(rows)
    ensure_parent(output)
    atomic_write_text(output.with_name(output.name + ".md"), text)
    atomic_write_text(output.with_name(output.name + ".csv"), csv_text(rows))
    shown = "ensemble" if "ensemble" in scores else next(iter(scores))
    figures = {
        "_per_program.png": plots.per_program_errors(rows),
        "_pred_vs_true.png": plots.predicted_vs_true(
            scores[shown], split.normalized_runtimes(), shown
        ),
    }
    pngs = [plots.save_png(f, output.with_name(output.name + e)) for e, f in figures.items()]
    print(text, end="")
    print(f"wrote {output}.md, {output}.csv, {', '.join(map(str, pngs))}")
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
