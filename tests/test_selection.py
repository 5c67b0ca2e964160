"""Choosing on validation only, and the leave-one-world-out report.

The pure parts against hand-made summaries; then `bench/quality.py` on tiny
worlds, checking that choosing reads no test split and that each held-out
world's test split is read only after its recipe was chosen.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys

import pytest
import selection
from conftest import ROOT

from baselines.core.errors import PipelineError


def summary(top5: float, top1: float = 0.5, programs=None) -> dict:
    programs = programs or {"p": top5}
    return {
        "top5_err": (top5, 0.01),
        "top1_err": (top1, 0.02),
        "programs": {
            p: {"top5_err": v, "top1_err": 0.0, "kernels": 1} for p, v in programs.items()
        },
        "worst_program": max(programs, key=programs.get),
        "ensemble": {"top5_err": top5 * 0.9},
    }


def row(model, program, top5, top1=0.1, kernels=3):
    return dict(
        model=model,
        program=program,
        kernels=kernels,
        top1_err=top1,
        top5_err=top5,
        top10_err=top5 / 2,
        kaggle_score=1 - top5,
        opa=0.9,
    )


def test_summaries_are_means_over_seeds_with_the_worst_program():
    rows = [
        row("0", "ALL", 0.10, 0.30),
        row("0", "a", 0.05),
        row("0", "b", 0.20),
        row("1", "ALL", 0.20, 0.50),
        row("1", "a", 0.15),
        row("1", "b", 0.10),
        row("ensemble", "ALL", 0.12),
        row("ensemble", "a", 0.01),
        row("ensemble", "b", 0.99),  # the ensemble's programs never count as a seed's
    ]
    s = selection.summarize_runs(rows, [10.0, 14.0])
    assert s["top5_err"] == pytest.approx((0.15, math.sqrt(0.005)))
    assert s["top1_err"][0] == pytest.approx(0.40)
    assert s["ensemble"]["top5_err"] == 0.12 and s["seeds"] == 2
    assert s["programs"]["a"]["top5_err"] == pytest.approx(0.10)
    assert s["programs"]["b"]["top5_err"] == pytest.approx(0.15)
    assert s["worst_program"] == "b"
    assert s["train_wall_s"] == pytest.approx((12.0, math.sqrt(8.0)))


def test_choose_takes_the_lowest_mean_validation_top5_then_top1():
    valid = {
        "w1": {"a": summary(0.10, 0.5), "b": summary(0.12, 0.1), "c": summary(0.10, 0.4)},
        "w2": {"a": summary(0.30, 0.5), "b": summary(0.20, 0.1), "c": summary(0.30, 0.4)},
    }
    assert selection.choose(valid, ["w1"], ["a", "b"]) == "a"
    assert selection.choose(valid, ["w1", "w2"], ["a", "b", "c"]) == "b"  # 0.16 < 0.20
    assert selection.choose(valid, ["w1"], ["a", "c"]) == "c"  # tie on top-5: top-1 decides


def test_a_held_out_world_never_sees_its_own_validation():
    valid = {
        "x": {"a": summary(0.01), "b": summary(0.50)},  # only x likes a
        "y": {"a": summary(0.30), "b": summary(0.10)},
        "z": {"a": summary(0.30), "b": summary(0.10)},
    }
    choices = selection.lowo_choices(valid, ["x", "y", "z"], ["a", "b"])
    # Held out, x sees only y and z (b better there); y and z each see x, where a
    # is far better (means 0.155 against 0.30).
    assert choices == {"x": "b", "y": "a", "z": "a"}
    # x's own numbers cannot move x's choice; another world's can.
    valid["x"]["b"] = summary(0.99)
    assert selection.lowo_choices(valid, ["x", "y", "z"], ["a", "b"])["x"] == "b"
    valid["y"]["a"] = summary(0.0)
    valid["z"]["a"] = summary(0.0)
    assert selection.lowo_choices(valid, ["x", "y", "z"], ["a", "b"])["x"] == "a"


def test_lowo_rows_compare_the_chosen_recipe_with_the_baseline_on_its_worst_program():
    test = {
        "x": {
            "good": summary(0.02, 0.10, {"p": 0.01, "q": 0.03}),
            "baseline": summary(0.08, 0.40, {"p": 0.02, "q": 0.09}),
        }
    }
    (r,) = selection.lowo_rows(test, {"x": "good"}, "baseline")
    assert r["top5_ratio"] == pytest.approx(0.25) and r["top1_ratio"] == pytest.approx(0.25)
    assert r["worst_program"] == "q"
    assert (r["worst_top5_err"], r["baseline_on_worst_top5_err"]) == (0.03, 0.09)
    assert r["ensemble_top5_err"] == pytest.approx(0.018)


def load_quality_script():
    spec = importlib.util.spec_from_file_location("quality_bench", ROOT / "bench" / "quality.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_benchmark_chooses_without_reading_any_test_split(tmp_path, monkeypatch):
    """`--protocol validation` reads no test split; `--protocol lowo` reads each held-out
    world's test split only after every choice is made (by the mean, and by the worst-world
    rule with an incumbent), then scores every recipe's runs on it."""
    quick = tmp_path / "quick.flags"
    quick.write_text('--model=MLP\n--epochs=1\n--model_kwargs_json={"hidden_dim": 8}\n')
    other = tmp_path / "other.flags"
    other.write_text(f"--flagfile={quick}\n--lr=0.01\n")
    quality = load_quality_script()
    from baselines.tiles import data

    events = []
    real_load = data.load_split

    def load_split(path, *args, **kwargs):
        events.append(("read", str(path)))
        return real_load(path, *args, **kwargs)

    real_choices = selection.lowo_choices

    def lowo_choices(*args, **kwargs):
        events.append(("choose", ""))
        return real_choices(*args, **kwargs)

    real_worst = selection.lowo_worst_choices

    def lowo_worst_choices(*args, **kwargs):
        events.append(("choose", ""))
        return real_worst(*args, **kwargs)

    monkeypatch.setattr(data, "load_split", load_split)
    monkeypatch.setattr(selection, "lowo_choices", lowo_choices)
    monkeypatch.setattr(selection, "lowo_worst_choices", lowo_worst_choices)
    base = [
        "quality.py",
        f"--out={tmp_path / 'out'}",
        "--size=tiny",
        "--seeds=1",
        "--worlds=default,serial",
        f"--recipes={quick},{other}",
        f"--baseline={quick}",
    ]
    monkeypatch.setattr(sys, "argv", base)
    assert quality.main() == 0
    reads = [path for kind, path in events if kind == "read"]
    assert reads and all(p.endswith("/valid") for p in reads)
    assert not any("holdout" in p or p.endswith("/test") for p in reads)

    events.clear()
    monkeypatch.setattr(sys, "argv", [*base, "--protocol=lowo"])
    assert quality.main() == 0
    kinds = [kind for kind, _ in events]
    first_test = next(i for i, (kind, p) in enumerate(events) if "holdout" in p)
    assert kinds.index("choose") < first_test
    assert all("holdout" not in p for _, p in events[: kinds.index("choose")])
    tested = [p for _, p in events if "holdout" in p]
    assert sorted(tested) == sorted({p for p in tested})  # each world's test split read once
    assert (tmp_path / "out" / "lowo.md").is_file() and (tmp_path / "out" / "lowo.png").is_file()

    events.clear()
    monkeypatch.setattr(sys, "argv", [*base, "--protocol=lowo", f"--incumbent={other}"])
    assert quality.main() == 0
    kinds = [kind for kind, _ in events]
    assert all("holdout" not in p for _, p in events[: kinds.index("choose")])
    text = (tmp_path / "out" / "lowo.md").read_text()
    assert "worst (world)" in text and f"incumbent {other}" in text

    # A closing world is made, trained and read only after every choice, and reported.
    real_generate = quality.generate

    def generate(out, size, world, seed):
        events.append(("make", world))
        return real_generate(out, size, world, seed)

    monkeypatch.setattr(quality, "generate", generate)
    events.clear()
    monkeypatch.setattr(sys, "argv", [*base, "--protocol=lowo", "--closing_worlds=cache"])
    assert quality.main() == 0
    kinds = [kind for kind, _ in events]
    chosen_at = kinds.index("choose")
    assert all("cache" not in p for _, p in events[:chosen_at])
    assert ("make", "cache") in events[chosen_at:]
    assert any("holdout/tiny_cache" in p for _, p in events[chosen_at:])
    assert not any("tiny_cache" in p and p.endswith("/valid") for _, p in events)
    text = (tmp_path / "out" / "lowo.md").read_text()
    closing = json.loads((tmp_path / "out" / "lowo.json").read_text())["closing"]["cache"]
    expected = closing[str(other)]["top5_err"][0] / closing[str(quick)]["top5_err"][0]
    assert "cache (closing) top-5 / top-1" in text and f"{expected:.2f} / " in text
    monkeypatch.setattr(sys, "argv", [*base, "--protocol=lowo", "--closing_worlds=serial"])
    with pytest.raises(PipelineError, match="also in --worlds"):
        quality.main()


