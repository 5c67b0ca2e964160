"""A cache that proves itself: damaged cached arrays are rebuilt, never used.

Each damage is made to the cache folder on disk after a clean load built it;
the next load must say in one line that it rebuilds, and return exactly the
arrays a load without any cache returns (computed by the plain npz reader).
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest
from test_data import make_root

from baselines.core import array_cache
from baselines.tiles import data


def _only_cache(cache):
    (folder,) = [p for p in cache.iterdir() if ".tmp-" not in p.name]
    return folder


def _resave(folder, field, change):
    """Rewrites one cached array through numpy (valid header, changed content)."""
    value = np.array(np.load(folder / f"{field}.npy"))
    np.save(folder / f"{field}.npy", change(value))


def _nan_in_node_feat(folder):
    def change(v):
        v[1, 3] = np.nan
        return v

    _resave(folder, "node_feat", change)


def _zero_normalizers(folder):
    _resave(folder, "config_runtime_normalizers", np.zeros_like)


def _random_bytes_in_config_feat(folder):
    path = folder / "config_feat.npy"
    raw = bytearray(path.read_bytes())
    rng = np.random.default_rng(0)
    at = len(raw) - 40  # inside the data, past the header
    raw[at : at + 16] = rng.integers(0, 256, 16, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(raw))


def _empty_node_feat(folder):
    (folder / "node_feat.npy").write_bytes(b"")


def _empty_meta(folder):
    (folder / "meta.json").write_text("{}")


def _wrong_width(folder):
    _resave(folder, "config_feat", lambda v: v[:, :23])


def _bad_config_offset(folder):
    def change(v):
        v[2] = -5
        return v

    _resave(folder, "config_offsets", change)


def _truncated_edges(folder):
    path = folder / "edge_index.npy"
    path.write_bytes(path.read_bytes()[:-8])


DAMAGE = {
    "nan_in_node_feat": _nan_in_node_feat,
    "zero_normalizers": _zero_normalizers,
    "random_bytes_in_config_feat": _random_bytes_in_config_feat,
    "empty_node_feat": _empty_node_feat,
    "empty_meta": _empty_meta,
    "wrong_width": _wrong_width,
    "bad_config_offset": _bad_config_offset,
    "truncated_edges": _truncated_edges,
}


def _assert_same_split(a, b):
    for field in data._ARRAY_FIELDS:
        np.testing.assert_array_equal(np.asarray(getattr(a, field)), getattr(b, field), field)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_cache_is_rebuilt_and_loads_like_the_files(tmp_path, damage):
    root = make_root(tmp_path)
    cache = tmp_path / "cache"
    clean = data.load_split(root / "train", progress=False)  # no cache: the npz files
    data.load_split(root / "train", cache_dir=cache, progress=False)
    DAMAGE[damage](_only_cache(cache))

    lines = []
    loaded = data.load_split(root / "train", cache_dir=cache, progress=False, log=lines.append)
    assert len(lines) == 1 and "damaged" in lines[0] and "rebuilding" in lines[0], lines
    _assert_same_split(loaded, clean)
    # The rebuilt cache is whole again: read from the cache, silently.
    again = data.load_split(root / "train", cache_dir=cache, progress=False, log=lines.append)
    assert isinstance(again.config_feat, np.memmap) and len(lines) == 1
    _assert_same_split(again, clean)
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


def test_verified_stamp_is_not_trusted_after_a_write(tmp_path, monkeypatch):
    """Verified once (stamp written), then damaged with the mtime put back: caught by ctime."""
    monkeypatch.setattr(array_cache, "STAMP_SETTLE_S", 0.0)
    root = make_root(tmp_path)
    cache = tmp_path / "cache"
    clean = data.load_split(root / "train", progress=False)
    data.load_split(root / "train", cache_dir=cache, progress=False)
    folder = _only_cache(cache)
    assert data.check_split_cache(folder)[1] is None
    assert (folder / array_cache.VERIFIED_STAMP).is_file()
    hashed = []
    real_digest = array_cache.array_digest
    monkeypatch.setattr(array_cache, "array_digest", lambda a: hashed.append(1) or real_digest(a))
    assert data.check_split_cache(folder)[1] is None and not hashed  # stamp: no re-hash

    target = folder / "config_runtime.npy"
    before = target.stat()
    _resave(folder, "config_runtime", lambda v: v + 1)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    lines = []
    loaded = data.load_split(root / "train", cache_dir=cache, progress=False, log=lines.append)
    assert len(lines) == 1 and "config_runtime.npy does not match its checksum" in lines[0]
    _assert_same_split(loaded, clean)


def test_cache_records_shapes_and_checksums(tmp_path):
    root = make_root(tmp_path)
    cache = tmp_path / "cache"
    split = data.load_split(root / "train", cache_dir=cache, progress=False)
    meta = json.loads((_only_cache(cache) / "meta.json").read_text())
    for field in data._ARRAY_FIELDS:
        value = np.ascontiguousarray(getattr(split, field))
        record = meta["arrays"][field]
        assert record["shape"] == list(value.shape)
        assert record["blake2b"] == hashlib.blake2b(value.tobytes(), digest_size=16).hexdigest()


@pytest.mark.parametrize("field", ["config_offsets", "node_offsets", "edge_offsets"])
def test_offsets_are_checked_even_when_the_checksums_agree(tmp_path, field):
    """Offsets that no longer cut the arrays (meta.json rewritten to match) are refused:
    the cheap checks run on every load, not only the checksums."""
    import hashlib

    root = make_root(tmp_path)
    cache = tmp_path / "cache"
    clean = data.load_split(root / "train", progress=False)
    data.load_split(root / "train", cache_dir=cache, progress=False)
    folder = _only_cache(cache)
    offsets = np.array(np.load(folder / f"{field}.npy"))
    offsets[-1] += 1  # one row more than the arrays hold
    np.save(folder / f"{field}.npy", offsets)
    meta = json.loads((folder / "meta.json").read_text())
    digest = hashlib.blake2b(offsets.tobytes(), digest_size=16).hexdigest()
    meta["arrays"][field]["blake2b"] = digest
    (folder / "meta.json").write_text(json.dumps(meta))
    lines = []
    loaded = data.load_split(root / "train", cache_dir=cache, progress=False, log=lines.append)
    assert len(lines) == 1 and f"{field}.npy does not cut the rows" in lines[0], lines
    _assert_same_split(loaded, clean)
