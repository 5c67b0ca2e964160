"""Layout data layer: reading and refusing files, config dedup/sampling, pruning, metrics.

Every expectation here is computed independently of the code under test: by hand
on small drawn graphs, by brute-force loops, or straight from the npz arrays.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import REAL_SAMPLES

from baselines.core.errors import PipelineError
from baselines.layout import data, metrics
from baselines.layout.codebook import Codebook
from baselines.layout.data import (
    LayoutGraph,
    dedup_configs,
    layout_minor_to_major,
    load_layout_split,
    read_layout_file,
    sample_configs,
)
from baselines.layout.metrics import kendall_tau, slowdown_at_k
from baselines.layout.prune import count_configs, prune_to_configurable

# ---------------------------------------------------------------------------
# A hand-made graph. Arrows go producer -> consumer; * marks configurable nodes.
#
#   computation 0 (nodes 0-4)        computation 1 (nodes 5-9)
#
#   0 -> 1 -> 2* -> 3 -> 4 -> 8
#              \
#               `---------------> 7
#                                 ^
#                       5 -> 6* --'          9 (isolated)
#
# edge_index rows are [consumer, producer], as in the files.
EDGES = [(1, 0), (2, 1), (3, 2), (4, 3), (7, 2), (7, 6), (6, 5), (8, 4)]
CONFIG_IDS = [6, 2]  # deliberately not sorted: renumbering must keep this order
N_NODES = 10
SPLITS = [0, 5, 10]

# Hop distance from {2, 6}, undirected, read off the drawing:
#   0: 2, 6   1: 1, 3, 7, 5   2: 0, 4   3: 8   never: 9
KEPT_BY_HOPS = {
    0: [2, 6],
    1: [1, 2, 3, 5, 6, 7],
    2: [0, 1, 2, 3, 4, 5, 6, 7],
    3: [0, 1, 2, 3, 4, 5, 6, 7, 8],
    50: [0, 1, 2, 3, 4, 5, 6, 7, 8],
}
EDGES_BY_HOPS = {
    0: [],
    1: [(2, 1), (3, 2), (7, 2), (7, 6), (6, 5)],
    2: [(1, 0), (2, 1), (3, 2), (4, 3), (7, 2), (7, 6), (6, 5)],
    3: EDGES,
    50: EDGES,
}
# A split boundary becomes the number of kept nodes below it.
SPLITS_BY_HOPS = {0: [0, 1, 2], 1: [0, 3, 6], 2: [0, 5, 8], 3: [0, 5, 9], 50: [0, 5, 9]}


def graph_arrays(c: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    """The drawn graph as npz arrays with the real files' dtypes (edge_index int64, ...)."""
    rng = np.random.default_rng(seed)
    # Row i is all i + column/1000: every node's row is unique and tells its id.
    node_feat = np.arange(N_NODES, dtype=np.float32)[:, None] + np.arange(140) / 1000
    return {
        "node_feat": node_feat.astype(np.float32),
        "node_opcode": np.array([2, 3, 26, 5, 6, 7, 75, 9, 10, 11], dtype=np.uint8),
        "edge_index": np.array(EDGES, dtype=np.int64),
        "node_config_ids": np.array(CONFIG_IDS, dtype=np.int64),
        "node_config_feat": rng.integers(-1, 6, size=(c, len(CONFIG_IDS), 18)).astype(np.float32),
        "config_runtime": rng.integers(1_000, 2_000, size=c).astype(np.int64),
        "node_splits": np.array([SPLITS], dtype=np.int64),
    }


def make_graph(arrays: dict[str, np.ndarray] | None = None, graph_id: str = "g") -> LayoutGraph:
    a = arrays or graph_arrays()
    return LayoutGraph(
        graph_id=graph_id,
        node_feat=a["node_feat"],
        node_opcode=a["node_opcode"].astype(np.int32),
        edge_index=a["edge_index"].astype(np.int32),
        node_config_ids=a["node_config_ids"].astype(np.int32),
        configs=Codebook.from_values(a["node_config_feat"].astype(np.int8)),
        config_runtime=a["config_runtime"],
        node_splits=a["node_splits"].reshape(-1),
    )


