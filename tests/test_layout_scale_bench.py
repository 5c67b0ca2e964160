"""Tests for bench/layout_scale.py's pure parts: recipes, log parsing, extrapolation, targets."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench = _load("layout_scale")


def _one(
    size: float, seconds: float, rss: float, *, train_rss: float = 2000.0, graphs: int = 10
) -> dict:
    """A hand-made result of one collection at one size: every figure ∝ size^1 (or fixed)."""
    return {
        "load": {
            "cold_load_s": seconds,
            "warm_load_s": seconds / 10,
            "cache_mb": size / 1e5,
            "cold_load_rss_mb": rss,
            "warm_load_rss_mb": rss,
            "graphs": graphs,
            "configs": 100_000,
            "node_configs": size,
        },
        "train": {
            "recommended": {
                "wall_s": seconds,
                "peak_rss_mb": train_rss,
                "first_epoch_s": seconds / 2,
                "steady_epoch_s": seconds / 4,
                "final_validation_s": seconds / 4,
                "full_run_s": bench.extrapolated_training_s(seconds, seconds / 2, 40),
                "epochs": 40,
            }
        },
        "validate": {
            "recommended": {
                "subset_s": seconds / 4,
                "subset_rss_mb": rss,
                "all_s": seconds,
                "all_rss_mb": rss,
                "evaluate_wall_s": seconds,
                "evaluate_rss_mb": rss,
            }
        },
        "predict": {"recommended": {"wall_s": seconds / 2, "peak_rss_mb": rss}},
    }


def _verdicts(results: dict) -> dict[str, tuple[str, str]]:
    return {target: (measured, verdict) for target, measured, verdict in bench.targets(results)}


def test_targets_are_judged_at_the_release_graph_count_extrapolated_in_graphs():
    """Below full size, figures go to the release's graph count (xla:default: 61 + 7 + 8
    = 76): along the line through the two largest sizes, or proportionally from one."""
    results = {
        "xla:default": {
            "eighth": _one(1e8, 20.0, 500.0, graphs=10),
            "quarter": _one(2e8, 40.0, 500.0, graphs=20),
        }
    }
    one, how = bench.at_release("xla:default", results["xla:default"])
    assert how == "1x extrapolated: line through eighth and quarter"
    assert one["cold load s (3 splits)"] == pytest.approx(20 + 20 * (76 - 10) / 10)  # 152
    assert one["cold load peak RSS MB"] == pytest.approx(500.0)  # flat stays flat
    single, how = bench.at_release("xla:default", {"eighth": results["xla:default"]["eighth"]})
    assert how == "1x extrapolated: eighth x 7.60 graphs"
    assert single["cold load peak RSS MB"] == pytest.approx(500.0 * 7.6)
    rows = _verdicts(results)
    at = "(xla:default, 1x extrapolated: line through eighth and quarter)"
    assert rows[f"recommended training peak RSS <= 8 GB {at}"] == ("2.00 GB", "met")
    # The prediction's 10 s and 20 s at 10 and 20 graphs: 76 s at 76 graphs.
    assert rows[f"recommended prediction of the test split <= 60 s {at}"] == ("76.0 s", "MISSED")
    label = f"full recommended training <= 1 h {at[:-1]}; 40 epochs from 2)"
    # Each size's 2-epoch run + 38 epochs of seconds / 2: 400 s and 800 s, 3,040 s at 76.
    assert rows[label] == (f"{3040 / 3600:.2f} h", "met")
    growth = rows["no figure grows faster than linearly, k <= 1.1 (xla:default)"]
    assert growth[0].startswith("max k 1.00")
    assert "| cold load s (3 splits) | 20.0 | 40.0 | 152* |" in bench.markdown(
        {"machine": "2 cores", "code": "abc", "repeats": 1, "seed": 0, "results": results}
    )


def test_targets_missed_over_each_limit():
    r = _one(1e8, 200.0, 5000.0, train_rss=9000.0)
    rows = _verdicts({"nlp:default": {"full": r}})
    at = "(nlp:default, full, measured)"
    assert rows[f"recommended training peak RSS <= 8 GB {at}"] == ("9.00 GB", "MISSED")
    assert rows[f"recommended prediction peak RSS <= 4 GB {at}"] == ("5.00 GB", "MISSED")
    assert rows[f"recommended prediction of the test split <= 60 s {at}"] == ("100.0 s", "MISSED")
    assert rows[f"recommended validation on 1,000-config subsets <= 60 s {at}"] == (
        "50.0 s",
        "met",
    )
    assert rows["no figure grows faster than linearly, k <= 1.1 (nlp:default)"][1] == "n/a"
    # 200 + 50 * 38 s = 0.58 h: met; twice as slow epochs (1.11 h) miss.
    label = f"full recommended training <= 1 h {at[:-1]}; 40 epochs from 2)"
    r["train"]["recommended"]["full_run_s"] = bench.extrapolated_training_s(200, 50, 40)
    assert _verdicts({"nlp:default": {"full": r}})[label] == ("0.58 h", "met")
    r["train"]["recommended"]["full_run_s"] = bench.extrapolated_training_s(200, 100, 40)
    assert _verdicts({"nlp:default": {"full": r}})[label] == ("1.11 h", "MISSED")


def test_the_four_caches_together_are_judged_only_when_all_four_were_measured():
    label = "the four collections' caches together <= 4 GB at 1x"
    four = {c: {"full": _one(1e8, 20.0, 500.0)} for c in bench.COLLECTIONS}  # 1,000 MB each
    assert _verdicts(four)[label] == ("4.00 GB", "met")
    four["nlp:random"]["full"]["load"]["cache_mb"] = 1100.0
    assert _verdicts(four)[label] == ("4.10 GB", "MISSED")
    del four["xla:random"]
    assert _verdicts(four)[label] == ("3 of 4 collections measured", "n/a")


def test_growth_faster_than_linear_is_missed_and_exact_power_laws_fit():
    quadratic = {s: _one(x, x**2 / 1e14, 500.0) for s, x in (("eighth", 1e7), ("half", 4e7))}
    k = bench.growth(quadratic)
    assert k["cold load s (3 splits)"] == pytest.approx(2.0)
    assert k["cache on disk MB"] == pytest.approx(1.0)
    assert k["cold load peak RSS MB"] == pytest.approx(0.0)
    row = _verdicts({"xla:random": quadratic})[
        "no figure grows faster than linearly, k <= 1.1 (xla:random)"
    ]
    assert row[1] == "MISSED" and "max k 2.00" in row[0]


def test_failed_steps_are_reported_not_judged():
    r = _one(1e8, 20.0, 500.0)
    r["train"]["baseline"] = {"failed": "benchmark step failed: out of memory"}
    rows = _verdicts({"xla:default": {"eighth": r}})
    at = "(xla:default, 1x extrapolated: eighth x 7.60 graphs)"
    assert rows[f"baseline train {at}"][1] == "n/a"
    assert f"baseline training peak RSS <= 8 GB {at}" not in rows
    assert "baseline 2-epoch run: steady epoch s" not in bench.figures(r)
    assert "recommended 2-epoch run: steady epoch s" in bench.figures(r)
    assert "baseline train (eighth) | failed" in bench.markdown(
        {
            "machine": "2 cores",
            "code": "abc",
            "repeats": 1,
            "seed": 0,
            "results": {"xla:default": {"eighth": r}},
        }
    )


def test_recipe_flags_epochs_and_train_log():
    # Every recipe trains on every configuration: no --max_configs cap on nlp.
    assert bench.recipe_flags("baseline") == [f"--flagfile={bench.RECIPES['baseline']}"]
    assert bench.recipe_flags("recommended") == [f"--flagfile={bench.RECIPES['recommended']}"]
    assert bench.recipe_epochs(bench.RECIPES["recommended"]) == 40
    assert bench.recipe_epochs(bench.RECIPES["baseline"]) == 50
    log = (
        "x\ntrained LayoutSAGE in 12.5 s, best epoch 1: ...\nsaved model: /o/model_ab\nTensorBoard"
    )
    assert bench.parse_train_log(log) == "/o/model_ab"
    with pytest.raises(bench.PipelineError):
        bench.parse_train_log("crashed")


def test_a_full_run_pays_the_final_validation_once_not_every_epoch():
    # A 2-epoch run as EpochTimer records it: the first epoch traces (9 s of steps),
    # the second is steady (2 s of steps); the final validation (60 s) comes after.
    timings = {
        "epoch_train_s": [9.0, 2.0],
        "epoch_val_s": [0.5, 0.25],
        "epoch_callbacks_s": [0.5, 0.75],
        "val_eval_s": 60.0,
    }
    assert bench.epoch_seconds(timings) == [10.0, 3.0]
    # Run wall 90 s (load, both epochs, the final validation, saving); a 50-epoch run
    # adds 48 steady epochs of 3 s, not 48 final validations.
    assert bench.extrapolated_training_s(90.0, 3.0, 50) == 90.0 + 48 * 3.0
    assert bench.extrapolated_training_s(90.0, 3.0, 2) == 90.0
    assert bench.extrapolated_training_s(90.0, 3.0, 1) == 90.0  # never below the run itself
    with pytest.raises(bench.PipelineError, match="per-epoch timings"):
        bench.epoch_seconds({"train_s": 12.0})


def test_real_nlp_configs_are_per_search_and_only_on_nlp():
    # The real release averages about 56,000 (default) and 66,000 (random) per graph.
    for collection, mean in (("nlp:default", 56_000), ("nlp:random", 66_000)):
        low, high = map(int, bench.nlp_configs_of("real", collection).split(","))
        assert (low + high) / 2 == mean
    assert bench.nlp_configs_of("real", "xla:default") is None
    assert bench.nlp_configs_of("100,200", "nlp:random") == "100,200"
    assert bench.nlp_configs_of("100,200", "xla:random") is None
    assert bench.nlp_configs_of(None, "nlp:default") is None
