#!/usr/bin/env python3
"""How well a rule without parameters ranks layout configurations: fewest changed groups first.

    .venv/bin/python bench/layout_rule.py --sets data/layout_toy \
        --real ../shared/real_samples/layout
    .venv/bin/python bench/layout_rule.py --collections xla:default,nlp:default \
        --sets out/layout_quality_1x/sets/standard-2e379689 --out out/layout_rule_1x

The rule scores a configuration by the number of its (configurable node,
group) pairs whose layout differs from the reference layout of that group
(`batching.reference_layouts`: the minor-to-major order node_feat gives the
node itself, operand 0 and operand 1); a group left all -1 (the compiler's
default) counts as unchanged. It ranks fewest changes first. Nothing is
trained, so it is a floor any learned model of a set should clear, and a
probe of the set itself: where the rule ranks well, the runtimes grow with
the distance from the layouts node_feat records.

Per set folder (`--sets`, each `<set>/<source>/<search>/<split>/*.npz`, as
`bench/layout_quality.py` generates), collection (`--collections`) and
labelled split (`--splits`): the mean over graphs of Kendall's tau and
slowdown@1 of the rule on every configuration, and the median share of groups
a configuration changes. For every labelled file under `--real` (the real
samples; test files hold no runtimes and are counted, not scored) the same
per file. Writes `<out>/layout_rule.{json,md}`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baselines.core.errors import PipelineError, run_cli  # noqa: E402
from baselines.core.io_utils import atomic_write_text  # noqa: E402
from baselines.layout.batching import operand_nodes, reference_layouts  # noqa: E402
from baselines.layout.data import list_layout_files, read_layout_file  # noqa: E402
from baselines.layout.graph import LayoutGraph  # noqa: E402
from baselines.layout.metrics import kendall_tau, slowdown_at_k  # noqa: E402
from baselines.layout.tile_padding import GROUP_WIDTH  # noqa: E402
from baselines.layout.tile_padding import NUM_GROUPS as GROUPS  # noqa: E402


def changed_groups(config_feat: np.ndarray, cfg_ref: np.ndarray) -> np.ndarray:
    """int64 [C]: per configuration, the groups whose explicit layout differs from `cfg_ref`.

    config_feat: [C, nc, 18] layout values (-1..5); cfg_ref: [nc, 18]. A slot
    counts as changed when it holds a value (>= 0) other than the reference's;
    a group is changed when any of its 6 slots is.
    """
    values = np.asarray(config_feat)
    changed = (values != np.asarray(cfg_ref)[None]) & (values >= 0)
    c, nc = values.shape[:2]
    return changed.reshape(c, nc, GROUPS, GROUP_WIDTH).any(axis=-1).sum(axis=(1, 2))


def most_common_layouts(config_feat: np.ndarray) -> np.ndarray:
    """int [nc, 18]: per configurable node and group, the layout most configurations give it.

    Ties go to the smallest layout in lexicographic order. Each group's 6 values
    (-1..5) are one base-8 number, most significant slot first, so number order
    is that order; each group's numbers are sorted and its longest run is taken.
    """
    values = np.asarray(config_feat, dtype=np.int64)
    c, nc = values.shape[:2]
    digits = 8 ** np.arange(GROUP_WIDTH - 1, -1, -1)
    keys = (values.reshape(c, nc * GROUPS, GROUP_WIDTH) + 1) @ digits  # [C, groups]
    ordered = np.sort(keys, axis=0).T  # [groups, C]
    new_run = np.ones(ordered.shape, dtype=bool)
    new_run[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    starts = np.flatnonzero(new_run)  # runs never cross groups: each row starts one
    lengths = np.diff(np.append(starts, ordered.size))
    group_of = starts // c
    # Per group the longest run, the earliest (smallest number) among equally long ones.
    order = np.lexsort((starts, -lengths, group_of))
    firsts = order[np.r_[True, group_of[order][1:] != group_of[order][:-1]]]
    modes = ordered.reshape(-1)[starts[firsts]]
    return ((modes[:, None] // digits) % 8 - 1).reshape(nc, GROUPS * GROUP_WIDTH)


def _scored(counts: np.ndarray, runtime: np.ndarray, labelled: bool) -> tuple:
    score = counts.astype(np.float64)
    tau = kendall_tau(score, runtime) if labelled else float("nan")
    slowdown = slowdown_at_k(score, runtime, 1) if labelled else float("nan")
    # None where the file holds no runtimes or tau is undefined (a constant input)
    return tuple(float(x) if np.isfinite(x) else None for x in (tau, slowdown))


def rule_figures(graph: LayoutGraph) -> dict:
    """Both rules' tau and slowdown@1 on one graph (None where unlabelled), and their sizes.

    `tau`, `slowdown_1`, `changed_share`: groups changed from the reference
    layouts; `mode_*`: from the most common layout of each group in the file.
    """
    ref, _ = reference_layouts(graph, operand_nodes(graph))
    feat = graph.node_config_feat
    counts = changed_groups(feat, ref)
    from_mode = changed_groups(feat, most_common_layouts(feat))
    runtime = np.asarray(graph.config_runtime, dtype=np.float64)
    labelled = bool(runtime.size) and float(runtime.max()) > 0
    groups = max(graph.num_configurable * GROUPS, 1)
    tau, slowdown = _scored(counts, runtime, labelled)
    mode_tau, mode_slowdown = _scored(from_mode, runtime, labelled)
    return {
        "graph": graph.graph_id,
        "configs": int(counts.size),
        "groups": int(graph.num_configurable * GROUPS),
        "changed_share": float(np.median(counts) / groups),
        "tau": tau,
        "slowdown_1": slowdown,
        "mode_changed_share": float(np.median(from_mode) / groups),
        "mode_tau": mode_tau,
        "mode_slowdown_1": mode_slowdown,
    }


def _mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.fmean(values) if values else None


def split_summary(rows: list[dict]) -> dict:
    """Mean taus and slowdowns@1 over a split's labelled graphs, median changed shares."""
    summary = {"graphs": len(rows), "scored": sum(r["tau"] is not None for r in rows)}
    for key in ("tau", "slowdown_1", "mode_tau", "mode_slowdown_1"):
        summary[key] = _mean(rows, key)
    for key in ("changed_share", "mode_changed_share"):
        summary[key] = statistics.median(r[key] for r in rows) if rows else None
    return summary