def spread_summary(top5: float, std: float) -> dict:
    return {**summary(top5), "top5_err": (top5, std)}


def test_ratio_rows_give_every_recipes_mean_and_worst_world():
    """Catches a worst taken as the lowest ratio, or a mean over the wrong worlds."""
    test = {
        "x": {"r": summary(0.02), "baseline": summary(0.10)},  # 0.2
        "y": {"r": summary(0.06), "baseline": summary(0.10)},  # 0.6
        "z": {"r": summary(0.01), "baseline": summary(0.10)},  # 0.1
    }
    (row,) = selection.ratio_rows(test, ["x", "y", "z"], ["r"], "baseline")
    assert row["ratios"] == pytest.approx({"x": 0.2, "y": 0.6, "z": 0.1})
    assert row["mean"] == pytest.approx(0.3)
    assert (row["worst"], row["worst_world"]) == (pytest.approx(0.6), "y")


def worlds_with(incumbent, candidate, std=0.002):
    """Validation summaries: per world (incumbent, candidate) top-5, baseline 0.10 everywhere."""
    return {
        w: {
            "inc": spread_summary(incumbent[i], std),
            "cand": spread_summary(candidate[i], std),
            "baseline": spread_summary(0.10, std),
        }
        for i, w in enumerate(["x", "y", "z"])
    }