# ---------------------------------------------------------------------------
# Pruning.


@pytest.mark.parametrize("hops", sorted(KEPT_BY_HOPS))
def test_prune_keeps_the_drawn_nodes_and_edges(hops):
    graph = make_graph()
    pruned, kept = prune_to_configurable(graph, hops)
    assert kept.tolist() == KEPT_BY_HOPS[hops]
    assert pruned.num_nodes == len(KEPT_BY_HOPS[hops])
    # Each kept node carries its own row (row i starts with i) and opcode.
    assert pruned.node_feat[:, 0].tolist() == KEPT_BY_HOPS[hops]
    assert np.array_equal(pruned.node_opcode, graph.node_opcode[KEPT_BY_HOPS[hops]])
    # Edges, mapped back to original ids, are exactly the drawn survivors, direction kept.
    back = [tuple(kept[e].tolist()) for e in pruned.edge_index]
    assert sorted(back) == sorted(EDGES_BY_HOPS[hops])
    assert pruned.edge_index.dtype == np.int32
    assert pruned.edge_index.shape == (len(EDGES_BY_HOPS[hops]), 2)
    # Renumbered config ids point at the same original nodes, in the same order.
    assert kept[pruned.node_config_ids].tolist() == CONFIG_IDS
    assert np.array_equal(pruned.node_feat[pruned.node_config_ids], graph.node_feat[CONFIG_IDS])
    assert pruned.node_splits.tolist() == SPLITS_BY_HOPS[hops]
    # Configurations are untouched.
    assert pruned.configs is graph.configs
    assert pruned.config_runtime is graph.config_runtime


@pytest.mark.parametrize("hops", [-1, 1.5, True])
def test_prune_refuses_bad_hops(hops):
    with pytest.raises(PipelineError, match="hops"):
        prune_to_configurable(make_graph(), hops)


# ---------------------------------------------------------------------------
# Configurations: dedup and sampling.


def test_dedup_keeps_first_occurrences_in_file_order():
    arrays = graph_arrays(c=6)
    a, b, c = (np.full((2, 18), v, np.float32) for v in (-1, 0, 3))
    b[1, 5] = 4  # rows differing in one value are different configurations
    arrays["node_config_feat"] = np.stack([a, b, a, c, b, a])
    arrays["config_runtime"] = np.array([10, 20, 11, 30, 21, 12], np.int64)
    original = make_graph(arrays)
    graph, dropped = dedup_configs(original)
    assert dropped == 3
    assert graph.config_runtime.tolist() == [10, 20, 30]
    kept = graph.config_block(np.arange(graph.num_configs))
    assert np.array_equal(kept, np.stack([a, b, c]).astype(np.int8))
    assert kept.dtype == np.int8
    # A selection keeps the codebook and the indices of the chosen configurations.
    assert graph.configs.codes is original.configs.codes
    assert graph.configs.selected.tolist() == [0, 1, 3]


def test_dedup_without_duplicates_changes_nothing():
    arrays = graph_arrays(c=5)
    for i in range(5):
        arrays["node_config_feat"][i] = -1
        arrays["node_config_feat"][i, 0, 0] = i  # all distinct
    graph = make_graph(arrays)
    same, dropped = dedup_configs(graph)
    assert dropped == 0
    assert np.array_equal(same.node_config_feat, graph.node_config_feat)
    assert np.array_equal(same.config_runtime, graph.config_runtime)


def test_dedup_with_no_configurable_node_keeps_one_configuration():
    arrays = graph_arrays(c=3)
    arrays["node_config_ids"] = np.zeros(0, np.int64)
    arrays["node_config_feat"] = np.zeros((3, 0, 18), np.float32)
    graph, dropped = dedup_configs(make_graph(arrays))
    assert dropped == 2 and graph.config_runtime.tolist() == arrays["config_runtime"][:1].tolist()


def brute_force_counts(feat: np.ndarray) -> list[int]:
    """How many rows of `feat` [c, nc, 18] equal each row, by comparing every pair."""
    return [sum(np.array_equal(row, other) for other in feat) for row in feat]


