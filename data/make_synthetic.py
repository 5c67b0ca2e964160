"""Writes a deterministic synthetic tile:xla dataset: <out>/{train,valid,test}/*.npz.

The bundled toy set is exactly this script's output with its defaults:

    python data/make_synthetic.py --out data/tile_xla_toy

A larger benchmark set (see data/README.md):

    python data/make_synthetic.py --out ~/data/tpugraphs_synth/npz/tile/xla \\
        --train 1000 --valid 200 --test 200 --min_configs 100 --max_configs 600

The set is built in a temporary directory next to --out and renamed into place
at the end, so an interrupted run never leaves a half-written set. An existing
--out is replaced only when it looks like a dataset (nothing but split folders
of .npz files).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tqdm import tqdm  # noqa: E402

from baselines.tiles import synthetic  # noqa: E402
from baselines.tiles.errors import PipelineError, run_cli  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory (gets train/valid/test)")
    parser.add_argument("--train", type=int, default=100, help="train kernels")
    parser.add_argument("--valid", type=int, default=30, help="valid kernels")
    parser.add_argument("--test", type=int, default=30, help="test kernels (labels hidden)")
    parser.add_argument("--min_configs", type=int, default=5, help="fewest configs per kernel")
    parser.add_argument("--max_configs", type=int, default=200, help="most configs per kernel")
    parser.add_argument("--max_nodes", type=int, default=40, help="most nodes per kernel")
    parser.add_argument("--seed", type=int, default=0, help="dataset seed (non-negative)")
    parser.add_argument(
        "--hardware",
        default="default",
        choices=sorted(synthetic.HARDWARE_PRESETS),
        help="cost-model constants of the simulated core (default: %(default)s)",
    )
    parser.add_argument(
        "--test_labels",
        action="store_true",
        help="keep the test split's runtimes (for benchmarks; the real test split hides them)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser.parse_args(argv)


def _check_args(args: argparse.Namespace) -> synthetic.GeneratorOptions:
    for flag in ("train", "valid", "test", "seed"):
        if getattr(args, flag) < 0:
            raise PipelineError(f"--{flag} must be non-negative, got {getattr(args, flag)}")
    try:
        return synthetic.GeneratorOptions(
            min_configs=args.min_configs,
            max_configs=args.max_configs,
            max_nodes=args.max_nodes,
            hardware=synthetic.HARDWARE_PRESETS[args.hardware],
            test_labels=args.test_labels,
        )
    except ValueError as e:
        raise PipelineError(
            f"bad size flags: {e}; fix --min_configs/--max_configs/--max_nodes"
        ) from None


def _looks_like_dataset(path: Path) -> bool:
    """True for an empty directory or one holding only split folders of .npz files."""
    for entry in path.iterdir():
        if not entry.is_dir() or entry.is_symlink() or entry.name not in synthetic.SPLITS:
            return False
        for f in entry.iterdir():
            if not (f.is_file() and f.suffix == ".npz"):
                return False
    return True


def write_dataset(
    out: Path,
    counts: dict[str, int],
    seed: int,
    options: synthetic.GeneratorOptions,
    progress: bool = True,
) -> None:
    """Generates every split into a temporary directory, then renames it to `out`."""
    if out.exists() and not (out.is_dir() and _looks_like_dataset(out)):
        raise PipelineError(
            f"{out}: exists and is not a synthetic dataset directory; "
            "choose another --out or remove it first"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{out.name}.tmp-", dir=out.parent))
    try:
        for split, count in counts.items():
            split_dir = tmp / split
            split_dir.mkdir()
            for index in tqdm(range(count), desc=split, unit="kernel", disable=not progress):
                kernel = synthetic.generate_kernel(seed, split, index, options)
                path = split_dir / f"{kernel.name}.npz"
                if path.exists():
                    raise PipelineError(f"{path}: two kernels got the same name; change --seed")
                synthetic.write_npz(path, kernel.arrays)
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f"{out.name}.tmp-old-", dir=out.parent))
            os.replace(out, old / out.name)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = _check_args(args)
    counts = {"train": args.train, "valid": args.valid, "test": args.test}
    out = Path(args.out).expanduser().resolve()
    write_dataset(out, counts, args.seed, options, progress=not args.quiet)
    total = sum(f.stat().st_size for f in out.rglob("*.npz"))
    print(f"wrote {sum(counts.values())} kernels ({total / 2**20:.2f} MiB) to {out}")
    return 0


if __name__ == "__main__":
    run_cli(main)
