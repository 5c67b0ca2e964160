"""layout_evaluate.py and baselines/layout/metrics.py: figures checked against brute force.

Tau by counting pairs, slowdowns by hand, program and overall means recomputed,
the ensemble as the mean of z-scores, subsets drawn, recorded and read back,
and the script end to end on the toy set (slow: it trains two tiny models).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from conftest import one_line_error
from conftest import run_repo_script as run

from baselines.core.errors import PipelineError
from baselines.core.plots import tau_per_graph
from baselines.core.ranking import ensemble_scores
from baselines.layout import metrics as evaluate

REPO = Path(__file__).resolve().parents[1]
TOY = REPO / "data" / "layout_toy"
TILE_MODEL = next((REPO / "tests" / "fixtures" / "old_run").glob("model_*"))
TINY = ["--epochs=1", '--model_kwargs_json={"hidden_dim": 8, "op_embed_dim": 8}']
METRICS = ("kendall_tau", "slowdown_1", "slowdown_10", "slowdown_100")


def brute_tau(pred, runtime) -> float:
    """Kendall's tau-b by visiting every unordered pair once."""
    concordant = discordant = tied_pred = tied_runtime = pairs = 0
    for i, j in combinations(range(len(pred)), 2):
        pairs += 1
        dp, dr = pred[i] - pred[j], runtime[i] - runtime[j]
        tied_pred += dp == 0
        tied_runtime += dr == 0
        if dp * dr > 0:
            concordant += 1
        elif dp * dr < 0:
            discordant += 1
    denominator = ((pairs - tied_pred) * (pairs - tied_runtime)) ** 0.5
    return (concordant - discordant) / denominator if denominator else float("nan")


def hand_slowdown(pred, runtime, k) -> float:
    """Best runtime among the k lowest scores (distinct scores) over the best runtime, minus 1."""
    picked = sorted(range(len(pred)), key=lambda i: pred[i])[:k]
    return min(runtime[i] for i in picked) / min(runtime) - 1


def row(rows, model, configs, name, level=None) -> dict:
    """The one row of `name` (a graph unless `level` says otherwise; "ALL": the overall row)."""
    level = level or ("all" if name == "ALL" else "graph")
    key = (model, configs, level, name)
    (found,) = [r for r in rows if (r["model"], r["configs"], r["level"], r["name"]) == key]
    return found


def test_one_graph_tau_and_slowdowns_match_pair_counting_and_hand_values():
    scores = np.array([0.5, 0.1, 0.3, 0.2, 0.9, 0.3])
    runtimes = np.array([10, 40, 20, 30, 15, 20])  # configs 2 and 5 tie in both
    rows = evaluate.evaluation_rows(["g"], [runtimes], {"m": [scores]})
    got = row(rows, "m", "all", "g")
    # By hand: of 15 pairs, (0, 4) is concordant, (2, 5) tied in both, 13 discordant.
    assert brute_tau(scores, runtimes) == pytest.approx(-12 / 14)
    assert got["kendall_tau"] == pytest.approx(-12 / 14)
    # Lowest score is config 1 (runtime 40, best 10): 40/10 - 1; top 10 holds all six.
    assert got["slowdown_1"] == pytest.approx(3.0)
    assert got["slowdown_10"] == 0.0 and got["slowdown_100"] == 0.0
    assert got["configurations"] == 6 and got["level"] == "graph"


def random_graphs(rng, sizes: dict[str, int]) -> tuple[list[str], list, list]:
    ids = list(sizes)
    runtimes = [rng.integers(100, 10_000, size=c) for c in sizes.values()]
    scores = [rng.normal(size=c) for c in sizes.values()]
    return ids, runtimes, scores


