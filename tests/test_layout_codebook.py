"""Layout configurations as per-node codebooks: exact round trips, wider codes, real files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from baselines.layout import cache as layout_cache
from baselines.layout import data
from baselines.layout.codebook import (
    Codebook,
    CodebookBuilder,
    key_rows,
    pack_codes,
    row_keys,
    unpack_codes,
)
from baselines.layout.graph import LayoutGraph

REAL = Path(__file__).resolve().parents[2] / "shared" / "real_samples" / "layout"


def distinct_rows(count: int, seed: int) -> np.ndarray:
    """int8 (count, 18): `count` different rows of values -1..5."""
    rng = np.random.default_rng(seed)
    rows = np.unique(rng.integers(-1, 6, size=(count * 2, 18), dtype=np.int8), axis=0)
    assert len(rows) >= count
    return rng.permutation(rows)[:count]


def test_keys_stand_for_rows_one_to_one():
    values = np.random.default_rng(0).integers(-1, 6, size=(500, 3, 18), dtype=np.int8)
    values[7, 1] = values[3, 2]
    keys = row_keys(values)
    assert keys.shape == (500, 3) and keys.dtype == np.uint64
    np.testing.assert_array_equal(key_rows(keys), values)
    flat = values.reshape(-1, 18)
    assert len(np.unique(keys)) == len(np.unique(flat, axis=0))


@pytest.mark.parametrize("rows, dtype", [(1, np.uint8), (256, np.uint8), (257, np.uint16)])
def test_codes_are_as_narrow_as_the_busiest_node_allows(rows, dtype):
    """A node of 257 distinct rows does not fit a byte: the codes widen, never wrap."""
    busy = distinct_rows(rows, seed=rows)
    c = 600
    pick = np.random.default_rng(1).integers(0, rows, size=c)
    pick[:rows] = np.arange(rows)  # every row used
    values = np.stack([busy[pick], np.full((c, 18), 2, np.int8)], axis=1)  # (c, 2, 18)
    book = Codebook.from_values(values)
    assert book.codes.dtype == dtype
    assert book.row_counts.tolist() == [rows, 1]
    np.testing.assert_array_equal(book.values(), values)
    assert book.rows.shape == (rows + 1, 18)


def test_a_node_of_70000_rows_gets_four_byte_codes():
    busy = distinct_rows(70_000, seed=3)
    book = Codebook.from_values(busy[:, None, :])
    assert book.codes.dtype == np.uint32
    np.testing.assert_array_equal(book.values(), busy[:, None, :])


def test_blocks_code_as_one_array_and_earlier_codes_never_change():
    """Rows first met in a later block get new codes; the codes already given stay."""
    values = np.random.default_rng(4).integers(-1, 6, size=(90, 4, 18), dtype=np.int8)
    values[:, 0] = values[0, 0]  # a node with one row throughout
    builder = CodebookBuilder(4)
    firsts = []
    for start in range(0, 90, 20):
        builder.add(values[start : start + 20])
        firsts.append(builder.blocks[0].copy())
    book = builder.finish()
    assert all(np.array_equal(f, firsts[0]) for f in firsts)
    np.testing.assert_array_equal(book.values(), values)
    assert book.row_counts[0] == 1
    # Selection is lazy and composes: indices of indices.
    picked = book.select(np.array([5, 80, 5])).select(np.array([2, 1]))
    assert picked.selected.tolist() == [5, 80]
    np.testing.assert_array_equal(picked.values(), values[[5, 80]])


def small_graph(values: np.ndarray) -> LayoutGraph:
    c, nc, _ = values.shape
    return LayoutGraph(
        graph_id="wide",
        node_feat=np.zeros((nc + 1, 140), np.float32),
        node_opcode=np.zeros(nc + 1, np.int32),
        edge_index=np.array([[nc, 0]], np.int32),
        node_config_ids=np.arange(nc, dtype=np.int32),
        configs=Codebook.from_values(values),
        config_runtime=np.arange(1, c + 1, dtype=np.int64),
        node_splits=np.array([nc + 1], np.int64),
    )


def test_the_cache_keeps_wide_codes_wide(tmp_path):
    """A graph whose node has 300 rows is cached with two-byte codes and comes back
    equal; its neighbour in the same cache keeps one-byte codes."""
    wide = distinct_rows(300, seed=5)
    values = np.stack([wide, wide[::-1]], axis=1)  # (300, 2, 18)
    narrow = np.random.default_rng(6).integers(-1, 1, size=(5, 3, 18), dtype=np.int8)
    graphs = [small_graph(values), small_graph(narrow)]
    target = tmp_path / "cache"
    layout_cache.save_layout_cache(graphs, target, "train")
    back, problem = layout_cache.check_layout_cache(target)
    assert problem is None
    assert [g.configs.codes.dtype for g in back] == [np.uint16, np.uint8]
    for got, want in zip(back, [values, narrow], strict=True):
        np.testing.assert_array_equal(got.config_block(np.arange(got.num_configs)), want)


@pytest.mark.parametrize("nc", [0, 1, 2, 5])
def test_packed_codes_are_two_per_byte_low_node_first(nc):
    codes = np.random.default_rng(nc).integers(0, 16, size=(7, nc), dtype=np.uint8)
    packed = pack_codes(codes)
    assert packed.shape == (7, (nc + 1) // 2) and packed.dtype == np.uint8
    for j in range(nc):  # node j's code, written out bit by bit
        want = (packed[:, j // 2].astype(int) >> (4 * (j % 2))) & 15
        np.testing.assert_array_equal(codes[:, j], want)
    np.testing.assert_array_equal(unpack_codes(packed, nc), codes)


@pytest.mark.parametrize("rows, packed", [(16, True), (17, False)])
def test_the_cache_packs_codes_only_where_every_node_has_at_most_16_rows(tmp_path, rows, packed):
    """Two codes per byte fit nodes of up to 16 rows; 17 rows keep a byte per code. Either
    way the configurations come back equal, whole and selected, for an odd node count."""
    busy = distinct_rows(rows, seed=rows)
    c = 40
    pick = np.random.default_rng(2).integers(0, rows, size=c)
    pick[:rows] = np.arange(rows)
    two = distinct_rows(2, seed=99)  # the other two nodes have two rows each
    other = two[np.random.default_rng(3).integers(0, 2, size=(c, 2))]
    values = np.concatenate([busy[pick][:, None], other], axis=1)  # (c, 3, 18)
    target = tmp_path / "cache"
    layout_cache.save_layout_cache([small_graph(values)], target, "train")
    (back,), problem = layout_cache.check_layout_cache(target)
    assert problem is None and back.configs.packed == packed
    width = 2 if packed else 3  # bytes per configuration
    assert back.configs.codes.shape == (c, width)
    np.testing.assert_array_equal(back.config_block(np.arange(c)), values)
    some = np.array([39, 0, 17, 17])
    np.testing.assert_array_equal(back.configs.select(some).values(), values[some])


def test_the_cache_keeps_each_graphs_distinct_feature_rows_once(tmp_path):
    graph = small_graph(np.zeros((2, 5, 18), np.int8))
    feat = np.zeros((6, 140), np.float32)
    feat[1, 3] = feat[4, 3] = 2.5
    feat[5, 0] = -0.0  # a different bit pattern from 0.0: kept apart
    feat[2, 139] = 7.0
    graph = dataclasses.replace(graph, node_feat=feat)
    target = tmp_path / "cache"
    layout_cache.save_layout_cache([graph], target, "train")
    (back,), problem = layout_cache.check_layout_cache(target)
    assert problem is None
    np.testing.assert_array_equal(back.node_feat, feat)
    assert np.signbit(back.node_feat[5, 0])
    assert np.load(target / "node_feat_rows.npy").shape == (4, 140)
    index = np.load(target / "node_feat_index.npy")
    np.testing.assert_array_equal(index[[1, 4, 0, 3]], [2, 2, 0, 0])


@pytest.mark.parametrize(
    "path", sorted(REAL.rglob("*.npz")) if REAL.is_dir() else [], ids=lambda p: p.stem[:12]
)
def test_real_files_read_as_codebooks_of_their_exact_values(path, monkeypatch):
    """Each real file, read a few configurations per block, gives back its own
    node_config_feat value for value, each node's distinct rows once."""
    monkeypatch.setattr(data, "_BLOCK_VALUES", 1 << 18)  # blocks of 17 to 260 configurations
    graph = data.read_layout_file(path)
    dense = np.load(path)["node_config_feat"]
    np.testing.assert_array_equal(graph.config_block(np.arange(graph.num_configs)), dense)
    distinct = [len(np.unique(dense[:, j], axis=0)) for j in range(dense.shape[1])]
    assert graph.configs.row_counts.tolist() == distinct
    assert graph.configs.codes.dtype == np.uint8
    assert graph.configs.codes.nbytes * 18 == dense.size  # a byte where 18 values were


def test_real_samples_are_present_or_the_codebook_tests_say_so():
    if not REAL.is_dir():
        pytest.skip(f"{REAL} is absent: the real-file codebook tests do not run")
    assert sorted(REAL.rglob("*.npz"))