def test_count_configs_counts_each_configurations_repeats_in_the_file():
    arrays = graph_arrays(c=6)
    a, b, c = (np.full((2, 18), v, np.float32) for v in (-1, 0, 3))
    b[1, 5] = 4  # rows differing in one value are different configurations
    arrays["node_config_feat"] = np.stack([a, b, a, c, b, a])
    counted = count_configs(make_graph(arrays))
    assert counted.config_count.tolist() == [3, 2, 3, 1, 2, 3]
    # The counts travel with the configurations a selection keeps, dedup's among them.
    deduped, _ = dedup_configs(counted)
    assert deduped.config_count.tolist() == [3, 2, 1]
    assert counted.select_configs(np.array([3, 0])).config_count.tolist() == [1, 3]
    random = graph_arrays(c=40, seed=5)
    random["node_config_feat"] = np.full((40, 2, 18), -1, np.float32)
    random["node_config_feat"][::3, 1, 7] = np.arange(14) % 4  # some rows repeat, some do not
    counted = count_configs(make_graph(random))
    assert counted.config_count.tolist() == brute_force_counts(random["node_config_feat"])


def test_count_configs_without_configurable_nodes_counts_every_configuration():
    arrays = graph_arrays(c=3)
    arrays["node_config_ids"] = np.zeros(0, np.int64)
    arrays["node_config_feat"] = np.zeros((3, 0, 18), np.float32)
    assert count_configs(make_graph(arrays)).config_count.tolist() == [3, 3, 3]


def distinct_graph(c: int, graph_id: str = "g") -> LayoutGraph:
    """c configurations whose runtime is their file position (1000 + index)."""
    arrays = graph_arrays(c=c, seed=3)
    arrays["config_runtime"] = 1000 + np.arange(c, dtype=np.int64)
    return make_graph(arrays, graph_id)


def test_sample_configs_is_a_deterministic_ordered_subset():
    graph = distinct_graph(50)
    first = sample_configs(graph, 10, seed=0)
    again = sample_configs(graph, 10, seed=0)
    other_seed = sample_configs(graph, 10, seed=1)
    other_graph = sample_configs(distinct_graph(50, graph_id="h"), 10, seed=0)
    picked = first.config_runtime - 1000
    assert np.array_equal(first.config_runtime, again.config_runtime)
    assert not np.array_equal(first.config_runtime, other_seed.config_runtime)
    assert not np.array_equal(first.config_runtime, other_graph.config_runtime)
    for sample in (first, other_seed, other_graph):
        idx = sample.config_runtime - 1000
        assert len(idx) == 10 and len(set(idx.tolist())) == 10
        assert np.all(np.diff(idx) > 0)  # file order
        assert np.all((idx >= 0) & (idx < 50))  # a subset
    # The features travel with their runtimes.
    assert np.array_equal(first.config_block(np.arange(10)), graph.node_config_feat[picked])


@pytest.mark.parametrize("max_configs", [1, 7, 49, 50, 80])
def test_sample_configs_never_exceeds_max(max_configs):
    graph = distinct_graph(50)
    sample = sample_configs(graph, max_configs, seed=4)
    assert sample.num_configs == min(max_configs, 50)
    if max_configs >= 50:
        assert np.array_equal(sample.config_runtime, graph.config_runtime)


@pytest.mark.parametrize("max_configs", [0, -3])
def test_sample_configs_refuses_max_below_one(max_configs):
    with pytest.raises(PipelineError, match="max_configs"):
        sample_configs(distinct_graph(5), max_configs, seed=0)


# ---------------------------------------------------------------------------
# Metrics.


def brute_tau_b(x, y) -> float:
    """Textbook tau-b: (C - D) / sqrt((P - Tx) * (P - Ty)), one pair at a time."""
    concordant = discordant = tied_x = tied_y = pairs = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        pairs += 1
        dx = (x[i] > x[j]) - (x[i] < x[j])
        dy = (y[i] > y[j]) - (y[i] < y[j])
        if dx == 0:
            tied_x += 1
        if dy == 0:
            tied_y += 1
        if dx and dy:
            if dx == dy:
                concordant += 1
            else:
                discordant += 1
    return (concordant - discordant) / math.sqrt((pairs - tied_x) * (pairs - tied_y))


