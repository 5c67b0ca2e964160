"""The layout split cache: the same graphs as the files, memory-mapped int8, keyed by the
files' content, verified on load, rebuilt when damaged, invisible to a run's identity.

Expectations come from reading the npz files without any cache (the reader the
rest of the layout tests check against the files' bytes).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import read_run_file as _read_run
from conftest import run_repo_script as _run
from test_layout_data import graph_arrays, write

from baselines.core import array_cache
from baselines.core.errors import PipelineError
from baselines.core.keras_fit import EpochBatches
from baselines.layout import cache as layout_cache
from baselines.layout import data, prune
from baselines.layout.batching import (
    batch_source,
    prepare_graph,
    prepare_graphs,
    segment_source,
)
from baselines.layout.codebook import Codebook, read_rows
from baselines.layout.graph import LayoutGraph
from baselines.layout.layout_args import LayoutTrainArgs
from baselines.layout.models import LayoutSAGE
from baselines.layout.prune import prune_to_configurable
from baselines.layout.run_data import load_run_split
from baselines.layout.scoring import GraphScorer

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "data" / "layout_toy"
# Compared as stored; the configurations are compared as selected (config_block), since
# a cached graph selects rows of its memory map where one read into memory holds them.
ARRAYS = [f.name for f in dataclasses.fields(LayoutGraph) if f.name not in ("graph_id", "configs")]


def make_split(tmp_path: Path) -> Path:
    """The toy xla:default train files, plus a graph with repeated configurations and
    one with no configurable node (its configurations hold no rows)."""
    folder = tmp_path / "layout" / "xla" / "default" / "train"
    shutil.copytree(TOY / "xla" / "default" / "train", folder)
    repeats = graph_arrays(c=12, seed=5)
    repeats["node_config_feat"][[4, 7, 9]] = repeats["node_config_feat"][1]
    write(folder, repeats, "hand_repeats.npz")
    none = graph_arrays(c=3, seed=6)
    none["node_config_ids"] = np.zeros(0, np.int64)
    none["node_config_feat"] = np.zeros((3, 0, 18), np.float32)
    write(folder, none, "hand_unconfigurable.npz")
    return folder


def assert_same_graphs(got: list[LayoutGraph], want: list[LayoutGraph]) -> None:
    assert [g.graph_id for g in got] == [g.graph_id for g in want]
    for a, b in zip(got, want, strict=True):
        for field in ARRAYS:
            x, y = getattr(a, field), getattr(b, field)
            if x is None or y is None:  # config_count: made when a split is loaded
                assert x is None and y is None, (a.graph_id, field)
                continue
            assert (x.dtype, x.shape) == (y.dtype, y.shape), (a.graph_id, field)
            np.testing.assert_array_equal(x, y, f"{a.graph_id}: {field}")
        x, y = (g.config_block(np.arange(g.num_configs)) for g in (a, b))
        assert (x.dtype, x.shape) == (y.dtype, y.shape), (a.graph_id, "configurations")
        np.testing.assert_array_equal(x, y, f"{a.graph_id}: configurations")


def only_folder(cache: Path) -> Path:
    (folder,) = [p for p in cache.iterdir() if ".tmp-" not in p.name]
    return folder


def test_cached_split_equals_a_fresh_read_with_its_codes_memory_mapped(tmp_path):
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    fresh = data.load_layout_split(folder, log=None)
    cold = data.load_layout_split(folder, log=None, cache_dir=cache)
    warm = data.load_layout_split(folder, log=None, cache_dir=cache)
    assert_same_graphs(cold, fresh)
    assert_same_graphs(warm, fresh)
    for graph in warm:
        assert graph.configs.codes.dtype == np.uint8  # the toy graphs' nodes have few rows
        if graph.configs.codes.size:  # numpy gives an empty slice as a plain array
            assert _reads_the_cache_file(graph.configs.codes), graph.graph_id
    # On disk, plus a small header: each node's distinct rows once, and per
    # configuration and configurable node half a byte where no node of the graph has
    # more than 16 distinct rows, else a byte (18 values were 18).
    most = [
        max((len(np.unique(g.node_config_feat[:, j], axis=0)) for j in range(g.num_configurable)),
            default=1)
        for g in fresh
    ]  # fmt: skip
    assert min(most) <= 16 < max(most)  # both kinds
    codes = sum(
        g.num_configs * ((g.num_configurable + 1) // 2 if m <= 16 else g.num_configurable)
        for g, m in zip(fresh, most, strict=True)
    )
    assert [g.configs.packed for g in warm] == [m <= 16 for m in most]
    size = (only_folder(cache) / "config_codes.npy").stat().st_size
    assert codes <= size < codes + 4096
    distinct = sum(
        len(np.unique(g.node_config_feat[:, j], axis=0))
        for g in fresh
        for j in range(g.num_configurable)
    )
    size = (only_folder(cache) / "codebook_rows.npy").stat().st_size
    assert 18 * distinct <= size < 18 * distinct + 4096
    # Node features: each graph's distinct rows once (4 bytes per value), 4 bytes per node.
    feat_rows = sum(len(np.unique(g.node_feat, axis=0)) for g in fresh)
    size = (only_folder(cache) / "node_feat_rows.npy").stat().st_size
    assert 4 * 140 * feat_rows <= size < 4 * 140 * feat_rows + 4096
    nodes = sum(g.num_nodes for g in fresh)
    assert sum(g.node_feat.shape[0] for g in fresh) == nodes
    size = (only_folder(cache) / "node_feat_index.npy").stat().st_size
    assert 4 * nodes <= size < 4 * nodes + 4096


def test_second_load_does_not_read_the_files(tmp_path, monkeypatch):
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    fresh = data.load_layout_split(folder, log=None)
    reads = []
    real = data.read_layout_file
    monkeypatch.setattr(data, "read_layout_file", lambda p: reads.append(p) or real(p))
    data.load_layout_split(folder, log=None, cache_dir=cache)
    assert len(reads) == len(fresh)  # the cold load reads each file once

    def refuse(path):
        raise AssertionError(f"{path} read although the cache holds it")

    monkeypatch.setattr(data, "read_layout_file", refuse)
    assert_same_graphs(data.load_layout_split(folder, log=None, cache_dir=cache), fresh)


def _flip_last_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01  # inside the data (the header comes first)
    path.write_bytes(bytes(raw))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1])


@pytest.mark.parametrize(
    "field, damage, says",
    [
        ("config_codes", _flip_last_byte, "config_codes.npy does not match its checksum"),
        ("codebook_rows", _flip_last_byte, "codebook_rows.npy does not match its checksum"),
        ("config_runtime", _flip_last_byte, "config_runtime.npy does not match its checksum"),
        ("edge_index", _flip_last_byte, "edge_index.npy does not match its checksum"),
        ("config_codes", _truncate, "config_codes.npy unreadable"),
    ],
)
def test_damaged_cache_is_detected_and_rebuilt(tmp_path, field, damage, says):
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    fresh = data.load_layout_split(folder, log=None)
    data.load_layout_split(folder, log=None, cache_dir=cache)
    damage(only_folder(cache) / f"{field}.npy")

    lines: list[str] = []
    rebuilt = data.load_layout_split(folder, log=lines.append, cache_dir=cache)
    assert len(lines) == 1 and "damaged" in lines[0] and "rebuilding" in lines[0], lines
    assert says in lines[0], lines
    assert_same_graphs(rebuilt, fresh)
    # Whole again: the next load is silent, from the cache, and equal to the files.
    again = data.load_layout_split(folder, log=lines.append, cache_dir=cache)
    assert len(lines) == 1
    assert _reads_the_cache_file(again[0].configs.codes)
    assert_same_graphs(again, fresh)
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


def test_offsets_that_do_not_cut_the_rows_are_refused(tmp_path):
    """Offsets are checked on every load, not only through the checksums."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    data.load_layout_split(folder, log=None, cache_dir=cache)
    cached = only_folder(cache)
    offsets = np.array(np.load(cached / "config_offsets.npy"))
    offsets[-1] += 1
    np.save(cached / "config_offsets.npy", offsets)
    graphs, problem = layout_cache.check_layout_cache(cached, verify=False)
    assert graphs is None and "config_offsets.npy does not cut the rows" in problem


