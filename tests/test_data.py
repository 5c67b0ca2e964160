"""Loader: real quirks accepted, bad files refused in one line, cache invalidation."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, numpy_feature_stats, signed_log

from baselines.core import npz
from baselines.core.data_roots import DataPlace, ranking_root, training_root
from baselines.core.errors import PipelineError
from baselines.tiles import data
from baselines.tiles.features import FeatureStats, column_moments, layout_positions


def kernel_arrays(n=3, c=4, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "node_feat": rng.random((n, 140)).astype(np.float32),
        "node_opcode": rng.integers(0, 120, n).astype(np.uint8),
        "edge_index": np.array([[i, i - 1] for i in range(1, n)], dtype=np.int64),
        "config_feat": rng.random((c, 24)).astype(np.float32),
        "config_runtime": rng.integers(100, 1000, c).astype(np.int64),
        "config_runtime_normalizers": np.full(c, 500, np.int64),
    }


def make_root(tmp_path, counts=(3, 2, 2)):
    root = tmp_path / "root"
    for split, count in zip(data.SPLITS, counts):
        (root / split).mkdir(parents=True)
        for i in range(count):
            np.savez(root / split / f"prog_{split}{i:02d}.npz", **kernel_arrays(seed=i))
    return root


# --- real data and the bundled toy set -------------------------------------------------


def test_real_samples_load_with_every_quirk(real_samples):
    for split in data.SPLITS:
        s = data.load_split(real_samples / "tile_xla" / split, progress=False)
        files = sorted((real_samples / "tile_xla" / split).glob("*.npz"))
        assert list(s.tile_ids) == [f.stem for f in files]
        for f, kernel in zip(files, s.kernels()):
            raw = np.load(f)
            np.testing.assert_array_equal(kernel.node_feat, raw["node_feat"])
            np.testing.assert_array_equal(kernel.edge_index, raw["edge_index"])
            np.testing.assert_array_equal(kernel.config_runtime, raw["config_runtime"])
            assert kernel.node_opcode.dtype == np.int32
        assert s.has_labels == (split != "test")
    test = data.load_split(real_samples / "tile_xla" / "test", progress=False)
    assert test.num_nodes.min() == 2 and test.num_configs.max() == 2951
    assert np.all(test.config_runtime == 0) and np.all(test.config_runtime_normalizers == 1)


def test_bundled_toy_set_loads(toy_root):
    splits = data.load_splits(toy_root, progress=False)
    assert 90 <= len(splits["train"]) <= 110
    assert 25 <= len(splits["valid"]) <= 35 and 25 <= len(splits["test"]) <= 35
    assert splits["train"].has_labels and splits["valid"].has_labels
    assert not splits["test"].has_labels
    assert splits["train"].num_configs.min() == 1  # a one-config kernel is kept


def test_max_files_keeps_the_first_files(tmp_path):
    root = tmp_path / "r"
    (root / "train").mkdir(parents=True)
    for i in range(103):
        np.savez(root / "train" / f"k{i:03d}.npz", **kernel_arrays(n=2, c=1, seed=i))
    s = data.load_splits(root, ("train",), max_files=100, progress=False)["train"]
    assert len(s) == 100 and s.tile_ids[-1] == "k099"
    assert len(data.load_splits(root, ("train",), progress=False)["train"]) == 103


def _place(tmp_path, default: str):
    toy = tmp_path / "toy"
    toy.mkdir(exist_ok=True)
    return DataPlace(default=default, toy=toy, holds="train/ valid/ test/", unit="kernels")


def test_only_a_missing_default_data_root_falls_back_to_the_toy_set(tmp_path):
    lines = []
    default = tmp_path / "default_location"
    place = _place(tmp_path, str(default))
    assert training_root(place, str(default), lines.append) == (place.toy, True, True)
    assert len(lines) == 1 and "TOY DATA" in lines[0] and str(default) in lines[0]
    # A mistyped --data_root (not the default) is refused, never replaced by toy data.
    with pytest.raises(PipelineError, match="--data_root: .*nowhere does not exist"):
        training_root(place, str(tmp_path / "nowhere"), lines.append)
    assert training_root(place, str(tmp_path), lines.append) == (tmp_path, False, False)
    assert len(lines) == 1
    # The toy set named by the flag is read as it is, and said to be the toy set.
    assert training_root(place, str(place.toy), lines.append) == (place.toy, True, False)
    assert len(lines) == 2 and "TOY DATA" in lines[1]


def test_a_relative_default_is_the_repositorys_toy_set_from_any_folder(tmp_path, monkeypatch):
    from baselines.layout.layout_args import LAYOUT_PLACE

    monkeypatch.chdir(tmp_path)  # "data/layout_toy" is not there
    root, toy, fell_back = training_root(LAYOUT_PLACE, LAYOUT_PLACE.default, lambda _: None)
    assert root == ROOT / "data" / "layout_toy" and toy and not fell_back


def test_prediction_takes_the_flag_then_the_run_root_then_the_default_then_the_toy_set(
    tmp_path,
):
    flag, run_root, default = (tmp_path / n for n in ("flag", "run_root", "default"))
    place = _place(tmp_path, str(default))
    for folder in (flag, run_root, default):
        folder.mkdir()
    assert ranking_root(place, str(flag), str(run_root)) == (flag, "--data_root", None)
    assert ranking_root(place, None, str(run_root)) == (run_root, "the run file", None)
    assert ranking_root(place, None, None) == (default, "the default", None)
    run_root.rmdir()
    assert ranking_root(place, None, str(run_root)) == (default, "the default", None)
    default.rmdir()
    root, origin, banner = ranking_root(place, None, str(run_root))
    assert root == place.toy and origin == "no other data root exists"
    assert "TOY DATA" in banner
    # The toy set is announced however it was chosen.
    assert "TOY DATA" in ranking_root(place, str(place.toy), None)[2]
    assert "TOY DATA" in ranking_root(place, None, str(place.toy))[2]
    # A mistyped --data_root is refused even when the run's root exists.
    with pytest.raises(PipelineError, match="--data_root: .*nowhere does not exist"):
        ranking_root(place, str(tmp_path / "nowhere"), str(flag))


# --- validation -------------------------------------------------------------------------


def _corrupt(kind, path):
    arrays = kernel_arrays()
    if kind == "not_npz":
        path.write_text("hello, not a zip")
        return "not a readable npz"
    if kind == "truncated":
        np.savez(path, **arrays)
        path.write_bytes(path.read_bytes()[:200])
        return "not a readable npz"
    if kind == "missing_key":
        del arrays["config_runtime"]
        expected = "missing key(s) config_runtime"
    elif kind == "feature_width":
        arrays["node_feat"] = arrays["node_feat"][:, :139]
        expected = "node_feat has shape (3, 139)"
    elif kind == "edge_range":
        arrays["edge_index"][0, 0] = 3
        expected = "edge_index refers to node 3"
    elif kind == "nan":
        arrays["node_feat"][1, 5] = np.nan
        expected = "node_feat contains NaN or inf"
    elif kind == "inf":
        arrays["config_feat"][0, 0] = np.inf
        expected = "config_feat contains NaN or inf"
    elif kind == "config_count":
        arrays["config_runtime"] = arrays["config_runtime"][:3]
        expected = "config_runtime has shape (3,), expected (4,)"
    np.savez(path, **arrays)
    return expected


BAD_KINDS = [
    "not_npz",
    "truncated",
    "missing_key",
    "feature_width",
    "edge_range",
    "nan",
    "inf",
    "config_count",
]


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_file_raises_one_line_naming_file(tmp_path, kind):
    path = tmp_path / "bad.npz"
    expected = _corrupt(kind, path)
    with pytest.raises(PipelineError) as e:
        data.read_kernel(path)
    message = str(e.value)
    assert message.startswith(str(path)) and expected in message
    assert "\n" not in message


def test_missing_and_empty_split(tmp_path):
    with pytest.raises(PipelineError, match="split directory does not exist"):
        data.load_split(tmp_path / "train")
    (tmp_path / "train").mkdir()
    with pytest.raises(PipelineError, match="no .npz files"):
        data.load_split(tmp_path / "train")


def run_train_cli(tmp_path, *flags):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, str(ROOT / "tiles_train.py"), "--model=MLP", "--epochs=1", *flags],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["truncated", "edge_range", "empty_split"])
def test_cli_bad_data_exits_cleanly_without_outputs(tmp_path, kind):
    root = make_root(tmp_path)
    bad = root / "valid" / "prog_valid01.npz"
    if kind == "empty_split":
        shutil.rmtree(root / "test")
        (root / "test").mkdir()
        expected = "test: split has no .npz files"
        bad = root / "test" / "none.npz"
    else:
        _corrupt(kind, bad)
        expected = str(bad)
    out, cache = tmp_path / "out", tmp_path / "cache"
    proc = run_train_cli(
        tmp_path, f"--data_root={root}", f"--out_dir={out}", f"--cache_dir={cache}"
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    assert lines[-1].startswith("error: ") and expected in lines[-1]
    assert not out.exists()
    # A cache is written only for a split whose files all passed validation.
    assert not list(cache.glob(f"{bad.parent.name}-*"))


# --- cache ------------------------------------------------------------------------------


def test_cache_is_reused_and_invalidated_by_changed_file(tmp_path):
    root = make_root(tmp_path)
    cache = tmp_path / "cache"
    first = data.load_split(root / "train", cache_dir=cache, progress=False)
    assert len(list(cache.iterdir())) == 1
    again = data.load_split(root / "train", cache_dir=cache, progress=False)
    assert isinstance(again.node_feat, np.memmap)  # came from the cache
    np.testing.assert_array_equal(first.config_feat, again.config_feat)

    changed = kernel_arrays(seed=42, c=5)
    target = root / "train" / "prog_train01.npz"
    np.savez(target, **changed)
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    fresh = data.load_split(root / "train", cache_dir=cache, progress=False)
    np.testing.assert_array_equal(fresh.kernel(1).config_feat, changed["config_feat"])
    assert len(list(cache.iterdir())) == 2

    (root / "train" / "prog_train02.npz").unlink()
    assert len(data.load_split(root / "train", cache_dir=cache, progress=False)) == 2


def _counting_reads(monkeypatch) -> list[int]:
    reads = []
    real = data.read_files

    def counting(name, files, *args, **kwargs):
        reads.append(len(files))
        return real(name, files, *args, **kwargs)

    monkeypatch.setattr(data, "read_files", counting)
    return reads


def test_cache_rebuilt_when_only_the_mtime_changes(tmp_path, monkeypatch):
    root = make_root(tmp_path)
    cache = tmp_path / "cache"
    reads = _counting_reads(monkeypatch)
    data.load_split(root / "train", cache_dir=cache, progress=False)
    data.load_split(root / "train", cache_dir=cache, progress=False)
    assert reads == [3]  # the second load came from the cache
    target = root / "train" / "prog_train01.npz"
    stat = target.stat()
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    data.load_split(root / "train", cache_dir=cache, progress=False)
    assert reads == [3, 3]


def test_cache_rebuilt_when_only_the_content_changes(tmp_path, monkeypatch):
    """Same size, same mtime (as tar restores it), one runtime changed: not stale."""
    root = make_root(tmp_path)
    cache = tmp_path / "cache"
    reads = _counting_reads(monkeypatch)
    first = data.load_split(root / "train", cache_dir=cache, progress=False)
    target = root / "train" / "prog_train01.npz"
    before = target.stat()
    arrays = dict(np.load(target))
    arrays["config_runtime"] = arrays["config_runtime"] + 7
    np.savez(target, **arrays)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    fresh = data.load_split(root / "train", cache_dir=cache, progress=False)
    assert reads == [3, 3]
    np.testing.assert_array_equal(fresh.kernel(1).config_runtime, arrays["config_runtime"])
    np.testing.assert_array_equal(
        fresh.kernel(1).config_runtime, first.kernel(1).config_runtime + 7
    )


# --- normalization statistics ------------------------------------------------------------


def test_feature_stats_round_trip_and_fit_on_train_only(tmp_path):
    splits = data.load_splits(make_root(tmp_path), progress=False)
    stats = FeatureStats.fit_split(splits["train"])
    restored = FeatureStats.from_dict(json.loads(json.dumps(stats.to_dict())))
    for field in ("node_mean", "node_std", "config_mean", "config_std"):
        np.testing.assert_array_equal(getattr(stats, field), getattr(restored, field))
    valid = splits["valid"]
    np.testing.assert_array_equal(
        stats.normalize_split(valid).node_feat, restored.normalize_split(valid).node_feat
    )
    assert not np.allclose(FeatureStats.fit_split(valid).node_mean, stats.node_mean)
    normalized = stats.normalize_split(splits["train"]).node_feat
    assert normalized.shape[1] == data.NODE_FEAT_DIM + 6  # the file's columns, then positions
    np.testing.assert_allclose(normalized[:, : data.NODE_FEAT_DIM].mean(axis=0), 0, atol=1e-4)
    np.testing.assert_array_equal(
        normalized[:, data.NODE_FEAT_DIM :], layout_positions(splits["train"].node_feat)
    )


def _op_row(shape, minor_to_major):
    row = np.zeros(data.NODE_FEAT_DIM, np.float32)
    row[21 : 21 + len(shape)] = shape
    row[134 : 134 + len(minor_to_major)] = minor_to_major
    return row


def test_layout_positions_invert_minor_to_major_up_to_the_rank():
    ops = np.stack(
        [
            _op_row([32, 1024, 6, 100], [1, 0, 3, 2]),  # the file names dim 1 most minor
            _op_row([4, 5, 6], [2, 0, 1]),  # not its own inverse: dims 2, 0, 1 from minor
            _op_row([], []),  # a tuple: no shape dims
            _op_row([7], [0]),  # rank 1: the zero padding past it names nothing
            _op_row([3, 0, 5], [2, 1, 0]),  # a size-0 dim inside the rank still counts
        ]
    )
    want = [
        [1, 0, 3, 2, -1, -1],
        [1, 2, 0, -1, -1, -1],
        [-1] * 6,
        [0, -1, -1, -1, -1, -1],
        [2, 1, 0, -1, -1, -1],
    ]
    np.testing.assert_array_equal(layout_positions(ops), np.array(want, np.float32))


def test_layout_positions_of_the_real_samples_are_permutations(real_samples):
    """Every non-tuple op: positions of dims below the rank are 0..rank-1, and the
    file's minor_to_major entry at position p names the dim at p."""
    files = sorted((real_samples / "tile_xla").rglob("*.npz"))
    checked = 0
    for path in files:
        feats = data.read_kernel(path).node_feat
        positions = layout_positions(feats)
        for row, pos in zip(feats, positions):
            nonzero = np.flatnonzero(row[21:27] > 0)
            rank = int(nonzero[-1]) + 1 if nonzero.size else 0
            assert sorted(pos[:rank].astype(int)) == list(range(rank))
            assert np.all(pos[rank:] == -1)
            for d in range(rank):
                assert int(row[134 + int(pos[d])]) == d
            checked += rank > 1
    assert checked > 0