def _cell(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pairs(row: dict) -> str:
    """The three 'reference / mode' cells of a table row."""
    cells = [
        (row["tau"], row["mode_tau"], 3),
        (row["slowdown_1"], row["mode_slowdown_1"], 4),
        (row["changed_share"], row["mode_changed_share"], 3),
    ]
    return "".join(f" | {_cell(a, d)} / {_cell(b, d)}" for a, b, d in cells) + " |"


def markdown(results: dict) -> str:
    lines = [
        "# A rule without parameters: fewest changed layout groups first",
        "",
        "Per rule: Kendall's tau, slowdown@1 and the median share of groups a configuration",
        "changes, counted from the layouts node_feat records (reference) and from each group's",
        "most common layout in the file (mode).",
        "",
        "| set | collection | split | graphs (scored) | tau: reference / mode"
        " | slowdown@1: reference / mode | groups changed: reference / mode |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in results["sets"]:
        s = row["summary"]
        lines.append(
            f"| {row['set']} | {row['collection']} | {row['split']} | {s['graphs']} ({s['scored']})"
            + _pairs(s)
        )
    if results["real"]:
        lines += [
            "",
            "Real files:",
            "",
            "| file | configs | tau: reference / mode | slowdown@1: reference / mode"
            " | groups changed: reference / mode |",
            "|---|---|---|---|---|",
        ]
        for r in results["real"]:
            lines.append(f"| {r['file']} | {r['configs']}" + _pairs(r))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> dict:
    results: dict = {"sets": [], "real": []}
    for folder in args.sets:
        for collection in args.collections:
            source, search = collection.split(":")
            for split in args.splits:
                files = list_layout_files(folder / source / search / split)
                rows = [rule_figures(read_layout_file(f)) for f in files]
                summary = split_summary(rows)
                results["sets"].append(
                    {
                        "set": folder.name,
                        "collection": collection,
                        "split": split,
                        "summary": summary,
                        "graphs": rows,
                    }
                )
                print(f"{folder.name} {collection} {split}: {json.dumps(summary)}", flush=True)
    if args.real is not None:
        for path in sorted(args.real.glob("*/*/*/*.npz")):
            row = rule_figures(read_layout_file(path))
            row["file"] = str(path.relative_to(args.real))
            results["real"].append(row)
            print(f"{row['file']}: tau {row['tau']}", flush=True)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sets",
        type=Path,
        nargs="*",
        default=[],
        help="set folders, each <set>/<source>/<search>/<split>/*.npz (as bench/layout_quality.py "
        "writes them under <out>/sets/)",
    )
    parser.add_argument(
        "--collections",
        default="xla:default,nlp:default",
        help="comma-separated <source>:<search> collections of each set (default: %(default)s)",
    )
    parser.add_argument(
        "--splits",
        default="valid,test",
        help="comma-separated labelled splits of each set to score (default: %(default)s)",
    )
    parser.add_argument("--real", type=Path, default=None, help="the real samples' layout/ folder")
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "out" / "layout_rule",
        help="folder for layout_rule.json and layout_rule.md (default: out/layout_rule)",
    )
    args = parser.parse_args(argv)
    args.collections = [c for c in args.collections.split(",") if c]
    args.splits = [s for s in args.splits.split(",") if s]
    for collection in args.collections:
        if collection.count(":") != 1:
            raise PipelineError(f"--collections: {collection!r} is not <source>:<search>")
    if args.real is not None and not args.real.is_dir():
        raise PipelineError(f"--real {args.real}: no such folder; pass the real samples' layout/")
    results = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "layout_rule.json", json.dumps(results, indent=1) + "\n")
    atomic_write_text(args.out / "layout_rule.md", markdown(results))
    print(f"wrote {args.out / 'layout_rule.md'}")


if __name__ == "__main__":
    run_cli(main)
