"""Run files written before the upstream kwargs existed rebuild and rank as they did.

`tests/fixtures/old_run/` holds three runs trained on the bundled toy set (1 epoch):
with the code before `final_mlp_layers`, `reduction`, `directed` and
`cheb_order` were added, an EarlyJoinSAGE (head, SAGE layers, early-join sum
pooling) and a LateJoinGAT (GATv2 blocks, sum/mean/max pooling, config
interaction); with the code before `cheb_layout`, a ChebSAGE (parallel
branches, then the only layout; the default is now interleaved). Beside each:
the scores that code gave every configuration of the toy test split and the
top-5 CSV `tiles_gen_predictions_csv.py` wrote. The current code must rebuild
each from its run file, copy the saved variables in (same names and shapes, or
the copy fails) and rank the same way.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from baselines.tiles import data
from baselines.tiles.predict import SavedRanker, ranking_rows
from baselines.tiles.run_records import read_run_file
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "old_run"
OLD_RUNS = {
    "daf13d9b6ff787511c57cbdff01ec17c": (
        "EarlyJoinSAGE",
        {"hidden_dim": 16, "op_embedding_dim": 8},
    ),
    "29f401e04af02231038cec19351a00fc": (
        "LateJoinGAT",
        {"hidden_dim": 16, "op_embedding_dim": 8, "num_heads": 2, "num_layers": 2},
    ),
    # Before `cheb_layout`: parallel Cheb and SAGE branches, today's "parallel".
    "3f4e501b12e6c32d95fbc945549a1651": (
        "ChebSAGE",
        {"hidden_dim": 16, "op_embedding_dim": 8},
    ),
}


@pytest.fixture(scope="module")
def toy_test():
    return data.load_split(BUNDLED_TOY_ROOT / "test", progress=False)


def read_csv(path: Path) -> dict[str, list[int]]:
    with path.open(newline="") as f:
        return {
            row["ID"]: [int(i) for i in row["TopConfigs"].split(";")] for row in csv.DictReader(f)
        }


@pytest.mark.parametrize("run_hash", list(OLD_RUNS))
def test_old_run_files_rebuild_and_rank_identically(run_hash, toy_test):
    record = read_run_file(FIXTURES / f"run_{run_hash}.jsonz")
    # The fixture is what the older code wrote: no kwarg added since is in it.
    assert (record["model"], record["model_kwargs"]) == OLD_RUNS[run_hash]
    ranker = SavedRanker.load(FIXTURES / f"model_{run_hash}")
    scores = ranker.score(toy_test, progress=False)
    expected = np.load(FIXTURES / f"expected_{run_hash}_scores.npz")
    assert sorted(expected.files) == sorted(toy_test.tile_ids)
    tolerance = {}
    for tile_id, got in zip(toy_test.tile_ids, scores):
        old = expected[tile_id]
        # Scores are float32 sums, and another CPU (SIMD width, BLAS blocking)
        # sums in another order: a dot product of n terms then moves by up to
        # 2 n u sum|terms|, u = 2**-24. The longest path from a file's columns to
        # a score accumulates about 400 terms here (op encoder 146 + 8 inputs,
        # graph layers of 2 x 16 inputs plus a neighbour sum, pooling over up to
        # ~100 ops, the head), so 2 * 400 * u = 5e-5 of the terms' magnitude,
        # which the kernel's largest |score| stands for (every score of a kernel
        # is made from the same op states); x4 for growth through the layers.
        tolerance[tile_id] = 4 * 2 * 400 * 2.0**-24 * max(1.0, float(np.abs(old).max()))
        np.testing.assert_allclose(got, old, rtol=0, atol=tolerance[tile_id])

    want = read_csv(FIXTURES / f"expected_{run_hash}_top5.csv")
    got_rows = {
        row_id: [int(i) for i in top.split(";")]
        for row_id, top in ranking_rows(toy_test.tile_ids, scores)
    }
    assert got_rows.keys() == want.keys()
    for tile_id in toy_test.tile_ids:
        row_id = f"tile:xla:{tile_id}"
        if got_rows[row_id] != want[row_id]:
            # Only configs whose old scores tie within that tolerance may swap
            # places: position by position, the old scores of both lists agree.
            old = expected[tile_id]
            np.testing.assert_allclose(
                old[got_rows[row_id]], old[want[row_id]], rtol=0, atol=tolerance[tile_id]
            )