def test_a_node_feature_index_past_its_graphs_rows_is_refused(tmp_path):
    """Each graph's indices point into its own feature rows: one past the first graph's
    rows (still inside the whole array) is refused on every load, not only by checksum."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    data.load_layout_split(folder, log=None, cache_dir=cache)
    cached = only_folder(cache)
    first_rows = int(np.load(cached / "feat_row_offsets.npy")[1])
    assert np.load(cached / "node_feat_rows.npy").shape[0] > first_rows  # inside the array
    index = np.array(np.load(cached / "node_feat_index.npy"))
    index[0] = first_rows
    np.save(cached / "node_feat_index.npy", index)
    graphs, problem = layout_cache.check_layout_cache(cached, verify=False)
    assert graphs is None and "node_feat_index.npy points past" in problem


def _edit_runtime_keeping_size_and_mtime(path: Path) -> np.ndarray:
    before = path.stat()
    arrays = dict(np.load(path))
    arrays["config_runtime"] = arrays["config_runtime"] + 7
    np.savez(path, **arrays)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    return arrays["config_runtime"]


def test_changed_added_or_removed_file_gives_a_new_cache(tmp_path):
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    first = data.load_layout_split(folder, log=None, cache_dir=cache)
    target = folder / "hand_repeats.npz"  # written uncompressed: an edit keeps its size
    at = sorted(folder.glob("*.npz")).index(target)
    key = layout_cache.layout_cache_path(cache, folder, sorted(folder.glob("*.npz")))

    edited = _edit_runtime_keeping_size_and_mtime(target)
    files = sorted(folder.glob("*.npz"))
    assert layout_cache.layout_cache_path(cache, folder, files) != key
    graphs = data.load_layout_split(folder, log=None, cache_dir=cache)
    np.testing.assert_array_equal(graphs[at].config_runtime, edited)
    np.testing.assert_array_equal(graphs[at].config_runtime, first[at].config_runtime + 7)
    assert len(list(cache.iterdir())) == 2

    shutil.copy(target, folder / "zz_added.npz")
    assert len(data.load_layout_split(folder, log=None, cache_dir=cache)) == len(first) + 1
    target.unlink()
    (folder / "zz_added.npz").unlink()
    assert len(data.load_layout_split(folder, log=None, cache_dir=cache)) == len(first) - 1
    assert len(list(cache.iterdir())) == 4


@pytest.mark.parametrize("training", [True, False])
def test_reductions_on_the_cached_split_match_a_fresh_read(tmp_path, training):
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    reduce = dict(training=training, prune_hops=1, drop_duplicates=True, max_configs=6, seed=3)
    fresh_lines: list[str] = []
    fresh = load_run_split(folder, log=fresh_lines.append, **reduce)
    data.load_layout_split(folder, log=None, cache_dir=cache)  # cold: builds the cache
    lines: list[str] = []
    cached = load_run_split(folder, log=lines.append, cache_dir=cache, **reduce)
    assert_same_graphs(cached, fresh)
    assert lines == fresh_lines
    raw = data.load_layout_split(folder, log=None)
    if training:  # the reductions did something: repeats dropped, configurations sampled
        assert "dropped" in lines[0] and "dropped 0 " not in lines[0]
        assert max(g.num_configs for g in cached) == 6 < max(g.num_configs for g in raw)
    assert sum(g.num_nodes for g in cached) < sum(g.num_nodes for g in raw)  # pruned


def test_prepared_graphs_read_the_configurations_in_place(tmp_path):
    """Batching reads the int8 configurations from the memory map (no copy, no float32)."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    data.load_layout_split(folder, log=None, cache_dir=cache)
    graph = data.load_layout_split(folder, log=None, cache_dir=cache)[0]
    prepared = prepare_graph(graph)
    assert prepared.configs is graph.configs
    assert _reads_the_cache_file(prepared.configs.codes)