def test_feature_stats_reject_damaged_dict():
    stats = FeatureStats.fit(np.ones((2, 140), np.float32), np.ones((2, 24), np.float32))
    d = stats.to_dict()
    d["node_std"] = d["node_std"][:-1]
    with pytest.raises(PipelineError, match="node_std"):
        FeatureStats.from_dict(d)


def test_process_pool_reading_matches_threads_and_reports_bad_files(tmp_path, monkeypatch):
    root = tmp_path / "r"
    (root / "train").mkdir(parents=True)
    for i in range(40):
        np.savez(root / "train" / f"k{i:03d}.npz", **kernel_arrays(n=2 + i % 5, c=1 + i, seed=i))
    threaded = data.load_split(root / "train", progress=False)
    monkeypatch.setattr(data, "PROCESS_POOL_MIN_FILES", 1)
    pooled = data.read_files("train", sorted((root / "train").glob("*.npz")), 2, False)
    for field in data._ARRAY_FIELDS:
        np.testing.assert_array_equal(getattr(pooled, field), getattr(threaded, field))
    _corrupt("nan", root / "train" / "k017.npz")
    with pytest.raises(PipelineError, match="k017.npz: node_feat contains NaN"):
        data.read_files("train", sorted((root / "train").glob("*.npz")), 2, False)