def test_program_and_overall_rows_are_means_over_graphs():
    rng = np.random.default_rng(0)
    sizes = {"unet_3d.4x4.bf16": 150, "resnet50.4x4.fp16": 40, "unet_3d.2x2.fp32": 120}
    ids, runtimes, scores = random_graphs(rng, sizes)
    scores.append(np.zeros(30))  # constant scores: tau undefined, left out of tau means
    ids.append("resnet50.2x2.bf16")
    runtimes.append(rng.integers(100, 10_000, size=30))
    rows = evaluate.evaluation_rows(ids, runtimes, {"m": scores})

    per_graph = {}
    for g, s, r in zip(ids, scores, runtimes):
        per_graph[g] = {
            "kendall_tau": brute_tau(s, r) if np.ptp(s) else float("nan"),
            **{f"slowdown_{k}": hand_slowdown(s, r, k) for k in (1, 10, 100)},
        }
        if not np.ptp(s):  # all tied: stable order, the first k configs
            for k in (1, 10, 100):
                per_graph[g][f"slowdown_{k}"] = r[:k].min() / r.min() - 1
    for g in ids:
        for metric in METRICS:
            assert row(rows, "m", "all", g)[metric] == pytest.approx(
                per_graph[g][metric], nan_ok=True
            ), (g, metric)
    programs = {"unet_3d": ids[0::2], "resnet50": ids[1::2]}
    for name, members in [*programs.items(), ("ALL", ids)]:
        got = row(rows, "m", "all", name, "all" if name == "ALL" else "program")
        taus = [per_graph[g]["kendall_tau"] for g in members if g != "resnet50.2x2.bf16"]
        assert got["kendall_tau"] == pytest.approx(np.mean(taus)), name
        for k in (1, 10, 100):
            want = np.mean([per_graph[g][f"slowdown_{k}"] for g in members])
            assert got[f"slowdown_{k}"] == pytest.approx(want), (name, k)
        assert got["graphs"] == len(members)
        assert got["configurations"] == sum(len(scores[ids.index(g)]) for g in members)
    # ALL first, then the programs by name, then the graphs in the order given.
    assert [r["name"] for r in rows] == ["ALL", "resnet50", "unet_3d", *ids]
    assert [r["level"] for r in rows] == ["all", "program", "program", *["graph"] * 4]


def test_ensemble_is_the_mean_of_per_graph_z_scores():
    rng = np.random.default_rng(1)
    a = [rng.normal(5.0, 3.0, size=20), rng.normal(size=7)]
    b = [rng.normal(-100.0, 0.01, size=20), np.full(7, 2.0)]
    c = [rng.normal(size=20), rng.normal(size=7)]

    def z(x):
        return (x - x.mean()) / x.std() if x.std() > 0 else np.zeros_like(x)

    got = ensemble_scores([a, b, c])
    for g in range(2):
        np.testing.assert_allclose(got[g], (z(a[g]) + z(b[g]) + z(c[g])) / 3, atol=1e-12)
    # Standardizing matters: b's tiny scale still counts as much as a's.
    raw = (a[0] + b[0] + c[0]) / 3
    assert not np.allclose(got[0], raw)
    # One model: its own scores, unchanged.
    assert ensemble_scores([a])[0] is a[0]
    with pytest.raises(PipelineError, match="different numbers of kernels or graphs"):
        ensemble_scores([a, b[:1]])


def test_subsets_are_deterministic_sorted_and_of_the_asked_size():
    counts = {"big.4x4.bf16": 5000, "edge": 1000, "small": 17}
    first = evaluate.choose_subsets(counts, 1000, seed=0)
    again = evaluate.choose_subsets(counts, 1000, seed=0)
    other = evaluate.choose_subsets(counts, 1000, seed=1)
    alone = evaluate.choose_subsets({"big.4x4.bf16": 5000}, 1000, seed=0)
    big = first["big.4x4.bf16"]
    assert big.size == 1000 and len(set(big.tolist())) == 1000
    assert np.all(np.diff(big) > 0) and 0 <= big.min() and big.max() < 5000
    np.testing.assert_array_equal(big, again["big.4x4.bf16"])
    np.testing.assert_array_equal(big, alone["big.4x4.bf16"])  # other graphs do not matter
    assert not np.array_equal(big, other["big.4x4.bf16"])
    # Graphs with at most 1000 configurations keep them all.
    np.testing.assert_array_equal(first["edge"], np.arange(1000))
    np.testing.assert_array_equal(first["small"], np.arange(17))
    # Another graph id, another draw.
    renamed = evaluate.choose_subsets({"big.2x2.bf16": 5000}, 1000, seed=0)
    assert not np.array_equal(big, renamed["big.2x2.bf16"])
    with pytest.raises(PipelineError, match="--subset_size"):
        evaluate.choose_subsets(counts, 0, seed=0)