def test_the_worst_world_rule_adopts_only_a_gain_on_the_worst_world_that_hurts_none():
    """Catches: the sign of the gain flipped, the spread ignored, the worst world taken as the
    best one, and a hurt world not checked. The incumbent's worst world is y (0.04 / 0.10)."""
    worlds = ["x", "y", "z"]
    # y improves by 0.010 > spread 0.002; x and z unchanged: adopted.
    ok, why = selection.adopts(
        worlds_with([0.01, 0.04, 0.02], [0.01, 0.03, 0.02]), worlds, "cand", "inc", "baseline"
    )
    assert ok and "(y)" in why
    # The gain on y is inside the spread (0.001 < 0.002): kept.
    ok, _ = selection.adopts(
        worlds_with([0.01, 0.04, 0.02], [0.01, 0.039, 0.02]), worlds, "cand", "inc", "baseline"
    )
    assert not ok
    # A large gain on x (not the worst world) does not count: kept.
    ok, _ = selection.adopts(
        worlds_with([0.01, 0.04, 0.02], [0.001, 0.04, 0.02]), worlds, "cand", "inc", "baseline"
    )
    assert not ok
    # y improves, but z gets worse beyond its spread: kept, and the reason names z.
    ok, why = selection.adopts(
        worlds_with([0.01, 0.04, 0.02], [0.01, 0.03, 0.03]), worlds, "cand", "inc", "baseline"
    )
    assert not ok and "z" in why
    # A candidate that is worse on the worst world: kept.
    ok, _ = selection.adopts(
        worlds_with([0.01, 0.04, 0.02], [0.01, 0.05, 0.02]), worlds, "cand", "inc", "baseline"
    )
    assert not ok


def test_the_worst_world_rule_leaves_each_world_out_of_its_own_choice():
    """Held out, a world's own validation cannot adopt a candidate: y is the incumbent's
    worst world and the only one the candidate improves, so only the other worlds adopt it."""
    valid = worlds_with([0.01, 0.04, 0.02], [0.01, 0.03, 0.02])
    choices = selection.lowo_worst_choices(
        valid, ["x", "y", "z"], ["inc", "cand"], "inc", "baseline"
    )
    assert {w: c for w, (c, _) in choices.items()} == {"x": "cand", "y": "inc", "z": "cand"}
