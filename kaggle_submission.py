#!/usr/bin/env python3
"""Builds the whole five-collection Kaggle submission in one command, as one Beam pipeline.

    python kaggle_submission.py --data_root ~/data/tpugraphs --out out/kaggle
    python kaggle_submission.py --bundled_toy=True --seeds=2 --epochs=2 --out out/kaggle_toy
    python kaggle_submission.py --collections=tile:xla,layout:xla:default --seeds=1

Trains each collection's candidate recipes (baseline and recommended by default)
with seeds 0..N-1, scores every candidate's seed ensemble and the blend of all
on the whole validation split, and submits the recommended recipe unless another
option beats it by more than two standard errors of the paired per-kernel or
per-graph difference (test labels are never read). The five CSVs are joined into
`<out>/predictions_kaggle.csv` (never a dummy row); `<out>/report.md` says per
collection what was chosen and why, and the time and peak memory of every step.
The data root holds `npz/tile/xla` and `npz/layout` (echo_download_commands.py);
missing files are named, with their download command, before anything runs.

A rerun reuses every finished step, so after completion it trains nothing and
rewrites nothing, and a killed job resumes where it stopped. Other flags are
Apache Beam pipeline options: the local runner (the default) runs as many worker
processes as cores and memory allow (--direct_num_workers to choose);
--runner=FlinkRunner, SparkRunner or DataflowRunner runs it on a cluster
(docs/usage.md).
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines.core.cli import add_bool_flag, entry_parser
from baselines.core.errors import run_cli
from baselines.jobs.submission_job import COLLECTIONS, plan_job, write_report


def build_parser():
    parser = entry_parser(__doc__)
    parser.add_argument(
        "--data_root",
        default="~/data/tpugraphs",
        help="folder holding npz/tile/xla and npz/layout (echo_download_commands.py --dest)",
    )
    parser.add_argument("--out", default="out/kaggle", help="folder of every run and output")
    parser.add_argument(
        "--collections",
        default="all",
        help=f"all, or some of {','.join(COLLECTIONS)} (comma-separated)",
    )
    parser.add_argument(
        "--seeds", type=int, default=3, help="seeds 0..N-1 per collection and candidate"
    )
    for kind, folder in (("tile", "configs/"), ("layout", "configs/layout/")):
        parser.add_argument(
            f"--{kind}_candidates",
            default="baseline,recommended",
            help=f"{kind} recipes to train and choose among on validation: flagfile names "
            f"in {folder} or paths, comma-separated (recommended is kept unless beaten)",
        )
    add_bool_flag(
        parser,
        "--bundled_toy",
        "the bundled toy sets in data/ instead of --data_root (every collection)",
    )
    add_bool_flag(parser, "--toy_data", "old spelling of --bundled_toy")
    parser.add_argument(
        "--epochs", type=int, default=None, help="every training's --epochs (default: the recipe's)"
    )
    parser.add_argument(
        "--sample",
        default=None,
        help="Kaggle's sample_submission.csv (default: looked for beside the data)",
    )
    return parser


TOY_DATA_NOTE = "--toy_data=True: the bundled toy sets instead of --data_root (--bundled_toy=True)"


def parse_command(argv=None, log=lambda _: None):
    """(the job's flags, Beam's); `--toy_data` (old spelling) is `--bundled_toy`, said to `log`."""
    args, beam_args = build_parser().parse_known_args(argv)
    if args.toy_data:
        log(TOY_DATA_NOTE)
        args.bundled_toy = True
    del args.toy_data
    return args, beam_args


def main() -> int:
    for name in ("apache_beam", None):  # Beam's start-up warnings; steps print their own lines
        logging.getLogger(name).setLevel(logging.ERROR)
    args, beam_args = parse_command(log=lambda line: print(line, flush=True))
    job = plan_job(
        args.data_root, args.out, args.collections, args.seeds, args.bundled_toy, args.epochs,
        args.sample, {"tile": args.tile_candidates, "layout": args.layout_candidates},
    )  # fmt: skip
    names = ", ".join(c.name for c in job.collections)
    seeds = f"{job.seeds} seed{'s' * (job.seeds > 1)}"
    kinds = "; ".join(f"{k} candidates {','.join(v)}" for k, v in job.candidates.items())
    print(f"submission job: {names}; {kinds}; {seeds} each; out {job.out}", flush=True)
    from baselines.jobs.submission_pipeline import run_pipeline

    started = time.perf_counter()
    where = run_pipeline(job, beam_args, lambda line: print(line, flush=True))
    wall = time.perf_counter() - started
    report, written = write_report(job, wall, where)
    done = "wrote" if written else "unchanged:"
    print(f"{done} {report}; submission {job.out / 'predictions_kaggle.csv'}", flush=True)
    return 0


if __name__ == "__main__":
    run_cli(main)