def test_recorded_subsets_round_trip_and_bad_records_are_refused():
    counts = {"a.4x4": 300, "b": 40}
    subsets = evaluate.choose_subsets(counts, 100, seed=3)
    text = evaluate.subsets_json(subsets, 3, 100)
    record = json.loads(text)
    assert record["seed"] == 3 and record["size"] == 100
    assert record["subsets"]["a.4x4"] == sorted(record["subsets"]["a.4x4"])
    back, seed, size = evaluate.parse_subsets(text, "s.json", counts)
    assert (seed, size) == (3, 100) and set(back) == set(counts)
    for g in counts:
        np.testing.assert_array_equal(back[g], subsets[g])

    def refused(subsets_field, match):
        bad = json.dumps({"seed": 0, "subsets": subsets_field})
        with pytest.raises(PipelineError, match=match) as caught:
            evaluate.parse_subsets(bad, "s.json", counts)
        assert "s.json" in str(caught.value) and "\n" not in str(caught.value)

    good = {g: [int(i) for i in idx] for g, idx in subsets.items()}
    refused({**good, "b": [0, 40]}, "index 40 out of range")  # b has 40 configurations
    refused({**good, "b": [-1, 3]}, "index -1 out of range")
    refused({**good, "c": [0]}, "graph c is not in the split")
    refused({"a.4x4": good["a.4x4"]}, "no subset for graph b")
    refused({**good, "b": [1, 1]}, "listed twice")
    refused({**good, "b": [1.5]}, "list of integers")
    with pytest.raises(PipelineError, match="not JSON"):
        evaluate.parse_subsets("{", "s.json", counts)
    # The largest valid index is accepted.
    evaluate.parse_subsets(json.dumps({"subsets": {**good, "b": [39]}}), "s.json", counts)


def test_subset_rows_are_the_figures_of_the_kept_configurations():
    rng = np.random.default_rng(4)
    ids, runtimes, scores = random_graphs(rng, {"x.1": 300, "y": 60})
    subsets = evaluate.choose_subsets(dict(zip(ids, (300, 60))), 50, seed=0)
    rows = evaluate.evaluation_rows(ids, runtimes, {"m": scores}, subsets)
    assert [r["configs"] for r in rows] == ["all"] * 5 + ["subset"] * 5
    for g, s, r in zip(ids, scores, runtimes):
        keep = subsets[g]
        got = row(rows, "m", "subset", g)
        assert got["configurations"] == 50
        assert got["kendall_tau"] == pytest.approx(brute_tau(s[keep], r[keep]))
        assert got["slowdown_1"] == pytest.approx(hand_slowdown(s[keep], r[keep], 1))
        assert got["slowdown_10"] == pytest.approx(hand_slowdown(s[keep], r[keep], 10))
        assert row(rows, "m", "all", g)["configurations"] == len(s)


