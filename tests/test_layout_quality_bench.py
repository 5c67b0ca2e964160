"""bench/layout_quality.py and bench/layout_verdicts.py: the verdict rules against
hand-computed examples, the summaries and tables of a tiny fake result set, the flags
that are refused in one line, and one tiny end-to-end run (slow)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import layout_verdicts as quality
import numpy as np
import pytest

from baselines.core.errors import PipelineError

ROOT = Path(__file__).resolve().parents[1]


def load_bench():
    spec = importlib.util.spec_from_file_location(
        "layout_quality_bench", ROOT / "bench" / "layout_quality.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the tau target: gain >= 0.1 and > 2 * (std_baseline + std_candidate), population std ---


def test_tau_met_when_the_gain_is_large_and_beyond_twice_the_spread():
    # baseline mean 0.32, population std sqrt(2 * 0.02^2 / 3) = 0.01633; candidate 0.45 ± 0
    v = quality.tau_verdict([0.30, 0.32, 0.34], [0.45, 0.45, 0.45])
    assert v["met"] is True
    assert v["gain"] == pytest.approx(0.13)
    assert v["needed"] == pytest.approx(2 * math.sqrt(2 * 0.02**2 / 3))


def test_tau_missed_below_the_minimum_gain_even_without_spread():
    v = quality.tau_verdict([0.30, 0.30], [0.39, 0.39])
    assert v["met"] is False and v["needed"] == 0.0


def test_tau_gain_of_exactly_the_minimum_counts():
    assert quality.tau_verdict([0.2, 0.2], [0.3, 0.3])["met"] is True  # 0.0999999... in floats


def test_tau_missed_within_twice_the_spread_though_beyond_once():
    # baseline 0.3 ± 0.1 (population std of 0.2, 0.4); candidate 0.45: gain 0.15, needs > 0.2
    v = quality.tau_verdict([0.2, 0.4], [0.45, 0.45])
    assert v["met"] is False and v["needed"] == pytest.approx(0.2)


def test_tau_twice_the_sum_of_the_spreads_not_of_the_larger_one():
    # both std 0.1: needs > 2 * (0.1 + 0.1) = 0.4; gain 0.3 would pass 2 * max = 0.2
    v = quality.tau_verdict([0.2, 0.4], [0.5, 0.7])
    assert v["met"] is False and v["needed"] == pytest.approx(0.4)


def test_tau_spread_is_the_population_std():
    # population std 0.1 -> needs > 0.2 and the gain 0.25 is met; the sample std
    # (0.1414) would need > 0.283 and miss
    v = quality.tau_verdict([0.2, 0.4], [0.55, 0.55])
    assert v["met"] is True and v["needed"] == pytest.approx(0.2)


# --- slowdown@1: at most half the baseline's; ensemble: above its members' mean ---


def test_slowdown_met_at_exactly_half_and_missed_above():
    assert quality.slowdown_verdict([0.2, 0.2], [0.1, 0.1])["met"] is True
    assert quality.slowdown_verdict([0.2, 0.2], [0.11, 0.11])["met"] is False
    assert quality.slowdown_verdict([0.1, 0.3], [0.05, 0.15])["met"] is True  # means 0.2, 0.1
    assert quality.slowdown_verdict([0.0, 0.0], [0.0, 0.0])["met"] is True


def test_ensemble_must_beat_the_mean_of_its_members():
    members = {"kendall_tau": [0.40, 0.45]}
    v = quality.ensemble_verdict({"ensemble": {"kendall_tau": 0.5}, "members": members})
    assert v["met"] is True
    tie = quality.ensemble_verdict({"ensemble": {"kendall_tau": 0.425}, "members": members})
    assert tie["met"] is False
    worse = quality.ensemble_verdict({"ensemble": {"kendall_tau": 0.41}, "members": members})
    assert worse["met"] is False
    one = quality.ensemble_verdict({"ensemble": None, "members": {"kendall_tau": [0.4]}})
    assert one["met"] is None and quality.verdict_word(None) == "n/a"


# --- summaries and tables of a tiny fake result set ---


def fake_results() -> dict:
    """Two programs ("p.a", "p.b" share program p; "q"), 2 seeds, 2 recipes."""
    ids = ["p.a", "p.b", "q"]
    runtimes = [np.array([1.0, 2.0, 3.0, 4.0]), np.array([4.0, 3.0, 2.0, 1.0]), np.arange(1, 6.0)]
    perfect = [r.copy() for r in runtimes]  # scores in runtime order: tau 1, slowdown 0
    reverse = [-r for r in runtimes]  # tau -1
    good = quality.split_rows(ids, runtimes, [perfect, perfect])
    mixed = quality.split_rows(ids, runtimes, [perfect, reverse])
    return {
        "standard": {
            "xla:default": {
                "baseline": quality.recipe_summary(mixed, mixed, [10.0, 12.0], [0, 1]),
                "recommended": quality.recipe_summary(good, good, [20.0, 20.0], [0, 1]),
            }
        }
    }


def test_summary_holds_means_population_spread_ensemble_and_programs():
    results = fake_results()
    base = results["standard"]["xla:default"]["baseline"]["test"]
    assert base["members"]["kendall_tau"] == [1.0, -1.0]
    assert base["kendall_tau"] == [0.0, 1.0]  # population std of (1, -1)
    assert base["graphs"] == 3 and set(base["programs"]) == {"p", "q"}
    assert base["programs"]["p"]["graphs"] == 2 and base["programs"]["p"]["kendall_tau"] == 0.0
    assert base["slowdown_1"][0] == pytest.approx((0.0 + (3.0 + 3.0 + 4.0) / 3) / 2)
    assert base["ensemble"] is not None
    rec = results["standard"]["xla:default"]["recommended"]
    assert rec["test"]["kendall_tau"] == [1.0, 0.0] and rec["train_wall_s"] == [20.0, 0.0]
    assert rec["test"]["ensemble"]["kendall_tau"] == pytest.approx(1.0)
    json.dumps(results)  # the JSON report holds them as they are


def test_verdicts_and_tables_of_the_fake_results():
    results = fake_results()
    entries = quality.verdicts(results["standard"]["xla:default"], "baseline")
    assert [(e["recipe"], e["target"]) for e in entries] == [
        ("recommended", "tau"),
        ("recommended", "slowdown@1"),
        ("baseline", "ensemble"),
        ("recommended", "ensemble"),
    ]
    # gain 1.0 > 2 * (1.0 + 0.0) is false: missed on the spread, not on the gain
    assert entries[0]["met"] is False and entries[0]["needed"] == pytest.approx(2.0)
    assert entries[1]["met"] is True  # 0 <= half of the baseline's
    assert entries[3]["met"] is False  # the ensemble of two perfect members is no better

    summary = quality.summary_table(results)
    assert summary.splitlines()[0].startswith("| cost model | collection | recipe | val tau |")
    assert "| standard | xla:default | baseline | 0.000 ± 1.000 | 0.000 ± 1.000 |" in summary
    table = quality.verdict_table(
        [{"cost_model": "standard", "collection": "xla:default", **e} for e in entries]
    )
    assert "| standard | xla:default | recommended | tau | missed | test tau 1.000" in table
    programs = quality.program_table(results).splitlines()
    assert programs[0] == (
        "| cost model | collection | program | graphs | baseline tau | baseline slowdown@1 "
        "| recommended tau | recommended slowdown@1 |"
    )
    assert programs[2].startswith("| standard | xla:default | p | 2 | 0.000 |")
    assert programs[3].startswith("| standard | xla:default | q | 1 | 0.000 |")
    ablation = quality.ablation_table(results, "recommended")
    assert "| recommended | 1.000 ± 0.000 | +0.000 | - |" in ablation
    assert "| baseline | 0.000 ± 1.000 | -1.000 | no |" in ablation  # 1.0 < 2 * (1 + 0)
    groups, series = quality.figure_series(results)
    assert groups == ["standard xla:default"]
    assert series == {"baseline": [(0.0, 1.0)], "recommended": [(1.0, 0.0)]}


# --- flags ---


def test_cost_models_pass_the_keyword_only_when_not_standard():
    bench = load_bench()

    def old(out, counts, seed, test_labels=False, log=None): ...

    def new(out, counts, seed, test_labels=False, log=None, cost_model="standard"): ...

    assert bench.cost_model_kwargs("standard", old) == {}
    assert bench.cost_model_kwargs("standard", new) == {}
    assert bench.cost_model_kwargs("alternate", new) == {"cost_model": "alternate"}
    with pytest.raises(PipelineError, match="only the standard cost model") as e:
        bench.cost_model_kwargs("alternate", old)
    assert "\n" not in str(e.value)
    with pytest.raises(PipelineError, match="unknown cost model"):
        bench.cost_model_kwargs("fancy", new)


def test_counts_flag():
    bench = load_bench()
    assert bench.parse_counts("train=8,valid=3,test=2") == {"train": 8, "valid": 3, "test": 2}
    for bad in ("train=8,valid=3", "train=8,valid=3,test=0", "train=x,valid=3,test=3", "a=1"):
        with pytest.raises(PipelineError, match="--counts"):
            bench.parse_counts(bad)


def test_preset_generates_release_size_sets_of_the_chosen_collections(tmp_path, monkeypatch):
    """--preset hands the set to the release writer (test labelled, the cost model, only
    the collections asked for) instead of the toy writer; a set is reused while its
    parameters hold and made anew when the collections change; --counts beside --preset
    and an unknown preset are refused in one line."""
    from synthetic.layout import RELEASE_NOISE_SIGMA, release

    bench = load_bench()
    calls = []

    def fake_release(
        out,
        preset,
        seed,
        collections,
        test_labels,
        cost_model="standard",
        search_space=None,
        log=None,
    ):
        calls.append((preset, seed, tuple(collections), test_labels, cost_model))
        if search_space is not None:
            calls[-1] += (search_space,)
        (out / "xla").mkdir(parents=True)

    def no_toy(*args, **kwargs):
        raise AssertionError("the toy writer was used for a preset")

    monkeypatch.setattr(release, "write_release_dataset", fake_release)
    monkeypatch.setattr("synthetic.layout.write_layout_dataset", no_toy)
    root = bench.generate(tmp_path, "alternate", None, 3, "release_eighth", ["xla:default"])
    assert calls == [("release_eighth", 3, ("xla:default",), True, "alternate")]
    assert bench.generate(tmp_path, "alternate", None, 3, "release_eighth", ["xla:default"]) == root
    assert len(calls) == 1  # reused
    # A set of the code before the release noise level (its marker names no noise: the
    # toy set's 1% it was measured with) is made anew, not reused.
    marker = root.with_suffix(".json")
    before = json.loads(marker.read_text())
    assert before.pop("noise_sigma") == RELEASE_NOISE_SIGMA
    marker.write_text(json.dumps(before))
    assert bench.generate(tmp_path, "alternate", None, 3, "release_eighth", ["xla:default"]) == root
    assert len(calls) == 2
    other = bench.generate(tmp_path, "alternate", None, 3, "release_eighth", ["nlp:random"])
    assert other != root and len(calls) == 3
    # A set of more collections, same parameters otherwise, serves a subset of them; one of
    # another seed or cost model does not.
    both = ["xla:random", "xla:default"]
    wide = bench.generate(tmp_path / "w", "standard", None, 3, "release_eighth", both)
    assert len(calls) == 4
    assert bench.generate(tmp_path / "w", "standard", None, 3, "release", both) != wide
    assert len(calls) == 5  # another preset is made anew
    assert bench.generate(tmp_path / "w", "standard", None, 3, "release_eighth", both[:1]) == wide
    assert len(calls) == 5
    assert bench.generate(tmp_path / "w", "standard", None, 4, "release_eighth", both[:1]) != wide
    assert bench.generate(tmp_path / "w", "alternate", None, 3, "release_eighth", both[:1]) != wide
    assert len(calls) == 7

    # The decision search space is a set of its own; the permutation sets keep the names
    # they had before the option (no search_space in their marker).
    assert "search_space" not in json.loads(wide.with_suffix(".json").read_text())
    tied = bench.generate(tmp_path / "w", "standard", None, 3, "release_eighth", both, "decisions")
    assert tied != wide and len(calls) == 8 and calls[-1][-1] == "decisions"
    assert bench.generate(tmp_path / "w", "standard", None, 3, "release_eighth", both) == wide
    with pytest.raises(PipelineError, match="--search_space decisions: release-size sets only"):
        bench.LayoutQuality(bench.build_parser().parse_args(["--search_space=decisions"]))
    with pytest.raises(PipelineError, match="--search_space: unknown 'free'"):
        bench.LayoutQuality(bench.build_parser().parse_args(["--search_space=free"]))

    args = bench.build_parser().parse_args(
        ["--preset=release_eighth", "--counts=train=1,valid=1,test=1"]
    )
    with pytest.raises(PipelineError, match="--counts and --preset") as e:
        bench.LayoutQuality(args)
    assert "\n" not in str(e.value)
    with pytest.raises(PipelineError, match="--preset: unknown 'release_tenth'"):
        bench.LayoutQuality(bench.build_parser().parse_args(["--preset=release_tenth"]))
    quality = bench.LayoutQuality(bench.build_parser().parse_args(["--preset=release_half"]))
    assert quality.counts is None and quality.preset == "release_half"
    assert bench.LayoutQuality(bench.build_parser().parse_args([])).counts == {
        "train": 8,
        "valid": 3,
        "test": 3,
    }


def test_ablation_lists_the_recommended_recipe_then_every_variant():
    bench = load_bench()
    names = bench.ablation_recipes()
    assert names[0] == "recommended" and len(names) > 5
    assert all(bench.recipe_path(n).is_file() for n in names)


@pytest.mark.slow
def test_a_tiny_run_writes_the_report_and_reuses_its_runs(tmp_path, monkeypatch, capsys):
    bench = load_bench()
    out = tmp_path / "out"
    argv = [
        f"--out={out}",
        "--counts=train=2,valid=1,test=1",
        "--collections=xla:default",
        "--seeds=0",
        "--epochs=1",
    ]
    assert bench.main(argv) == 0
    # One line as each of the two runs starts and one as it ends, on stderr (the report is
    # stdout's).
    progress = capsys.readouterr().err.splitlines()
    for recipe in ("baseline", "recommended"):
        run = f"xla:default {recipe} seed 0: "
        assert sum(run + "training" in line for line in progress) == 1
        ended = [line for line in progress if run + "trained in " in line]
        assert len(ended) == 1 and "(best epoch 1 of 1, counted from 1)" in ended[0]
    result = json.loads((out / "layout_quality.json").read_text())
    cell = result["results"]["standard"]["xla:default"]
    assert set(cell) == {"baseline", "recommended"}
    assert cell["recommended"]["test"]["graphs"] == 1
    assert [v["target"] for v in result["verdicts"]] == [
        "tau",
        "slowdown@1",
        "ensemble",
        "ensemble",
    ]
    assert (out / "layout_quality.png").stat().st_size > 0
    assert (
        "| standard | xla:default | recommended | tau |" in (out / "layout_quality.md").read_text()
    )

    def no_training(*args, **kwargs):
        raise AssertionError("a run was trained again")

    monkeypatch.setattr(bench, "train_and_score", no_training)
    assert bench.main(argv) == 0
    assert sum(": reused " in line for line in capsys.readouterr().err.splitlines()) == 2
    again = json.loads((out / "layout_quality.json").read_text())
    assert again["results"] == result["results"]


def tau_summary(valid: tuple[float, float], test: float) -> dict:
    return {"valid": {"kendall_tau": list(valid)}, "test": {"kendall_tau": [test, 0.0]}}


def test_a_probe_is_adopted_only_beyond_the_larger_spread_in_every_pair():
    """Catches a spread taken as the smaller std, a rule satisfied by one pair, a test change
    read as the validation one, and a change measured the wrong way round."""
    pairs = {
        "permutations, standard": {
            "recommended": tau_summary((0.50, 0.01), 0.40),
            "probe": tau_summary((0.53, 0.02), 0.10),  # +0.03 beyond 0.02
        },
        "decisions, standard": {
            "recommended": tau_summary((0.60, 0.04), 0.50),
            "probe": tau_summary((0.63, 0.01), 0.90),  # +0.03 within 0.04, the larger std
        },
    }
    verdict = quality.probe_adoption(pairs, "probe", "recommended")
    assert not verdict["adopted"]
    assert [r["beyond"] for r in verdict["rows"]] == [True, False]
    assert [r["change"] for r in verdict["rows"]] == pytest.approx([0.03, 0.03])
    assert [r["spread"] for r in verdict["rows"]] == [0.02, 0.04]
    assert [r["test_change"] for r in verdict["rows"]] == pytest.approx([-0.30, 0.40])
    pairs["decisions, standard"]["probe"] = tau_summary((0.65, 0.01), 0.40)
    assert quality.probe_adoption(pairs, "probe", "recommended")["adopted"]
    backwards = quality.probe_adoption(pairs, "recommended", "probe")
    assert not backwards["adopted"] and not any(r["beyond"] for r in backwards["rows"])


def test_the_probe_rule_script_joins_the_worlds_reports_per_collection(tmp_path):
    """Each folder is one world; its cost models make the pairs; a collection is judged on its
    own pairs only (xla adopts, nlp does not), against the reports' common incumbent."""
    spec = importlib.util.spec_from_file_location(
        "probe_rule", Path(__file__).resolve().parents[1] / "bench" / "layout_probe_rule.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    folders = []
    for world in ("permutations", "decisions"):
        results = {
            cm: {
                "xla:default": {
                    "recommended": tau_summary((0.5, 0.01), 0.5),
                    "probe": tau_summary((0.6, 0.01), 0.5),
                },
                "nlp:default": {
                    "recommended": tau_summary((0.5, 0.01), 0.5),
                    "probe": tau_summary((0.6 if world == "decisions" else 0.4, 0.01), 0.5),
                },
            }
            for cm in ("standard", "alternate")
        }
        folder = tmp_path / world
        folder.mkdir()
        report = {"baseline": "recommended", "search_space": world, "results": results}
        (folder / "layout_quality.json").write_text(json.dumps(report))
        folders.append(folder)
    pairs, incumbent = script.read_pairs(folders)
    assert incumbent == "recommended"
    assert sorted(pairs["xla:default"]) == sorted(
        f"{w}, {cm}" for w in ("permutations", "decisions") for cm in ("standard", "alternate")
    )
    lines = script.report(pairs, incumbent).splitlines()
    rows = [
        line
        for line in lines
        if line.startswith(("| xla:default | probe", "| nlp:default | probe"))
    ]
    assert any(line.startswith("| xla:default | recommended (val, test tau) |") for line in lines)
    assert [line.split(" | ")[-1].rstrip(" |") for line in rows] == [
        "yes",
        "no",
    ]