@pytest.mark.parametrize("seed", range(6))
def test_kendall_tau_matches_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(2, 60))
    pred = rng.integers(0, 6, c) / 4.0  # many ties
    runtime = rng.integers(10**9, 10**9 + 8, c)  # int64, many ties, large values
    if len(set(pred.tolist())) < 2 or len(set(runtime.tolist())) < 2:
        pred[0], pred[-1], runtime[0], runtime[-1] = 0.0, 1.0, 10**9, 10**9 + 9
    expected = brute_tau_b(pred.tolist(), runtime.tolist())
    assert abs(kendall_tau(pred, runtime) - expected) <= 1e-12


def test_kendall_tau_in_small_blocks_matches_brute_force(monkeypatch):
    rng = np.random.default_rng(11)
    pred = rng.normal(size=45).astype(np.float32)
    pred[::7] = pred[0]
    runtime = rng.integers(1, 5, 45).astype(np.int64)
    monkeypatch.setattr(metrics, "_BLOCK_ELEMENTS", 7)  # blocks of one row
    expected = brute_tau_b(pred.astype(np.float64).tolist(), runtime.tolist())
    assert abs(kendall_tau(pred, runtime) - expected) <= 1e-12


def test_kendall_tau_ordered_reversed_and_undefined():
    runtime = np.array([5, 3, 3, 9, 1, 7, 7, 7], np.int64)
    assert kendall_tau(runtime * 0.5 + 2, runtime) == 1.0  # same order, same ties
    assert kendall_tau(-runtime.astype(np.float64), runtime) == -1.0
    assert kendall_tau(np.arange(8.0), np.arange(8)) == 1.0
    assert math.isnan(kendall_tau(np.ones(8), runtime))  # constant prediction
    assert math.isnan(kendall_tau(np.ones(1), np.ones(1, np.int64)))
    with pytest.raises(PipelineError, match="shape"):
        kendall_tau(np.ones(3), np.ones(4))
    with pytest.raises(PipelineError, match="NaN"):
        kendall_tau(np.array([0.0, np.nan]), np.array([1, 2]))


def test_slowdown_at_k_hand_example():
    runtime = np.array([5, 3, 8, 4, 10], np.int64)  # true best: 3 (index 1)
    pred = np.array([0.1, 0.9, 0.2, 0.5, 0.3])  # predicted order: 0, 2, 4, 3, 1
    expected = {1: 5 / 3 - 1, 2: 5 / 3 - 1, 3: 5 / 3 - 1, 4: 4 / 3 - 1, 5: 0.0, 9: 0.0}
    for k, want in expected.items():
        assert slowdown_at_k(pred, runtime, k) == pytest.approx(want, abs=1e-15)
    # Equal scores: file order decides, so index 0 (runtime 5) comes before index 1.
    assert slowdown_at_k(np.zeros(5), runtime, 1) == pytest.approx(5 / 3 - 1, abs=1e-15)
    with pytest.raises(PipelineError, match="positive"):
        slowdown_at_k(pred, np.zeros(5, np.int64), 1)
    with pytest.raises(PipelineError, match="k must"):
        slowdown_at_k(pred, runtime, 0)


# ---------------------------------------------------------------------------
# Reading files, good and bad.


def write(tmp_path: Path, arrays: dict[str, np.ndarray], name: str = "prog.npz") -> Path:
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


def test_read_layout_file_returns_the_arrays_in_canonical_dtypes(tmp_path):
    arrays = graph_arrays(c=7)
    # The real files store edge_index in Fortran order.
    arrays["edge_index"] = np.asfortranarray(arrays["edge_index"])
    graph = read_layout_file(write(tmp_path, arrays, "my_prog.npz"))
    assert graph.graph_id == "my_prog"
    dtypes = {
        "node_feat": np.float32,
        "node_opcode": np.int32,
        "edge_index": np.int32,
        "node_config_ids": np.int32,
        "node_config_feat": np.int8,
        "config_runtime": np.int64,
        "node_splits": np.int64,
    }
    for key, dtype in dtypes.items():
        value = getattr(graph, key)
        assert value.dtype == dtype, key
        expected = arrays[key].reshape(-1) if key == "node_splits" else arrays[key]
        assert np.array_equal(value, expected), key
    assert graph.edge_index.flags.c_contiguous
    assert graph.has_labels


