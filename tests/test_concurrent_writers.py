"""Several processes writing the same output folder at once (sweep workers, reruns)."""

from __future__ import annotations

import multiprocessing
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from baselines.core.io_utils import atomic_directory
from baselines.tiles import data

# Several processes each: the slow tier (make test-fast leaves them out).
pytestmark = pytest.mark.slow


ROUNDS = 50


def _cache_writer(toy_split_dir: str, work: str, barrier, worker: int, results) -> None:
    """Each round: both processes build the same split cache at the same moment."""
    split = data.load_split(toy_split_dir, max_files=8, progress=False)
    for round_ in range(ROUNDS):
        cache_dir = Path(work) / f"round{round_}"
        cache_dir.mkdir(exist_ok=True)
        barrier.wait()
        try:
            data.save_split_cache(split, cache_dir / "train-key")
            results.put((worker, round_, "ok"))
        except Exception as e:  # the test reports what went wrong, in the parent
            results.put((worker, round_, f"{type(e).__name__}: {e}"))


def _dir_writer(work: str, barrier, worker: int, results) -> None:
    """Each round: both processes replace the same model-like folder at once."""
    for round_ in range(ROUNDS):
        dest = Path(work) / f"round{round_}" / "model_x"
        dest.parent.mkdir(exist_ok=True)
        barrier.wait()
        try:
            with atomic_directory(dest) as tmp:
                for part in range(3):
                    (tmp / f"part{part}").write_text(f"{worker}")
            results.put((worker, round_, "ok"))
        except Exception as e:
            results.put((worker, round_, f"{type(e).__name__}: {e}"))


def _run_pair(target, *args) -> list[tuple]:
    ctx = multiprocessing.get_context("spawn")  # no TensorFlow state inherited by fork
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, barrier, w, results)) for w in (0, 1)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in range(2 * ROUNDS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return out


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


def test_two_processes_building_the_same_cache_both_succeed(tmp_path):
    toy_train = ROOT / "data" / "tile_xla_toy" / "train"
    outcomes = _run_pair(_cache_writer, str(toy_train), str(tmp_path))
    failures = [o for o in outcomes if o[2] != "ok"]
    assert not failures, failures[:3]
    expected = data.load_split(toy_train, max_files=8, progress=False)
    for round_ in range(ROUNDS):
        folder = tmp_path / f"round{round_}"
        assert _leftovers(folder) == [], round_
        cached = data.check_split_cache(folder / "train-key")[0]
        assert cached is not None, round_
        np.testing.assert_array_equal(cached.config_feat, expected.config_feat)
        np.testing.assert_array_equal(cached.tile_ids, expected.tile_ids)


def test_two_processes_replacing_the_same_folder_both_succeed(tmp_path):
    outcomes = _run_pair(_dir_writer, str(tmp_path))
    failures = [o for o in outcomes if o[2] != "ok"]
    assert not failures, failures[:3]
    for round_ in range(ROUNDS):
        folder = tmp_path / f"round{round_}"
        assert _leftovers(folder) == [], round_
        parts = [(folder / "model_x" / f"part{i}").read_text() for i in range(3)]
        assert len(set(parts)) == 1, f"round {round_} mixes two writers: {parts}"


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_published_folders_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        with atomic_directory(tmp_path / "model_x") as tmp:
            (tmp / "f").write_text("x")
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "model_x").stat().st_mode)
    assert mode == 0o777 & ~umask