def _reads_the_cache_file(array: np.ndarray) -> bool:
    """Whether `array` is a view of a memory-mapped file (no copy of its values in RAM)."""
    while isinstance(array, np.ndarray):
        if isinstance(array, np.memmap):
            return True
        array = array.base
    return array is not None and "mmap" in type(array).__name__


@pytest.mark.parametrize("training", [False, True])
def test_streaming_configurations_from_the_cache_gives_the_batches_of_memory(tmp_path, training):
    """Batches drawn from the memory-mapped int8 split equal, array by array and byte by
    byte, those drawn from the split held in memory, for several epochs and both the
    plain and the segment source; the cached configurations stay on disk throughout."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    reduce = dict(training=training, prune_hops=1, drop_duplicates=True, max_configs=40, seed=2)
    in_memory = load_run_split(folder, log=None, **reduce)
    data.load_layout_split(folder, log=None, cache_dir=cache)  # cold: builds the cache
    streamed = load_run_split(folder, log=None, cache_dir=cache, **reduce)
    assert not any(_reads_the_cache_file(g.configs.codes) for g in in_memory)
    # Ranking reduces no configuration, training drops duplicates and samples, which
    # select rows lazily: either way every graph reads the cache file.
    kept = [g for g in streamed if g.configs.codes.size and _reads_the_cache_file(
        g.configs.codes)]  # fmt: skip
    assert len(kept) == sum(1 for g in streamed if g.configs.codes.size) > 0

    prepared = {"memory": prepare_graphs(in_memory), "cache": prepare_graphs(streamed)}
    for graph, ready in zip(streamed, prepared["cache"], strict=True):
        if graph in kept:  # preparing maps, never copies, the codes
            assert ready.configs is graph.configs
    for make in (batch_source, lambda graphs: segment_source(graphs, keep_nodes=50, seed=4)):
        drawn = {
            name: EpochBatches(make(graphs), batch=3, num_configs=16, seed=9)
            for name, graphs in prepared.items()
        }
        for epoch in range(3):
            got = list(drawn["cache"].batches(epoch))
            want = list(drawn["memory"].batches(epoch))
            assert len(got) == len(want) > 0
            for a, b in zip(got, want, strict=True):
                assert set(a) == set(b)
                for key in a:
                    assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
                    np.testing.assert_array_equal(a[key], b[key], f"epoch {epoch}: {key}")
    for graph, ready in zip(streamed, prepared["cache"], strict=True):
        if graph in kept:  # drawing batches copied slices, not the split
            assert _reads_the_cache_file(ready.configs.codes)


def test_unwritable_cache_is_one_line(tmp_path, monkeypatch):
    folder = make_split(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(PipelineError, match="cache"):
        data.load_layout_split(folder, log=None, cache_dir=blocker)


def _full_disk_after(appends: int, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Makes the cache writer fail with ENOSPC once `appends` chunks were written."""
    real = array_cache.ArrayFolderWriter.append
    calls: list[int] = []

    def append(self, field: str, chunk: np.ndarray) -> None:
        calls.append(1)
        if len(calls) > appends:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, field, chunk)

    monkeypatch.setattr(array_cache.ArrayFolderWriter, "append", append)
    return calls


