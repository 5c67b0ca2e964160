#!/usr/bin/env python3
"""Evaluates saved layout models, alone and as an ensemble, on every graph of a labelled split.

    python layout_evaluate.py --dirs out/layout/model_<h1>,out/layout/model_<h2>

Reads `<data_root>/<source>/<search>/<split>` of the collection the runs were
trained on (pruned as the runs were, every configuration kept), scores every
configuration with each model and, with two or more models, with their
ensemble (the mean of per-graph standardized scores, as
`layout_gen_predictions_csv.py --dir a,b` ranks). Reports Kendall's tau and
slowdown@1/10/100 per graph, per program (the file stem up to its first ".")
and over all graphs (the mean over graphs), on all configurations and on fixed
subsets of `--subset_size` configurations per graph (drawn from
`--subset_seed` and the graph id, or read from `--subsets`). Writes
`<output>.md`, `<output>.csv`, `<output>_subsets.json` (the subsets used) and
two figures: `<output>_tau_per_graph.png` (tau per graph, every model and the
ensemble) and `<output>_pred_vs_true.png` (scores against runtimes, of the
ensemble, or of the one model).
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
        "--dirs",
        required=True,
        help="layout model folders (<out_dir>/model_<hash>), comma-separated, one collection",
    )
    parser.add_argument(
        "--data_root", default=None, help="layout data root (default: the first run's)"
    )
    parser.add_argument(
        "--split", default="valid", choices=("valid", "train"), help="labelled split to evaluate"
    )
    parser.add_argument(
        "--cache_dir",
        default=None,
        help=CACHE_DIR_HELP,
    )
    parser.add_argument(
        "--subset_size",
        type=int,
        default=1000,
        help="configurations per graph in the fixed subsets (all of a graph with fewer)",
    )
    parser.add_argument(
        "--subset_seed", type=int, default=0, help="seed of the subsets' draw (with the graph id)"
    )
    parser.add_argument(
        "--subsets",
        default=None,
        help="reuse the subsets recorded in this <output>_subsets.json instead of drawing them",
    )
    parser.add_argument(
        "--output",
        default="layout_evaluation",
        help="writes <output>.md, <output>.csv, <output>_subsets.json and <output>_*.png; "
        "its folder is created if missing",
    )
    return parser


def main() -> int:
    args = build_parser().parse_args()
    from baselines.core.io_utils import check_output_file, read_user_text

    # Refused now, not after scoring every model; a missing folder is made when writing.
    output = check_output_file(Path(args.output), "--output")
    prepare_cache_dir(args.cache_dir)
    if args.subset_size < 1 or args.subset_seed < 0:
        raise PipelineError(
            f"--subset_size must be >= 1 and --subset_seed >= 0, got {args.subset_size} "
            f"and {args.subset_seed}"
        )
    from baselines.core.ranking import ensemble_scores
    from baselines.layout import metrics
    from baselines.layout.data import list_layout_files, read_config_count
    from baselines.layout.layout_args import resolve_layout_root, toy_banner
    from baselines.layout.run_data import read_layout_models
    from baselines.layout.scoring import score_runs

    models = read_layout_models(args.dirs, "--dirs")
    first = models[0][1]
    root, toy = resolve_layout_root(args.data_root or first["args"]["data_root"])
    if toy:
        print(toy_banner(root), flush=True)
    folder = root / first["source"] / first["search"] / args.split
    # Subsets are chosen (or a recorded file checked) from the files' headers, before scoring.
    counts = {p.stem: read_config_count(p) for p in list_layout_files(folder)}
    if args.subsets:
        where = Path(args.subsets).expanduser()
        subsets, seed, size = metrics.parse_subsets(
            read_user_text(where, "--subsets", "subsets file "), str(where), counts
        )
        print(f"subsets: read from {where}", flush=True)
    else:
        seed, size = args.subset_seed, args.subset_size
        subsets = metrics.choose_subsets(counts, size, seed)
    print(f"evaluating {folder} with {', '.join(r['model'] for _, r in models)}", flush=True)

    graphs, members = score_runs(models, folder, log=print, cache_dir=args.cache_dir)
    scores = {f"{r['model']} {d.name}": m for (d, r), m in zip(models, members, strict=True)}
    if len(members) > 1:
        scores["ensemble"] = ensemble_scores(members)
    runtimes = [g.config_runtime for g in graphs]
    rows = metrics.evaluation_rows([g.graph_id for g in graphs], runtimes, scores, subsets)
    text = metrics.markdown(rows)

    from baselines.core import plots
    from baselines.core.io_utils import atomic_write_text, ensure_parent
    from baselines.core.plots import tau_per_graph

    ensure_parent(output)
    written = []
    for ending, content in (
        (".md", text),
        (".csv", metrics.csv_text(rows)),
        ("_subsets.json", metrics.subsets_json(subsets, seed, size)),
    ):
        atomic_write_text(output.with_name(output.name + ending), content)
        written.append(f"{output}{ending}")
    shown = "ensemble" if "ensemble" in scores else next(iter(scores))
    figures = {
        "_tau_per_graph.png": tau_per_graph(rows),
        "_pred_vs_true.png": plots.predicted_vs_true(scores[shown], runtimes, shown, unit="graph"),
    }
    for ending, figure in figures.items():
        written.append(str(plots.save_png(figure, output.with_name(output.name + ending))))
    print(text, end="")
    print(f"wrote {', '.join(written)}")
    if toy:
        print(toy_banner(root))
    return 0


if __name__ == "__main__":
    run_cli(main, fast_exit=True)
