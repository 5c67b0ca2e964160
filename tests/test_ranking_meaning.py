"""What a ranking row means, for every writer of rankings.

A row lists configuration indices, the one the model scored fastest (lowest
score) first; equal scores keep file order, the lower index first. Every format
check holds for a row that lists the right indices in a wrong order (each
configuration's rank in place of the configuration, or the slowest first), so
these tests give each writer scores the test knows and check three things:

- the row is the configurations sorted by score, sorted here in plain Python;
- the row read back and scored with the metric gives the metric of the scores;
- equal scores list the lower index first.

The writers: `ranking_rows` (tile predictions CSV and the training results CSV,
end to end in `test_rankings.py`), the tile ensemble, `layout_gen_predictions_csv.py`
alone and as an ensemble (run in process here with the model's scores replaced
by known ones, end to end with a trained model in `test_layout_cli.py`), and the
Kaggle join, which copies each row as given (`test_kaggle_layout.py`,
`test_submission.py`).
"""

from __future__ import annotations

import csv
import importlib.util
import sys
import types

import numpy as np
import pytest
from conftest import ROOT

from baselines.core import metrics
from baselines.core.ranking import ensemble_scores
from baselines.layout import metrics as layout_metrics
from baselines.tiles.predict import ranking_rows


def by_score(scores) -> list[int]:
    """Indices by ascending score, equal scores by index: the documented order."""
    return sorted(range(len(scores)), key=lambda i: (float(scores[i]), i))


def positions(row: list[int], count: int) -> np.ndarray:
    """A row read back as scores: each configuration's place in the row."""
    place = np.full(count, -1.0)
    place[row] = np.arange(len(row))
    return place


def cell(row: str) -> list[int]:
    return [int(x) for x in row.split(";")]