def test_full_disk_while_writing_the_cache_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """ENOSPC midway (graphs already written): one line naming the cache folder and
    --cache_dir, no folder left behind; the next run builds a whole cache, silently."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    files = sorted(folder.glob("*.npz"))
    target = layout_cache.layout_cache_path(cache, folder, files)
    calls = _full_disk_after(3 * len(layout_cache._ROWS), monkeypatch)  # in the 4th graph
    with pytest.raises(PipelineError) as caught:
        data.load_layout_split(folder, log=None, cache_dir=cache)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{target}: cannot write the cache")
    assert "disk full" in line and "--cache_dir" in line, line
    assert len(calls) == 3 * len(layout_cache._ROWS) + 1  # it did write, then failed
    assert list(cache.iterdir()) == []  # neither the cache's folder nor a temporary one

    monkeypatch.undo()
    lines: list[str] = []
    graphs = data.load_layout_split(folder, log=lines.append, cache_dir=cache)
    assert lines == []  # nothing half-written was found, so nothing "damaged" to rebuild
    assert_same_graphs(graphs, data.load_layout_split(folder, log=None))
    assert [p.name for p in cache.iterdir()] == [target.name]


@pytest.mark.slow
def test_full_disk_while_writing_the_cache_ends_layout_train_in_one_line(tmp_path):
    cache = tmp_path / "cache"
    flags = ["--source=xla", "--search=default", "--epochs=1", f"--out_dir={tmp_path / 'out'}",
             f"--cache_dir={cache}"]  # fmt: skip
    code = (
        "import errno, runpy, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        f"sys.argv = ['layout_train.py', *{flags!r}]\n"
        "from baselines.core import array_cache\n"
        "def full(self, field, chunk):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "array_cache.ArrayFolderWriter.append = full\n"
        f"runpy.run_path({str(REPO / 'layout_train.py')!r}, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{cache}/layout-train-" in lines[0] and "--cache_dir" in lines[0], lines[0]
    assert "disk full" in lines[0]
    assert list(cache.iterdir()) == []


def test_cache_dir_is_not_part_of_the_run_hash():
    base = LayoutTrainArgs()
    assert LayoutTrainArgs(cache_dir="/somewhere").run_hash() == base.run_hash()
    assert LayoutTrainArgs(cache_dir="None").cache_dir is None
    assert LayoutTrainArgs(seed=1).run_hash() != base.run_hash()


def _saved(stdout: str, prefix: str) -> Path:
    line = next(line for line in stdout.splitlines() if line.startswith(prefix))
    return Path(line.split(": ", 1)[1])


@pytest.mark.slow
def test_training_and_ranking_with_a_cache_match_without(tmp_path):
    common = [
        "--source=xla",
        "--search=default",
        "--epochs=2",
        '--model_kwargs_json={"hidden_dim": 8, "op_embed_dim": 8}',
    ]
    cache = tmp_path / "cache"
    plain = _run("layout_train.py", *common, f"--out_dir={tmp_path / 'a'}")
    cached = _run("layout_train.py", *common, f"--out_dir={tmp_path / 'b'}", f"--cache_dir={cache}")
    assert plain.returncode == 0, plain.stderr
    assert cached.returncode == 0, cached.stderr
    model_a, model_b = _saved(plain.stdout, "saved model: "), _saved(cached.stdout, "saved model: ")
    assert model_a.name == model_b.name  # same run hash
    # Training read train and valid, then ranked test (the results CSV), through the cache.
    assert sorted(p.name.split("-")[1] for p in cache.iterdir()) == ["test", "train", "valid"]
    run_a = _read_run(_saved(plain.stdout, "saved run file: "))
    run_b = _read_run(_saved(cached.stdout, "saved run file: "))
    assert run_a["val"] == run_b["val"] and run_a["train_curve"] == run_b["train_curve"]

    csv_a, csv_b = tmp_path / "a.csv", tmp_path / "b.csv"
    done_a = _run("layout_gen_predictions_csv.py", f"--dir={model_a}", f"--output={csv_a}")
    done_b = _run(
        "layout_gen_predictions_csv.py",
        f"--dir={model_b}",
        f"--output={csv_b}",
        f"--cache_dir={cache}",
    )
    assert done_a.returncode == 0, done_a.stderr
    assert done_b.returncode == 0, done_b.stderr
    assert csv_a.read_text() == csv_b.read_text()
    assert sorted(p.name.split("-")[1] for p in cache.iterdir()) == ["test", "train", "valid"]


# ---------------------------------------------------------------------------
# Lazy configuration selection: dropping duplicates and sampling keep the rows on disk.

REDUCE = dict(drop_duplicates=True, max_configs=6, seed=3)


def eager_rows(graph: LayoutGraph, max_configs: int, seed: int) -> np.ndarray:
    """The configurations dedup + sampling keep, found with plain numpy on the read arrays."""
    flat = np.asarray(graph.node_config_feat).reshape(graph.num_configs, -1)
    kept = np.sort(np.unique(flat, axis=0, return_index=True)[1]) if flat.shape[1] else [0]
    kept = np.asarray(kept, dtype=np.int64)
    if kept.size > max_configs:
        rng = np.random.default_rng([seed, prune.graph_key(graph.graph_id)])
        kept = kept[np.sort(rng.choice(kept.size, size=max_configs, replace=False))]
    return kept


def eager_graph(graph: LayoutGraph, rows: np.ndarray) -> LayoutGraph:
    """`graph` with configurations `rows` copied by fancy indexing (the eager selection)."""
    return dataclasses.replace(
        graph,
        configs=Codebook.from_values(np.array(graph.node_config_feat[rows])),
        config_runtime=np.array(graph.config_runtime[rows]),
        config_count=np.array(graph.config_count[rows]),
    )


def test_dedup_and_sampling_on_a_cached_split_select_rows_of_the_memory_map(tmp_path):
    """After dropping duplicates and sampling, each cached graph still holds the cache's
    memory map itself (every stored row, not a copy of the kept ones) and its selection
    is an int64 index array: the rows a plain numpy dedup and draw keep."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    raw = data.load_layout_split(folder, log=None, cache_dir=cache)
    reduced = data.load_layout_split(folder, log=None, cache_dir=cache, **REDUCE)
    assert any(g.num_configs < r.num_configs for g, r in zip(reduced, raw, strict=True))
    for graph, stored in zip(reduced, raw, strict=True):
        rows = eager_rows(stored, REDUCE["max_configs"], REDUCE["seed"])
        if graph.num_configs == stored.num_configs:
            selected = graph.configs.selected
            assert selected is None or np.array_equal(selected, rows)
        else:
            selected = graph.configs.selected
            assert isinstance(selected, np.ndarray) and selected.dtype == np.int64
            assert not isinstance(selected, np.memmap)
            np.testing.assert_array_equal(selected, rows)
        np.testing.assert_array_equal(graph.config_runtime, np.asarray(stored.config_runtime)[rows])
        codes = graph.configs.codes
        assert codes.shape == stored.configs.codes.shape  # every stored configuration
        if codes.size:
            assert _reads_the_cache_file(codes), graph.graph_id
            assert codes.filename == stored.configs.codes.filename
        pruned = prune_to_configurable(graph, 1)[0]
        assert pruned.configs is graph.configs