def test_npy_headers_are_parsed_one_thread_at_a_time(tmp_path, monkeypatch):
    """numpy parses .npy headers with ast, which CPython 3.11 cannot run in two
    threads at once (random SystemError); the threaded loader must serialize it."""
    root = make_root(tmp_path, counts=(12, 0, 0))
    real = np.lib.format._read_array_header
    calls, unlocked = [], []

    def checked(*args, **kwargs):
        calls.append(1)
        if not npz._NPY_HEADER_LOCK.locked():
            unlocked.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(np.lib.format, "_read_array_header", checked)
    split = data.read_files("train", sorted((root / "train").glob("*.npz")), 4, False)
    assert len(split) == 12 and not unlocked
    assert len(calls) == 12 * len(data.REQUIRED_KEYS)  # every header went through the check


@pytest.mark.parametrize("chunk_rows", [1, 7, 1000])
def test_feature_statistics_in_row_chunks_match_the_whole_array_formula(chunk_rows):
    """Fitting and normalizing chunk by chunk gives the one-pass float64 result."""
    rng = np.random.default_rng(3)
    feats = (
        rng.lognormal(0.0, 4.0, size=(50, data.CONFIG_FEAT_DIM)) * rng.choice([-1, 1], 50)[:, None]
    )
    feats[:, 3] = 7.0  # a constant column: std 1
    feats = feats.astype(np.float32)
    mean, std = column_moments(feats, data.CONFIG_FEAT_DIM, chunk_rows=chunk_rows)
    want_mean, want_std = numpy_feature_stats(feats)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(std, want_std, rtol=1e-5, atol=1e-6)
    assert std[3] == 1.0
    stats = FeatureStats.fit(np.zeros((1, data.NODE_FEAT_DIM), np.float32), feats)
    normalized = stats.normalize_configs(feats, chunk_rows=chunk_rows)
    want = (signed_log(feats) - stats.config_mean) / stats.config_std
    assert normalized.dtype == np.float32
    np.testing.assert_allclose(normalized, want, rtol=1e-5, atol=1e-5)
