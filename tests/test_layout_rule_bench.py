"""bench/layout_rule.py: the changed-groups rule on hand-made configurations, whose counts,
modes, taus and slowdowns are worked out by hand below, and one run on the bundled toy set."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from baselines.layout.codebook import Codebook
from baselines.layout.graph import LayoutGraph

ROOT = Path(__file__).resolve().parents[1]


def load_bench():
    spec = importlib.util.spec_from_file_location("layout_rule", ROOT / "bench" / "layout_rule.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def group_row(*groups: tuple[int, ...]) -> list[int]:
    """18 slots from three groups' leading values, the rest -1."""
    row = []
    for g in groups:
        row += list(g) + [-1] * (6 - len(g))
    return row


def test_changed_groups_counts_each_explicit_group_that_differs_once():
    bench = load_bench()
    ref = np.array([group_row((1, 0), (), ()), group_row((2, 0, 1), (1, 0), ())])
    configs = np.array(
        [
            ref,  # nothing changed
            [group_row((0, 1), (), ()), ref[1]],  # one group, two slots: counted once
            [group_row((), (), ()), group_row((2, 0, 1), (1, 0), (0, 1))],  # default + kernel
            [group_row((0, 1), (), ()), group_row((2, 1, 0), (0, 1), ())],  # three groups
        ]
    )
    # config 2: node 0's output left all -1 (the default) is unchanged; node 1's kernel
    # group gets explicit values where the reference has none: 1 change.
    np.testing.assert_array_equal(bench.changed_groups(configs, ref), [0, 1, 1, 3])
    assert bench.changed_groups(configs[:1], ref).shape == (1,)


def test_most_common_layouts_takes_each_groups_mode_and_breaks_ties_by_order():
    bench = load_bench()
    rows = [
        group_row((1, 0), (), (1, 0)),
        group_row((1, 0), (), (1, 0)),
        group_row((0, 1), (), (0, 1)),
        group_row((1, 0), (), (0, 1)),
        group_row((0, 1), (), ()),
    ]
    configs = np.array(rows)[:, None, :]  # [5 configs, 1 node, 18]
    # output: (1, 0) three times; input: all -1; kernel: (1, 0) and (0, 1) twice each,
    # the tie going to (0, 1), the smaller row in lexicographic order.
    expected = group_row((1, 0), (), (0, 1))
    np.testing.assert_array_equal(bench.most_common_layouts(configs), [expected])


def one_node_graph(runtimes: list[int]) -> LayoutGraph:
    """Node 1 (shape (8, 128), layout (1, 0)) configurable, no operands; 3 configurations."""
    feat = np.zeros((2, 140), np.float32)
    feat[1, [21, 22, 134, 135]] = [8, 128, 1, 0]
    configs = np.array(
        [
            [group_row((1, 0), (), ())],  # the reference layout: 0 changes
            [group_row((0, 1), (), ())],  # output moved: 1
            [group_row((0, 1), (0, 1), ())],  # and an input layout where none is recorded: 2
        ],
        np.int8,
    )
    return LayoutGraph(
        graph_id="g",
        node_feat=feat,
        node_opcode=np.array([1, 26], np.int32),
        edge_index=np.zeros((0, 2), np.int32),
        node_config_ids=np.array([1], np.int32),
        configs=Codebook.from_values(configs),
        config_runtime=np.array(runtimes, np.int64),
        node_splits=np.array([0, 2], np.int64),
    )


def test_rule_figures_rank_fewest_changes_first():
    bench = load_bench()
    rising = bench.rule_figures(one_node_graph([10, 20, 30]))
    assert rising["tau"] == pytest.approx(1.0)
    assert rising["slowdown_1"] == pytest.approx(0.0)
    assert rising["changed_share"] == pytest.approx(1 / 3)  # median 1 of 3 groups
    # Modes: output (0, 1), input all -1, so the counts are [1, 0, 1]: one concordant
    # pair (1 < 2), one discordant (0 < 1), one tied in the rule: tau-b 0.
    assert rising["mode_tau"] == pytest.approx(0.0, abs=1e-12)
    assert rising["mode_slowdown_1"] == pytest.approx(20 / 10 - 1)
    falling = bench.rule_figures(one_node_graph([30, 20, 10]))
    assert falling["tau"] == pytest.approx(-1.0)
    assert falling["slowdown_1"] == pytest.approx(30 / 10 - 1)
    unlabelled = bench.rule_figures(one_node_graph([0, 0, 0]))
    assert unlabelled["tau"] is None and unlabelled["slowdown_1"] is None
    summary = bench.split_summary([rising, falling, unlabelled])
    assert (summary["graphs"], summary["scored"]) == (3, 2)
    assert summary["tau"] == pytest.approx(0.0, abs=1e-12)  # mean of 1 and -1


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "layout_rule.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_bad_collection_ends_in_one_line(tmp_path):
    done = run_bench("--sets", str(ROOT / "data" / "layout_toy"), "--collections", "xla")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: --collections: 'xla'")
    assert "Traceback" not in done.stderr


def test_toy_set_run_writes_one_row_per_collection_and_split(tmp_path):
    done = run_bench(
        "--sets",
        str(ROOT / "data" / "layout_toy"),
        "--collections",
        "xla:default,nlp:random",
        "--splits",
        "valid",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "layout_rule.json").read_text())
    rows = [(r["collection"], r["split"]) for r in results["sets"]]
    assert rows == [("xla:default", "valid"), ("nlp:random", "valid")]
    assert all(r["summary"]["graphs"] == 3 == r["summary"]["scored"] for r in results["sets"])
    assert (
        "| layout_toy | xla:default | valid | 3 (3) |" in (tmp_path / "layout_rule.md").read_text()
    )
