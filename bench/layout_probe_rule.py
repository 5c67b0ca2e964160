#!/usr/bin/env python3
"""Which layout probes a collection adopts, over the reports of several worlds.

    .venv/bin/python bench/layout_probe_rule.py out/layout_default_permutations out/default_dec

Reads each folder's `layout_quality.json` (`bench/layout_quality.py --baseline recommended`,
one world each) and, per collection and probe, applies `layout_verdicts.probe_adoption` over
every (world, cost model) pair: adopted when validation tau rises beyond the seed spread in
all of them. Test tau changes are reported beside, never chosen on. Writes the table to
stdout and `<first folder>/probe_rule.md`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import layout_verdicts  # noqa: E402
from quality_report import markdown_table, pm  # noqa: E402

from baselines.core.cli import entry_parser  # noqa: E402
from baselines.core.errors import PipelineError, run_cli  # noqa: E402
from baselines.core.io_utils import atomic_write_text  # noqa: E402


def read_pairs(folders: list[Path]) -> tuple[dict[str, dict[str, dict]], str]:
    """pairs[collection]["<world>, <cost model>"] = by recipe; and the reports' incumbent."""
    pairs: dict[str, dict[str, dict]] = {}
    incumbents = set()
    for folder in folders:
        path = folder / "layout_quality.json"
        if not path.is_file():
            raise PipelineError(f"{path}: not found; run bench/layout_quality.py --out {folder}")
        report = json.loads(path.read_text())
        incumbents.add(report["baseline"])
        for cost_model, by_collection in report["results"].items():
            for collection, by_recipe in by_collection.items():
                name = f"{report['search_space']}, {cost_model}"
                pairs.setdefault(collection, {})[name] = by_recipe
    if len(incumbents) != 1:
        raise PipelineError(f"the reports compare against different recipes: {sorted(incumbents)}")
    return pairs, incumbents.pop()


def report(pairs: dict[str, dict[str, dict]], incumbent: str) -> str:
    header = ["collection", "probe", "val tau change (spread) per pair", "test tau change"]
    header.append("adopted")
    rows = []
    for collection, by_pair in pairs.items():
        taus = "; ".join(
            f"{pair}: {pm(by[incumbent]['valid']['kendall_tau'])}" for pair, by in by_pair.items()
        )
        tests = ", ".join(pm(by[incumbent]["test"]["kendall_tau"]) for by in by_pair.values())
        rows.append([collection, f"{incumbent} (val, test tau)", taus, tests, ""])
        probes = [r for r in next(iter(by_pair.values())) if r != incumbent]
        for probe in probes:
            verdict = layout_verdicts.probe_adoption(by_pair, probe, incumbent)
            changes = "; ".join(
                f"{r['pair']}: {r['change']:+.3f} ({r['spread']:.3f})" for r in verdict["rows"]
            )
            tests = ", ".join(f"{r['test_change']:+.3f}" for r in verdict["rows"])
            rows.append([collection, probe, changes, tests, "yes" if verdict["adopted"] else "no"])
    return f"Against {incumbent}:\n\n" + markdown_table(header, rows)


def main() -> int:
    parser = entry_parser(__doc__)
    parser.add_argument("folders", nargs="+", type=Path, help="bench/layout_quality.py outputs")
    args = parser.parse_args()
    pairs, incumbent = read_pairs(args.folders)
    text = report(pairs, incumbent)
    atomic_write_text(args.folders[0] / "probe_rule.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    run_cli(main)