def test_lazy_batches_and_scores_equal_the_eager_selection(tmp_path):
    """Batches drawn from, and scores of, the cached split reduced lazily equal those of
    the same graphs whose kept configurations were copied by numpy fancy indexing."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    raw = data.load_layout_split(folder, log=None, cache_dir=cache)
    lazy = data.load_layout_split(folder, log=None, cache_dir=cache, **REDUCE)
    fresh = data.load_layout_split(folder, log=None)
    eager = [eager_graph(g, eager_rows(g, REDUCE["max_configs"], REDUCE["seed"])) for g in fresh]
    prepared = {
        "lazy": prepare_graphs([prune_to_configurable(g, 1)[0] for g in lazy]),
        "eager": prepare_graphs([prune_to_configurable(g, 1)[0] for g in eager]),
    }
    for graph, ready in zip(lazy, prepared["lazy"], strict=True):
        if graph.configs.codes.size:
            assert _reads_the_cache_file(ready.configs.codes)
    drawn = {
        name: EpochBatches(batch_source(graphs), batch=3, num_configs=4, seed=5)
        for name, graphs in prepared.items()
    }
    for epoch in range(3):
        got, want = list(drawn["lazy"].batches(epoch)), list(drawn["eager"].batches(epoch))
        assert len(got) == len(want) > 0
        for a, b in zip(got, want, strict=True):
            assert set(a) == set(b)
            for key in a:
                assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
                np.testing.assert_array_equal(a[key], b[key], f"epoch {epoch}: {key}")
    model = LayoutSAGE(8, hidden_dim=8).create_variables()
    scorer = GraphScorer(model, chunk=5)
    for a, b in zip(prepared["lazy"], prepared["eager"], strict=True):
        np.testing.assert_array_equal(scorer.score(a), scorer.score(b), a.graph_id)
    # Any slots, repeated and out of order, read the rows fancy indexing gives.
    graph, stored = next(
        (g, r) for g, r in zip(lazy, raw, strict=True) if g.num_configs < r.num_configs
    )
    slots = np.array([3, 0, 3, 5, 1, 1, 2])
    rows = eager_rows(stored, REDUCE["max_configs"], REDUCE["seed"])
    want = np.load(folder / f"{graph.graph_id}.npz")["node_config_feat"][rows][slots]
    np.testing.assert_array_equal(graph.config_block(slots), want)
    np.testing.assert_array_equal(graph.config_block(np.arange(0)), want[:0])


def test_dedup_on_codes_keeps_what_numpy_unique_keeps(tmp_path):
    """Dedup compares codes; it must keep np.unique(axis=0, return_index=True)'s first
    occurrences of the 18-value rows, sorted, with their runtimes."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    graphs = data.load_layout_split(folder, log=None, cache_dir=cache)
    checked = 0
    for graph in graphs:
        if not graph.num_configurable:
            continue
        deduped, dropped = prune.dedup_configs(graph)
        flat = np.load(folder / f"{graph.graph_id}.npz")["node_config_feat"]
        flat = flat.reshape(graph.num_configs, -1)
        distinct, first = np.unique(flat, axis=0, return_index=True)
        keep = np.sort(first)
        assert dropped == graph.num_configs - len(distinct)
        np.testing.assert_array_equal(deduped.config_block(np.arange(len(keep))).reshape(
            len(keep), -1), flat[keep])  # fmt: skip
        np.testing.assert_array_equal(deduped.config_runtime, graph.config_runtime[keep])
        checked += dropped > 0
    assert checked  # the hand-made graph with repeats is among them