def test_config_feat_read_in_blocks_and_in_fortran_order(tmp_path, monkeypatch):
    arrays = graph_arrays(c=9, seed=5)
    monkeypatch.setattr(data, "_BLOCK_VALUES", 2 * 18 * 2)  # two configurations a block
    assert np.array_equal(
        read_layout_file(write(tmp_path, arrays, "c.npz")).node_config_feat,
        arrays["node_config_feat"],
    )
    arrays["node_config_feat"] = np.asfortranarray(arrays["node_config_feat"])
    assert np.array_equal(
        read_layout_file(write(tmp_path, arrays, "f.npz")).node_config_feat,
        arrays["node_config_feat"],
    )
    arrays["node_config_feat"] = np.ascontiguousarray(arrays["node_config_feat"])
    arrays["node_config_feat"][7, 1, 13] = 6  # in the fourth block
    with pytest.raises(PipelineError, match="configuration 7, configurable node 1, column 13"):
        read_layout_file(write(tmp_path, arrays, "late.npz"))


def _set(key, value_fn):
    def change(arrays):
        arrays[key] = value_fn(arrays)

    return change


def _poke(key, index, value):
    def change(arrays):
        arrays[key][index] = value

    return change


BAD_FILES = {
    "config_id_out_of_range": (
        _set("node_config_ids", lambda a: np.array([6, 10], np.int64)),
        "node_config_ids refers to node 10, outside 0..9",
    ),
    "config_id_negative": (
        _set("node_config_ids", lambda a: np.array([-1, 2], np.int64)),
        "node_config_ids refers to node -1",
    ),
    "config_id_repeated": (
        _set("node_config_ids", lambda a: np.array([2, 2], np.int64)),
        "more than once",
    ),
    "config_feat_too_many_nodes": (
        _set("node_config_feat", lambda a: np.zeros((4, 3, 18), np.float32)),
        "node_config_feat has shape (4, 3, 18), expected (4, 2, 18)",
    ),
    "config_feat_too_few_configs": (
        _set("node_config_feat", lambda a: np.zeros((3, 2, 18), np.float32)),
        "node_config_feat has shape (3, 2, 18), expected (4, 2, 18)",
    ),
    "config_feat_17_columns": (
        _set("node_config_feat", lambda a: np.zeros((4, 2, 17), np.float32)),
        "node_config_feat has shape (4, 2, 17)",
    ),
    "config_value_6": (_poke("node_config_feat", (2, 0, 4), 6), "holds 6.0 at configuration 2"),
    "config_value_minus_2": (
        _poke("node_config_feat", (0, 1, 0), -2),
        "holds -2.0 at configuration 0, configurable node 1, column 0",
    ),
    "config_value_fraction": (_poke("node_config_feat", (3, 1, 17), 0.5), "holds 0.5"),
    "config_value_nan": (_poke("node_config_feat", (1, 0, 0), np.nan), "holds nan"),
    "node_feat_nan": (_poke("node_feat", (3, 7), np.inf), "node_feat contains NaN or inf"),
    "node_feat_139_columns": (
        _set("node_feat", lambda a: a["node_feat"][:, :139]),
        "node_feat has shape (10, 139), expected (n, 140)",
    ),
    "edge_out_of_range": (_poke("edge_index", (2, 1), 10), "edge_index refers to node 10"),
    "negative_runtime": (_poke("config_runtime", 1, -5), "config_runtime has negative values"),
    "runtime_floats": (
        _set("config_runtime", lambda a: a["config_runtime"].astype(np.float64)),
        "config_runtime has dtype float64, expected integers",
    ),
    "opcode_shape": (
        _set("node_opcode", lambda a: a["node_opcode"][:9]),
        "node_opcode has shape (9,)",
    ),
    "splits_past_end": (
        _set("node_splits", lambda a: np.array([[0, 5, 11]], np.int64)),
        "node_splits must be non-decreasing",
    ),
    "missing_key": (lambda a: a.pop("node_splits"), "missing key(s) node_splits"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file_is_refused_in_one_line(tmp_path, case):
    change, problem = BAD_FILES[case]
    arrays = graph_arrays(c=4)
    change(arrays)
    path = write(tmp_path, arrays, f"{case}.npz")
    with pytest.raises(PipelineError) as info:
        read_layout_file(path)
    message = str(info.value)
    assert f"{case}.npz" in message
    assert problem in message
    assert "re-download" in message
    assert "\n" not in message


def test_unreadable_and_missing_files_are_refused(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not a zip file at all")
    with pytest.raises(PipelineError, match=r"garbage\.npz: not a readable npz file"):
        read_layout_file(garbage)
    with pytest.raises(PipelineError, match=r"absent\.npz: layout file not found"):
        read_layout_file(tmp_path / "absent.npz")


def test_missing_and_empty_folders_are_refused(tmp_path):
    missing = tmp_path / "layout" / "xla" / "default" / "train"
    with pytest.raises(PipelineError) as info:
        load_layout_split(missing)
    message = str(info.value)
    assert str(missing) in message and "does not exist" in message
    assert "layout/{xla,nlp}/{default,random}/{train,valid,test}" in message
    missing.mkdir(parents=True)
    with pytest.raises(PipelineError, match="no .npz files"):
        load_layout_split(missing)
    misspelt = tmp_path / "layout" / "xla" / "defualt" / "train"
    with pytest.raises(PipelineError, match="'defualt' is not default/random"):
        load_layout_split(misspelt)


def test_load_layout_split_sorted_deduped_sampled(tmp_path):
    folder = tmp_path / "layout" / "nlp" / "random" / "valid"
    folder.mkdir(parents=True)
    for name, seed in (("b", 1), ("a", 2), ("c", 3)):
        arrays = graph_arrays(c=12, seed=seed)
        arrays["node_config_feat"][5] = arrays["node_config_feat"][1]  # one repeat each
        write(folder, arrays, f"{name}.npz")
    (folder / "notes.txt").write_text("not a graph")
    lines = []
    graphs = load_layout_split(
        folder, max_configs=8, seed=0, drop_duplicates=True, log=lines.append
    )
    assert [g.graph_id for g in graphs] == ["a", "b", "c"]
    assert all(g.num_configs == 8 for g in graphs)
    assert len(lines) == 1
    assert "dropped 3 duplicate configurations in 3 graphs" in lines[0]
    assert "sampled 8 configurations in 3 graphs" in lines[0]
    # Counted as read, before the repeat was dropped: the repeated configuration says 2.
    for graph in graphs:
        arrays = graph_arrays(c=12, seed={"b": 1, "a": 2, "c": 3}[graph.graph_id])
        repeated = arrays["node_config_feat"][1].astype(np.int8)
        kept = graph.config_block(np.arange(graph.num_configs))
        expected = [2 if np.array_equal(row, repeated) else 1 for row in kept]
        assert graph.config_count.tolist() == expected
    assert any(2 in graph.config_count.tolist() for graph in graphs)
    plain = load_layout_split(folder, max_files=2, log=lines.append)
    assert [g.num_configs for g in plain] == [12, 12] and len(lines) == 1


# ---------------------------------------------------------------------------
# The real layout samples.


def layout_samples_root() -> Path | None:
    """`<repo>/../shared/real_samples`, else `$TPUGRAPHS_SHARED/real_samples`."""
    candidates = [REAL_SAMPLES]
    if os.environ.get("TPUGRAPHS_SHARED"):
        candidates.append(Path(os.environ["TPUGRAPHS_SHARED"]) / "real_samples")
    for root in candidates:
        if (root / "layout").is_dir():
            return root
    return None


@pytest.fixture(scope="module")
def real_layout_files() -> list[Path]:
    root = layout_samples_root()
    if root is None:
        pytest.skip(
            f"real layout samples not found at {REAL_SAMPLES / 'layout'} "
            "nor under $TPUGRAPHS_SHARED/real_samples/layout"
        )
    files = sorted((root / "layout").glob("*/*/*/*.npz"))
    collections = {f.parts[-4] + ":" + f.parts[-3] for f in files}
    assert collections == {"xla:default", "xla:random", "nlp:default", "nlp:random"}
    return files


def test_real_layout_files_load_exactly(real_layout_files):
    for path in real_layout_files:
        graph = read_layout_file(path)
        with np.load(path) as raw:
            assert graph.node_config_feat.dtype == np.int8
            assert np.array_equal(
                graph.node_config_feat.astype(np.float32), raw["node_config_feat"]
            )
            for key in ("node_feat", "node_opcode", "edge_index", "node_config_ids"):
                assert np.array_equal(getattr(graph, key), raw[key]), (path, key)
            assert np.array_equal(graph.config_runtime, raw["config_runtime"])
            assert np.array_equal(graph.node_splits, raw["node_splits"].reshape(-1))
        split = path.parts[-2]
        if split == "test":
            assert not graph.config_runtime.any() and not graph.has_labels, path
        else:
            assert graph.config_runtime.min() > 0, path


def test_minor_to_major_keeps_dimension_0_apart_from_padding():
    # Three nodes: a rank-2 tensor [128, 8] stored {0, 1} (dimension 0 most minor),
    # a rank-3 tensor stored {2, 0, 1}, and a scalar (rank 0, no layout at all).
    feat = np.zeros((3, 140), np.float32)
    feat[0, 21:23], feat[0, 134:136] = (128, 8), (0, 1)
    feat[1, 21:24], feat[1, 134:137] = (4, 16, 32), (2, 0, 1)
    expected = np.array(
        [[0, 1, -1, -1, -1, -1], [2, 0, 1, -1, -1, -1], [-1, -1, -1, -1, -1, -1]], np.float32
    )
    assert np.array_equal(layout_minor_to_major(feat), expected)


def test_real_minor_to_major_padding_is_minus_one(real_layout_files):
    for path in real_layout_files:
        with np.load(path) as raw:
            feat = raw["node_feat"]
        m2m = layout_minor_to_major(feat)
        assert m2m.shape == (len(feat), 6)
        ranks = (feat[:, 21:27] != 0).sum(axis=1)
        for r in np.unique(ranks):
            rows = ranks == r
            data_part, padding = m2m[rows, :r], m2m[rows, r:]
            assert np.array_equal(
                np.sort(data_part, axis=1), np.tile(np.arange(r), (rows.sum(), 1))
            )
            assert np.array_equal(data_part, feat[rows, 134 : 134 + r])
            assert np.all(padding == -1)


def test_real_dedup_counts_match_numpy_unique(real_layout_files):
    for path in real_layout_files:
        graph = read_layout_file(path)
        with np.load(path) as raw:
            flat = raw["node_config_feat"].reshape(graph.num_configs, -1)
        distinct, first = np.unique(flat, axis=0, return_index=True)
        deduped, dropped = dedup_configs(graph)
        assert dropped == graph.num_configs - len(distinct), path
        assert np.array_equal(deduped.config_runtime, graph.config_runtime[np.sort(first)])


def test_real_prune_matches_breadth_first_search(real_layout_files):
    for path in real_layout_files:
        graph = read_layout_file(path)
        neighbours: dict[int, set[int]] = {}
        for u, v in graph.edge_index.tolist():
            neighbours.setdefault(u, set()).add(v)
            neighbours.setdefault(v, set()).add(u)
        kept = set(graph.node_config_ids.tolist())
        frontier = set(kept)
        for hops in range(3):
            pruned, kept_ids = prune_to_configurable(graph, hops)
            assert kept_ids.tolist() == sorted(kept), (path, hops)
            expected_edges = sum(u in kept and v in kept for u, v in graph.edge_index.tolist())
            assert pruned.num_edges == expected_edges
            assert np.array_equal(
                pruned.node_feat[pruned.node_config_ids], graph.node_feat[graph.node_config_ids]
            )
            frontier = {w for node in frontier for w in neighbours.get(node, ())} - kept
            kept |= frontier


def test_layout_code_never_imports_tile_code():
    # What both collections need lives in baselines/core; an import of
    # baselines.tiles from layout code would tie the layout pipeline to tile internals.
    import ast

    layout_root = Path(__file__).resolve().parents[1] / "baselines" / "layout"
    offenders = []
    for path in sorted(layout_root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("baselines.tiles")]
    assert not offenders, offenders
