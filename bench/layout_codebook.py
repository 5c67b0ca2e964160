#!/usr/bin/env python3
"""How much smaller a layout file's configurations are as per-node codebooks than as int8 values.

    .venv/bin/python bench/layout_codebook.py                      # ../shared/real_samples/layout
    .venv/bin/python bench/layout_codebook.py --root ~/data/tpugraphs/npz/layout --max_files 20

For every layout file under `--root`: its configurations and configurable
nodes, the int8 values' bytes (c x nc x 18, what the cache held before), the
codebook's bytes (codes plus each node's distinct rows), their ratio, the most
distinct rows of any node, and the median of `--repeats` reads
(`read_layout_file`, codebook built while reading). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.layout.data import read_layout_file  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(ROOT.parent / "shared" / "real_samples" / "layout"))
    parser.add_argument("--max_files", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    files = sorted(Path(args.root).expanduser().rglob("*.npz"))[: args.max_files]
    if not files:
        print(f"{args.root}: no layout files; pass --root", file=sys.stderr)
        return 1
    print("| file | configs | configurable | int8 values | codebook | ratio | most rows | read s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    total_values = total_book = 0
    for path in files:
        seconds = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            graph = read_layout_file(path)
            seconds.append(time.perf_counter() - started)
        book = graph.configs
        values = graph.num_configs * graph.num_configurable * 18
        stored = book.codes.nbytes + book.rows.nbytes
        total_values, total_book = total_values + values, total_book + stored
        name = path.relative_to(Path(args.root).expanduser()).as_posix()
        most = int(book.row_counts.max(initial=0))
        print(
            f"| {name[:40]} | {graph.num_configs:,} | {graph.num_configurable:,} | {values:,} | "
            f"{stored:,} | {values / max(stored, 1):.1f}x | {most} | "
            f"{statistics.median(seconds):.2f} |"
        )
    print(f"| all {len(files)} files | | | {total_values:,} | {total_book:,} | "
          f"{total_values / max(total_book, 1):.1f}x | | |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
