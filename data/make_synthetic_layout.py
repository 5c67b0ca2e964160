"""Writes a deterministic synthetic layout set: <out>/{xla,nlp}/{default,random}/<split>/*.npz.

The bundled toy set is exactly this script's output with its defaults:

    python data/make_synthetic_layout.py --out data/layout_toy --seed 0

Files have the real layout files' keys, order and dtypes and read through
`baselines.layout.read_layout_file`. Programs come from a few families (conv nets,
transformer-like dot stacks, RNNs); valid and test hold families train never sees.
Runtimes come from the analytic layout cost model of
`synthetic/layout/cost_model.py` (base compute + relayout transposes +
lane/sublane padding + 1% log-normal noise); test runtimes are 0 unless --test_labels.

The set is built in a temporary folder next to --out and renamed into place, so an
interrupted run never leaves half a set. An existing --out is replaced only when it
holds nothing but such a set. Same --seed, byte-identical files. Sets sized like
the real release: `data/make_synthetic.py --collection layout --preset release ...`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from baselines.core.cli import entry_parser  # noqa: E402
from baselines.core.errors import PipelineError, run_cli  # noqa: E402
from synthetic.layout import DEFAULT_COUNTS, SPLITS, write_layout_dataset  # noqa: E402
from synthetic.layout.cost_model import COST_MODELS  # noqa: E402

DEFAULT_GRAPHS = "/".join(str(DEFAULT_COUNTS[s]) for s in SPLITS)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = entry_parser(__doc__)
    parser.add_argument("--out", required=True, help="output folder (gets xla/ and nlp/)")
    parser.add_argument("--seed", type=int, default=0, help="dataset seed (non-negative)")
    parser.add_argument(
        "--graphs_per_split",
        default=DEFAULT_GRAPHS,
        help="graphs per collection in train/valid/test, e.g. 8/3/3",
    )
    parser.add_argument(
        "--test_labels",
        action="store_true",
        help="keep the test split's runtimes (the real test split hides them as 0)",
    )
    parser.add_argument(
        "--cost_model",
        default="standard",
        choices=sorted(COST_MODELS),
        help="the runtimes' constants: standard (the toy set's) or alternate (another chip: "
        "(32, 128) vector tile, other transpose and padding costs); same programs and configs",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-collection lines")
    return parser.parse_args(argv)


def parse_counts(text: str) -> dict[str, int]:
    """'8/3/3' -> {'train': 8, 'valid': 3, 'test': 3}; anything else is a one-line error."""
    parts = text.split("/")
    try:
        counts = [int(p) for p in parts]
    except ValueError:
        counts = []
    if len(counts) != len(SPLITS) or min(counts) < 0:
        raise PipelineError(
            f"--graphs_per_split {text!r}: expected three non-negative integers "
            "train/valid/test, e.g. 8/3/3"
        )
    return dict(zip(SPLITS, counts))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = parse_counts(args.graphs_per_split)
    if args.seed < 0:
        raise PipelineError(f"--seed must be non-negative, got {args.seed}")
    out = Path(args.out).expanduser().resolve()
    written = write_layout_dataset(
        out,
        counts,
        args.seed,
        args.test_labels,
        log=None if args.quiet else print,
        cost_model=args.cost_model,
    )
    files = [f for collection in written.values() for f in collection]
    size = sum(f.stat().st_size for f in files)
    print(f"wrote {len(files)} files, {size / 2**20:.2f} MiB in {out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