def z(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return (x - x.mean()) / x.std() if x.std() > 0 else np.zeros_like(x)


# --- tile rows -------------------------------------------------------------------------

TIED = np.array([0.5, 0.1, 0.5, 0.1, 0.3, 0.1, -0.2], np.float32)


def test_tile_rows_are_the_configs_sorted_by_score_ties_by_index():
    rows = ranking_rows(["k_1", "k_2"], [TIED, TIED[::-1].copy()], top=7)
    # By hand: -0.2 (6); 0.1 at 1, 3, 5; 0.3 (4); 0.5 at 0, 2.
    assert rows[0] == ("tile:xla:k_1", "6;1;3;5;4;0;2")
    assert cell(rows[1][1]) == by_score(TIED[::-1])
    assert ranking_rows(["k_1"], [TIED], top=3) == [("tile:xla:k_1", "6;1;3")]


def test_a_tile_row_read_back_gives_the_top_k_error_of_the_scores():
    rng = np.random.default_rng(5)
    for count in (3, 10, 40):
        scores = rng.normal(size=count).astype(np.float32)
        runtimes = rng.permutation(np.arange(100, 100 + 7 * count, 7))
        row = cell(ranking_rows(["k_1"], [scores], top=10)[0][1])
        assert row == by_score(scores)[:10]
        for k in (1, 5, 10):
            from_row = runtimes[row[:k]].min() / runtimes.min() - 1
            assert from_row == pytest.approx(metrics.top_k_error(scores, runtimes, k), abs=0)


def test_a_tile_ensemble_ranks_by_mean_z_score_and_keeps_ties_in_file_order():
    a = [np.array([1.0, 3.0, 1.0, 2.0, 3.0])]
    b = [np.array([10.0, 50.0, 10.0, 20.0, 50.0])]  # a x 10 with an offset: same z-scores
    c = [np.array([4.0, 0.0, 4.0, 1.0, 2.0])]
    both = ensemble_scores([a, b])[0]
    assert cell(ranking_rows(["k"], [both], top=5)[0][1]) == [0, 2, 3, 1, 4]
    mixed = ensemble_scores([a, c])[0]
    want = by_score((z(a[0]) + z(c[0])) / 2)
    assert cell(ranking_rows(["k"], [mixed], top=5)[0][1]) == want
    assert want != by_score(a[0]) and want != by_score(c[0])  # both members count


# --- layout rows: the script with known scores --------------------------------------------


def load_layout_script():
    spec = importlib.util.spec_from_file_location(
        "layout_gen_predictions_csv_under_test", ROOT / "layout_gen_predictions_csv.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_layout_script(monkeypatch, tmp_path, graphs, members, *flags) -> dict[str, list[int]]:
    """layout_gen_predictions_csv.main() on `members` (each model's scores per graph)."""
    from baselines.layout import run_data, scoring

    models = [
        (tmp_path / f"model_{i}", {"source": "xla", "search": "default", "model": "Known"})
        for i in range(len(members))
    ]
    monkeypatch.setattr(run_data, "read_layout_models", lambda text, flag: models)
    monkeypatch.setattr(scoring, "score_runs", lambda *args, **kwargs: (graphs, members))
    output = tmp_path / "rows.csv"
    dirs = ",".join(str(d) for d, _ in models)
    argv = ["layout_gen_predictions_csv.py", f"--dir={dirs}", f"--data_root={tmp_path}"]
    monkeypatch.setattr(sys, "argv", [*argv, f"--output={output}", *flags])
    assert load_layout_script().main() == 0
    with open(output, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["ID", "TopConfigs"]
    return {row_id: cell(text) for row_id, text in rows[1:]}


def graph(name: str, runtimes) -> types.SimpleNamespace:
    return types.SimpleNamespace(graph_id=name, config_runtime=np.asarray(runtimes, np.int64))


def test_layout_rows_are_the_configs_sorted_by_score_ties_by_index(monkeypatch, tmp_path):
    rng = np.random.default_rng(3)
    distinct = rng.normal(size=50).astype(np.float32)
    graphs = [graph("g_tied", np.zeros(7)), graph("g_distinct", np.zeros(50))]
    rows = run_layout_script(monkeypatch, tmp_path, graphs, [[TIED, distinct]])
    assert rows == {
        "layout:xla:default:g_tied": [6, 1, 3, 5, 4, 0, 2],  # by hand, as for tiles
        "layout:xla:default:g_distinct": by_score(distinct),
    }


def test_a_layout_row_read_back_gives_the_tau_and_slowdown_of_the_scores(
    monkeypatch, tmp_path, capsys
):
    rng = np.random.default_rng(4)
    graphs, scores = [], []
    for i, count in enumerate((9, 60, 200)):
        runtimes = rng.permutation(count) * 13 + 1000
        noisy = runtimes + rng.normal(scale=4.0 * count, size=count)  # a fair model
        graphs.append(graph(f"g{i}", runtimes))
        scores.append(noisy.astype(np.float32))
    rows = run_layout_script(monkeypatch, tmp_path, graphs, [scores], "--split=valid")
    taus = []
    for g, s in zip(graphs, scores):
        row = rows[f"layout:xla:default:{g.graph_id}"]
        assert row == by_score(s)
        read_back = positions(row, len(s))
        tau = layout_metrics.kendall_tau(s, g.config_runtime)
        assert 0.2 < tau < 0.95  # neither random nor perfect: a wrong order shows
        assert layout_metrics.kendall_tau(read_back, g.config_runtime) == pytest.approx(tau)
        for k in (1, 5):
            from_row = g.config_runtime[row[:k]].min() / g.config_runtime.min() - 1
            assert layout_metrics.slowdown_at_k(s, g.config_runtime, k) == pytest.approx(
                from_row, abs=0
            )
            assert layout_metrics.slowdown_at_k(read_back, g.config_runtime, k) == pytest.approx(
                from_row, abs=0
            )
        taus.append(tau)
    assert f"valid Kendall tau (mean over 3 graphs): {np.mean(taus):.4f}" in capsys.readouterr().out


def test_a_layout_ensemble_ranks_by_mean_z_score_ties_by_index(monkeypatch, tmp_path):
    a = np.array([1.0, 3.0, 1.0, 2.0, 3.0, 0.0])
    b = np.array([40.0, 0.0, 40.0, 10.0, 20.0, 30.0])  # ten times a's scale
    graphs = [graph("g", np.zeros(6))]
    rows = run_layout_script(monkeypatch, tmp_path, graphs, [[a], [b]])
    want = by_score((z(a) + z(b)) / 2)
    assert rows == {"layout:xla:default:g": want}
    assert want != by_score(a + b)  # raw sums would let b decide
    assert want.index(0) < want.index(2)  # 0 and 2 tie in both members
