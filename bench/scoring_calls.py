#!/usr/bin/env python3
"""Ranking time of a saved tile model against the configuration slots per scoring call.

    .venv/bin/python bench/scoring_calls.py --dir <out>/model_<hash> \
        --data_root /work/rel/data --cache_dir /work/rel/cache --max_configs 4096,16384

Loads the split once (`--split`, default test), normalizes it with the run's
statistics, then ranks every configuration with one `ConfigScorer` per
`--max_configs` value, the scorers alternating within each of `--repeats`
rounds so that the machine's drift falls on all of them alike. Prints, per
value, the scoring calls it plans, each round's seconds and their median, and
how many kernels get the same top `--top` configurations as with the first
value (the scores of one configuration do not depend on its call; the float
rounding of a call's matmuls may).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.core.cli import entry_parser
from baselines.core.errors import PipelineError, run_cli
from baselines.core.tables import markdown_table


def build_parser():
    parser = entry_parser(__doc__)
    parser.add_argument("--dir", required=True, help="<out_dir>/model_<hash> from tiles_train.py")
    parser.add_argument("--data_root", required=True, help="folder holding the split")
    parser.add_argument("--cache_dir", default=None, help="optional cache of the loaded split")
    parser.add_argument("--split", default="test", choices=("test", "valid", "train"))
    parser.add_argument(
        "--max_configs",
        default="4096,8192,16384,32768",
        help="comma-separated configuration slots per call to compare",
    )
    parser.add_argument("--repeats", type=int, default=3, help="rounds over every value")
    parser.add_argument("--top", type=int, default=5, help="top configurations compared")
    return parser


def main() -> int:
    args = build_parser().parse_args()
    try:
        args.max_configs = [int(v) for v in args.max_configs.split(",")]
    except ValueError:
        raise PipelineError(
            f"--max_configs: comma-separated integers, got {args.max_configs!r}"
        ) from None
    if args.repeats < 1 or args.top < 1 or min(args.max_configs) < 1:
        raise PipelineError("--repeats, --top and every --max_configs value must be at least 1")
    from baselines.core.startup import prepare_tensorflow_import, tile_thread_pools

    prepare_tensorflow_import(tile_thread_pools())
    from baselines.core.metrics import top_configs
    from baselines.tiles.data import load_split
    from baselines.tiles.predict import ConfigScorer, SavedRanker

    ranker = SavedRanker.load(args.dir)
    model = ranker.scorer.model
    raw = load_split(Path(args.data_root) / args.split, name=args.split, cache_dir=args.cache_dir)
    split = ranker.normalized(raw)
    scorers = {m: ConfigScorer(model, max_configs=m) for m in args.max_configs}
    for scorer in scorers.values():
        scorer.warm_up()
    seconds: dict[int, list[float]] = {m: [] for m in scorers}
    tops: dict[int, list[list[int]]] = {}
    for _ in range(args.repeats):
        for m, scorer in scorers.items():
            started = time.perf_counter()
            scores = scorer.score_split(split, progress=False)
            seconds[m].append(time.perf_counter() - started)
            tops.setdefault(m, [top_configs(s, args.top) for s in scores])
    first = args.max_configs[0]
    print(f"{len(split)} kernels, {int(split.num_configs.sum())} configurations of {args.split}")
    rows = [
        [
            m,
            len(scorer.plan(split)),
            " / ".join(f"{s:.2f}" for s in seconds[m]),
            f"{statistics.median(seconds[m]):.2f}",
            f"{sum(a == b for a, b in zip(tops[m], tops[first]))} of {len(split)}",
        ]
        for m, scorer in scorers.items()
    ]
    header = ["max_configs", "calls", "seconds per round", "median s", "same top as first"]
    print(markdown_table(header, rows), end="")
    return 0


if __name__ == "__main__":
    run_cli(main)