def test_markdown_and_csv_hold_every_row_and_a_test_split_is_refused():
    rng = np.random.default_rng(5)
    ids, runtimes, scores = random_graphs(rng, {"p.1": 30, "p.2": 20, "q": 25})
    other = [s[::-1].copy() for s in scores]
    subsets = evaluate.choose_subsets(dict(zip(ids, (30, 20, 25))), 10, seed=0)
    rows = evaluate.evaluation_rows(ids, runtimes, {"m": scores, "n": other}, subsets)
    parsed = list(csv.DictReader(io.StringIO(evaluate.csv_text(rows))))
    assert len(parsed) == len(rows) == 2 * 2 * (1 + 2 + 3)
    for got, want in zip(parsed, rows):
        assert (got["model"], got["configs"], got["level"], got["name"]) == (
            want["model"],
            want["configs"],
            want["level"],
            want["name"],
        )
        for metric in METRICS:
            assert float(got[metric]) == pytest.approx(want[metric], abs=5e-5)
    text = evaluate.markdown(rows)
    table_lines = [
        line for line in text.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert len(table_lines) == len(rows) + 2  # a header per block
    assert "## All configurations" in text and "## Fixed subsets of configurations" in text
    tau = row(rows, "n", "subset", "q")["kendall_tau"]
    assert f"| n | subset | graph | q | 1 | 10 | {tau:.4f} |" in text

    hidden = [r.copy() for r in runtimes]
    hidden[1][:] = 0
    with pytest.raises(PipelineError, match="p.2: runtimes are not all positive"):
        evaluate.evaluation_rows(ids, hidden, {"m": scores})


def test_tau_figure_draws_each_models_tau_per_graph():
    rng = np.random.default_rng(6)
    ids, runtimes, scores = random_graphs(rng, {"g.1": 30, "h": 20})
    other = [-s for s in scores]
    subsets = evaluate.choose_subsets({"g.1": 30, "h": 20}, 10, seed=0)
    rows = evaluate.evaluation_rows(ids, runtimes, {"m": scores, "ensemble": other}, subsets)
    figure = tau_per_graph(rows)
    assert len(figure.axes) == 2
    for ax, configs in zip(figure.axes, ("all", "subset")):
        names = [t.get_text() for t in figure.axes[-1].get_xticklabels()]
        assert names == ["ALL", "g.1", "h"]
        drawn = {}
        for container in ax.containers:
            label = container.get_label()
            for name, patch in zip(names, container.patches):
                drawn[label, name] = patch.get_height()
        for model in ("m", "ensemble"):
            for name in names:
                want = row(rows, model, configs, name)["kendall_tau"]
                assert drawn[model, name] == pytest.approx(want), (configs, model, name)


# ---------------------------------------------------------------------------
# The script on the toy set.


@pytest.fixture(scope="module")
def two_models(tmp_path_factory) -> list[Path]:
    out = tmp_path_factory.mktemp("layout_eval_models")
    dirs = []
    for seed in (0, 1):
        done = run(
            "layout_train.py",
            "--source=xla",
            "--search=default",
            *TINY,
            f"--seed={seed}",
            f"--out_dir={out}",
        )
        assert done.returncode == 0, done.stderr
        line = next(x for x in done.stdout.splitlines() if x.startswith("saved model: "))
        dirs.append(Path(line.split(": ", 1)[1]))
    return dirs


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_script_reports_each_model_and_the_ensemble_on_the_toy_set(two_models, tmp_path):
    from baselines.layout.run_data import read_layout_models
    from baselines.layout.scoring import score_runs

    output = tmp_path / "ev" / "res"
    dirs = ",".join(map(str, two_models))
    done = run("layout_evaluate.py", f"--dirs={dirs}", f"--output={output}", "--subset_size=40")
    assert done.returncode == 0, done.stderr
    assert "TOY DATA" in done.stdout
    for ending in (".md", ".csv", "_subsets.json", "_tau_per_graph.png", "_pred_vs_true.png"):
        assert Path(f"{output}{ending}").is_file(), ending
    assert sorted(p.name for p in output.parent.iterdir()) == sorted(
        f"res{e}"
        for e in (".md", ".csv", "_subsets.json", "_tau_per_graph.png", "_pred_vs_true.png")
    )  # no temporaries left
    rows = read_csv(Path(f"{output}.csv"))
    record = json.loads(Path(f"{output}_subsets.json").read_text())
    valid = sorted((TOY / "xla" / "default" / "valid").glob("*.npz"))
    assert sorted(record["subsets"]) == [p.stem for p in valid] and record["seed"] == 0

    # Independent recomputation: each model's scores, the z-score mean, tau by pair counting.
    graphs, members = score_runs(
        read_layout_models(dirs, "--dirs"), TOY / "xla" / "default" / "valid", log=None
    )
    labels = [f"ResModel {d.name}" for d in two_models]
    assert {r["model"] for r in rows} == {*labels, "ensemble"}

    def z(x):
        x = np.asarray(x, np.float64)
        return (x - x.mean()) / x.std()

    for i, graph in enumerate(graphs):
        runtime = graph.config_runtime
        keep = np.asarray(record["subsets"][graph.graph_id])
        assert keep.size == min(40, runtime.size)
        by_model = {
            labels[0]: members[0][i],
            labels[1]: members[1][i],
            "ensemble": (z(members[0][i]) + z(members[1][i])) / 2,
        }
        for label, s in by_model.items():
            for configs, idx in (("all", np.arange(runtime.size)), ("subset", keep)):
                (got,) = [
                    r
                    for r in rows
                    if (r["model"], r["configs"], r["level"], r["name"])
                    == (label, configs, "graph", graph.graph_id)
                ]
                want = brute_tau(s[idx].tolist(), runtime[idx].tolist())
                assert float(got["kendall_tau"]) == pytest.approx(want, abs=5e-5)
                assert int(got["configurations"]) == idx.size
    for label in by_model:
        (overall,) = [
            r for r in rows if (r["model"], r["configs"], r["level"]) == (label, "all", "all")
        ]
        graph_taus = [
            float(r["kendall_tau"])
            for r in rows
            if (r["model"], r["configs"], r["level"]) == (label, "all", "graph")
        ]
        assert float(overall["kendall_tau"]) == pytest.approx(np.mean(graph_taus), abs=2e-4)

    # Reusing the recorded subsets gives the same subset figures, whatever --subset_seed says.
    again = tmp_path / "again"
    done = run(
        "layout_evaluate.py",
        f"--dirs={dirs}",
        f"--output={again}",
        f"--subsets={output}_subsets.json",
        "--subset_seed=7",
    )
    assert done.returncode == 0, done.stderr
    assert Path(f"{again}_subsets.json").read_text() == Path(f"{output}_subsets.json").read_text()
    assert read_csv(Path(f"{again}.csv")) == rows
    # A new seed draws other subsets.
    third = tmp_path / "third"
    done = run(
        "layout_evaluate.py",
        f"--dirs={two_models[0]}",
        f"--output={third}",
        "--subset_size=40",
        "--subset_seed=7",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(Path(f"{third}_subsets.json").read_text())["subsets"] != record["subsets"]
    assert "ensemble" not in {r["model"] for r in read_csv(Path(f"{third}.csv"))}


@pytest.mark.slow
def test_script_refuses_bad_input_in_one_line(two_models, tmp_path):
    output = tmp_path / "res"
    line = one_line_error(run("layout_evaluate.py", f"--dirs={TILE_MODEL}", f"--output={output}"))
    assert "is a tile model" in line

    # A copy of the model whose record says another search.
    other = tmp_path / "other" / two_models[0].name
    shutil.copytree(two_models[0], other)
    with gzip.open(other / "run.jsonz", "rb") as f:
        record = json.loads(f.read())
    with gzip.open(other / "run.jsonz", "wb") as f:
        f.write(json.dumps({**record, "search": "random"}).encode())
    line = one_line_error(
        run("layout_evaluate.py", f"--dirs={two_models[0]},{other}", f"--output={output}")
    )
    assert "--dirs: the models are of different collections" in line

    bad = tmp_path / "bad_subsets.json"
    from baselines.layout.data import read_config_count

    counts = {
        f.stem: read_config_count(f) for f in (TOY / "xla" / "default" / "valid").glob("*.npz")
    }
    recorded = {g: [0, 1] for g in counts}
    recorded["unet_bf16_000"] = [0, counts["unet_bf16_000"]]  # one past the last config
    bad.write_text(json.dumps({"seed": 0, "subsets": recorded}))
    line = one_line_error(
        run(
            "layout_evaluate.py",
            f"--dirs={two_models[0]}",
            f"--output={output}",
            f"--subsets={bad}",
        )
    )
    assert str(bad) in line and f"index {counts['unet_bf16_000']} out of range" in line

    line = one_line_error(
        run("layout_evaluate.py", f"--dirs={two_models[0]}", "--output=/proc/no/res")
    )
    assert line.startswith("error: --output: /proc/no is not writable")
    line = one_line_error(
        run("layout_evaluate.py", f"--dirs={two_models[0]}", f"--output={output}", "--split=test")
    )
    assert "--split" in line
    assert not any(tmp_path.glob("res*"))


def test_recorded_validation_opa_pools_every_pair_of_every_graph(monkeypatch):
    """evaluate_graphs (the `val` a layout run records, and its sweeps rank by) pools the
    ordered pairs of all graphs. The graphs' scores and runtimes are given, and the OPA is
    counted here pair by pair: (pairs with runtime i < runtime j and score i < score j) /
    (pairs with runtime i < runtime j), over all graphs together. Each graph alone, and the
    mean of the graphs' own OPAs, give other values."""
    from types import SimpleNamespace

    from baselines.layout import scoring

    graphs = {
        "a": ([0.1, 0.2, 0.3, 0.4], [1.0, 2.0, 3.0, 4.0]),  # 6 of 6 pairs right
        "b": ([0.3, 0.2, 0.1], [1.0, 2.0, 3.0]),  # 0 of 3 right
        "c": ([0.5, 0.1, 0.4, 0.2, 0.3], [5.0, 1.0, 2.0, 3.0, 5.0]),  # one runtime tie
    }

    class KnownScores:
        def __init__(self, model):
            pass

        def score(self, g):
            return np.asarray(graphs[g.graph_id][0], np.float32)

    monkeypatch.setattr(scoring, "GraphScorer", KnownScores)
    prepared = [
        SimpleNamespace(graph_id=name, raw_runtimes=np.asarray(runtimes))
        for name, (_, runtimes) in graphs.items()
    ]
    right = comparable = 0
    own = []
    for scores, runtimes in graphs.values():
        pairs = [
            (scores[i] < scores[j])
            for i in range(len(scores))
            for j in range(len(scores))
            if runtimes[i] < runtimes[j]
        ]
        right, comparable = right + sum(pairs), comparable + len(pairs)
        own.append(sum(pairs) / len(pairs))
    expected = right / comparable
    got = scoring.evaluate_graphs(model=None, graphs=prepared)
    assert got["graphs"] == 3
    assert got["opa"] == pytest.approx(expected, abs=1e-12)
    assert all(abs(expected - o) > 0.05 for o in own + [np.mean(own)])