def test_a_reduced_graph_is_written_as_its_selected_configurations(tmp_path):
    """The cache writer, given a lazily reduced graph, stores the selected codes, so
    reading it back gives the same configurations, selected by nothing."""
    folder, cache = make_split(tmp_path), tmp_path / "cache"
    graphs = data.load_layout_split(folder, log=None, cache_dir=cache, **REDUCE)
    graph = next(g for g in graphs if g.configs.selected is not None and g.num_configurable)
    target = tmp_path / "written"
    layout_cache.save_layout_cache([graph], target, "train")
    (back,), problem = layout_cache.check_layout_cache(target)
    assert problem is None and back.configs.selected is None
    assert back.configs.codes.shape == (graph.num_configs, (graph.num_configurable + 1) // 2)
    assert back.configs.packed == (graph.configs.row_counts.max() <= 16)
    # The cache holds configurations as read; their counts are made when a split is loaded.
    assert back.config_count is None
    assert_same_graphs([back], [dataclasses.replace(graph, config_count=None)])


def _resident_kb(path: Path) -> int | None:
    """This process's resident kB of its mappings of `path` (/proc/self/smaps); None off Linux."""
    smaps = Path("/proc/self/smaps")
    if not smaps.exists():
        return None
    total, inside = 0, False
    for line in smaps.read_text().splitlines():
        head = line.split(maxsplit=1)[0] if line.strip() else ""
        if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", head):
            inside = line.rstrip().endswith(str(path))  # a mapping's first line names its file
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def test_reading_a_memory_mapped_split_leaves_none_of_it_resident(tmp_path):
    """Dedup, a training step's configurations and a checksum all read a cached split's
    codes through its memory map, and a map keeps every page it read resident (counted
    in RSS) until released: over an epoch, every code of the split. After each read,
    none of the file may stay resident (a few pages of the kernel's fault-around
    aside), while the same read without the release leaves it all."""
    c, nc = 1400, 18000  # 25.2 MB of uint8 codes
    path = tmp_path / "config_codes.npy"
    rng = np.random.default_rng(0)
    stored = rng.integers(0, 4, size=(c, nc), dtype=np.uint8)
    stored[700] = stored[3]  # one repeat for dedup to find
    np.save(path, stored)
    values = np.load(path, mmap_mode="r")
    if _resident_kb(path) is None:
        pytest.skip("needs /proc/self/smaps (Linux) to see which pages are resident")
    file_kb, slack_kb = values.nbytes / 1024, 1024

    np.asarray(values).max()  # the control: a plain read keeps what it touched
    assert _resident_kb(path) > 0.9 * file_kb
    array_cache.release_mapped_pages(values)
    assert _resident_kb(path) < slack_kb

    np.testing.assert_array_equal(read_rows(values, None, np.arange(c)), stored)
    assert _resident_kb(path) < slack_kb, "a contiguous read stayed resident"
    slots = rng.permutation(c)[: c // 2]
    np.testing.assert_array_equal(read_rows(values, None, slots), stored[slots])
    assert _resident_kb(path) < slack_kb, "a read of scattered rows stayed resident"
    # A plain ndarray that reaches the map only through .base: its reads must be
    # released all the same.
    plain = np.asarray(values)
    assert not isinstance(plain, np.memmap)
    np.testing.assert_array_equal(read_rows(plain, None, slots), stored[slots])
    assert _resident_kb(path) < slack_kb, "a read through a plain view of the map stayed resident"
    np.testing.assert_array_equal(read_rows(plain, None, np.arange(c)), stored)
    assert _resident_kb(path) < slack_kb, "a contiguous read of a plain view stayed resident"

    rows = np.tile(np.arange(4, dtype=np.int8)[:, None], (nc, 18))  # 4 rows per node
    graph = LayoutGraph(
        graph_id="g",
        node_feat=np.zeros((nc, 140), np.float32),
        node_opcode=np.zeros(nc, np.int32),
        edge_index=np.zeros((0, 2), np.int32),
        node_config_ids=np.arange(nc, dtype=np.int32),
        configs=Codebook(values, rows, np.arange(0, 4 * nc + 1, 4, dtype=np.int64)),
        config_runtime=np.arange(1, c + 1, dtype=np.int64),
        node_splits=np.array([nc], np.int64),
    )
    kept, dropped = prune.dedup_configs(graph)
    assert dropped == 1 and kept.num_configs == c - 1
    assert _resident_kb(path) < slack_kb, "dedup's pass stayed resident"

    want = hashlib.blake2b(stored.tobytes(), digest_size=16).hexdigest()
    assert array_cache.array_digest(values) == want
    assert _resident_kb(path) < slack_kb, "the checksum's pass stayed resident"


def test_a_memory_mapped_array_hashed_in_blocks_has_the_digest_of_its_bytes(tmp_path, monkeypatch):
    """Verifying a cache hashes a memory map a block at a time; the digest must be
    that of all its bytes (meta.json recorded it in one pass when writing), with
    blocks that do not divide the array."""
    monkeypatch.setattr(array_cache, "DIGEST_BLOCK_BYTES", 1000)  # 125 int64 per block
    path = tmp_path / "a.npy"
    stored = np.random.default_rng(1).integers(-(2**40), 2**40, size=(77, 13), dtype=np.int64)
    np.save(path, stored)
    values = np.load(path, mmap_mode="r")
    want = hashlib.blake2b(stored.tobytes(), digest_size=16).hexdigest()
    assert array_cache.array_digest(values) == want
    assert array_cache.array_digest(stored) == want
