"""Layout recipe quality over seeds: summaries, the targets' verdicts, tables and figure.

    rows = split_rows(graph_ids, runtimes, [scores_seed0, scores_seed1, scores_seed2])
    summary = recipe_summary(valid_rows, test_rows, walls=[7.1, 7.3, 6.9], seeds=[0, 1, 2])
    for v in verdicts(results["standard"]["xla:default"], baseline="baseline"):
        print(v["target"], verdict_word(v["met"]), v["detail"])

The pure part of `bench/layout_quality.py` (numpy only, no TensorFlow): it
takes the scores each seed's model gave a split's graphs, and returns
`evaluate.evaluation_rows` of every seed ("0", "1", ...) and of their ensemble
(`core.ranking.ensemble_scores`), their summary, and the verdicts.

Spread: the population standard deviation over seeds (n in the denominator,
as `bench/layout_toy.py`), 0 for one seed. The targets, each met or missed:

- tau: the candidate's mean test Kendall's tau beats the baseline's by at least
  MIN_TAU_GAIN (0.1, to 1e-9) *and* by more than twice the sum of the two
  spreads: gain > 2 * (std_baseline + std_candidate).
- slowdown@1: the candidate's mean test slowdown@1 is at most half the
  baseline's (candidate <= 0.5 * baseline).
- ensemble, per recipe: the seeds' ensemble's test tau is higher than the mean
  test tau of its members (n/a with one seed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from quality_report import markdown_table, mean_std, pm

from baselines.core.ranking import ensemble_scores
from baselines.layout.metrics import SLOWDOWN_KS, evaluation_rows

METRICS = ("kendall_tau", *(f"slowdown_{k}" for k in SLOWDOWN_KS))
ENSEMBLE = "ensemble"
MIN_TAU_GAIN = 0.1
SPREAD_FACTOR = 2.0
SLOWDOWN_FRACTION = 0.5
_EPS = 1e-9


def split_rows(
    graph_ids: Sequence[str],
    runtimes: Sequence[np.ndarray],
    members: Sequence[Sequence[np.ndarray]],
) -> list[dict]:
    """Evaluation rows (all configurations) of each seed's scores, "0", "1", ..., and with
    several seeds of their ensemble ("ensemble").

        rows = split_rows(["a", "b"], [ra, rb], [[s0a, s0b], [s1a, s1b]])
    """
    by_model = {str(i): list(scores) for i, scores in enumerate(members)}
    if len(members) > 1:
        by_model[ENSEMBLE] = ensemble_scores(members)
    return evaluation_rows(graph_ids, runtimes, by_model)


def split_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One split's rows (`split_rows`) -> mean and spread over seeds, per-seed values, the
    ensemble's figures and per-program means over seeds.

        s = split_summary(rows); s["kendall_tau"]  # [mean, population std] over seeds
    """
    every = [r for r in rows if r["level"] == "all" and r["configs"] == "all"]
    members = [r for r in every if r["model"] != ENSEMBLE]
    ensemble = [r for r in every if r["model"] == ENSEMBLE]
    out: dict[str, Any] = {
        m: list(mean_std([r[m] for r in members], population=True)) for m in METRICS
    }
    out["members"] = {m: [r[m] for r in members] for m in METRICS}
    out["ensemble"] = {m: ensemble[0][m] for m in METRICS} if ensemble else None
    out["graphs"] = members[0]["graphs"] if members else 0
    programs: dict[str, dict[str, float]] = {}
    program_rows = [r for r in rows if r["level"] == "program" and r["configs"] == "all"]
    for name in sorted({r["name"] for r in program_rows}):
        mine = [r for r in program_rows if r["name"] == name and r["model"] != ENSEMBLE]
        programs[name] = {m: _nanmean([r[m] for r in mine]) for m in METRICS}
        programs[name]["graphs"] = mine[0]["graphs"]
    out["programs"] = programs
    return out


def recipe_summary(
    valid_rows: Sequence[Mapping[str, Any]],
    test_rows: Sequence[Mapping[str, Any]],
    walls: Sequence[float],
    seeds: Sequence[int],
) -> dict[str, Any]:
    """A recipe's summary in one collection: valid and test (`split_summary`), training
    wall seconds (mean, population std) and the seeds.

        summary = recipe_summary(valid_rows, test_rows, [7.1, 7.3], [0, 1])
    """
    return {
        "valid": split_summary(valid_rows),
        "test": split_summary(test_rows),
        "train_wall_s": list(mean_std(walls, population=True)),
        "seeds": list(seeds),
    }


def tau_verdict(baseline: Sequence[float], candidate: Sequence[float]) -> dict[str, Any]:
    """The tau target (module docstring) on the two recipes' per-seed test taus.

    tau_verdict([0.30, 0.32], [0.45, 0.45])["met"] -> True (gain 0.14 >= 0.1, > 2 * 0.01)
    """
    (mb, sb), (mc, sc) = mean_std(baseline, population=True), mean_std(candidate, population=True)
    gain = mc - mb
    needed = SPREAD_FACTOR * (sb + sc)
    met = bool(gain >= MIN_TAU_GAIN - _EPS and gain > needed)
    detail = (
        f"test tau {mc:.3f} ± {sc:.3f} vs {mb:.3f} ± {sb:.3f}: gain {gain:+.3f} "
        f"(needs >= {MIN_TAU_GAIN} and > 2 × ({sb:.3f} + {sc:.3f}) = {needed:.3f})"
    )
    return {"target": "tau", "met": met, "gain": gain, "needed": needed, "detail": detail}


def slowdown_verdict(baseline: Sequence[float], candidate: Sequence[float]) -> dict[str, Any]:
    """The slowdown@1 target on the two recipes' per-seed test slowdown@1.

    slowdown_verdict([0.20, 0.20], [0.10, 0.10])["met"] -> True (0.10 <= 0.5 × 0.20)
    """
    mb, mc = mean_std(baseline)[0], mean_std(candidate)[0]
    limit = SLOWDOWN_FRACTION * mb
    met = bool(mc <= limit + _EPS)
    detail = (
        f"test slowdown@1 {mc:.4f} vs {mb:.4f} "
        f"(needs <= {SLOWDOWN_FRACTION} × {mb:.4f} = {limit:.4f})"
    )
    return {"target": "slowdown@1", "met": met, "limit": limit, "detail": detail}


def ensemble_verdict(test: Mapping[str, Any]) -> dict[str, Any]:
    """The ensemble target on one recipe's test summary; met None (n/a) without an ensemble.

    ensemble_verdict({"ensemble": {"kendall_tau": 0.5}, "members": {"kendall_tau": [0.4, 0.45]}})
    -> met True (0.5 > 0.425)
    """
    members = mean_std(test["members"]["kendall_tau"])[0]
    if not test.get("ensemble"):
        return {"target": "ensemble", "met": None, "detail": "one seed: no ensemble"}
    ens = test["ensemble"]["kendall_tau"]
    met = bool(ens > members)
    detail = f"ensemble test tau {ens:.3f} vs members' mean {members:.3f} ({ens - members:+.3f})"
    return {"target": "ensemble", "met": met, "detail": detail}


def verdicts(by_recipe: Mapping[str, Mapping[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """One collection's verdicts: tau and slowdown@1 of every other recipe against
    `baseline`, then the ensemble target of each recipe (each dict names its "recipe").

        verdicts(results["standard"]["xla:default"], "baseline")
    """
    base = by_recipe[baseline]["test"]["members"]
    out = []
    for name, summary in by_recipe.items():
        if name == baseline:
            continue
        mine = summary["test"]["members"]
        out.append({"recipe": name, **tau_verdict(base["kendall_tau"], mine["kendall_tau"])})
        out.append({"recipe": name, **slowdown_verdict(base["slowdown_1"], mine["slowdown_1"])})
    out += [{"recipe": name, **ensemble_verdict(s["test"])} for name, s in by_recipe.items()]
    return out


def probe_adoption(
    pairs: Mapping[str, Mapping[str, Mapping[str, Any]]], probe: str, incumbent: str
) -> dict[str, Any]:
    """Whether `probe` replaces `incumbent` in one collection: it must raise the mean validation
    tau beyond the seed spread (the larger of the two recipes' population std) in every pair.
    `pairs[name]` is the collection's results in one (world, cost model) pair, by recipe. Per
    pair: the validation and test tau changes, the spread and whether it was beyond.

        probe_adoption({"decisions, standard": results["standard"]["xla:default"]}, "p", "r")
    """
    rows = []
    for name, by_recipe in pairs.items():
        mine, theirs = by_recipe[probe], by_recipe[incumbent]
        change = mine["valid"]["kendall_tau"][0] - theirs["valid"]["kendall_tau"][0]
        spread = max(mine["valid"]["kendall_tau"][1], theirs["valid"]["kendall_tau"][1])
        test = mine["test"]["kendall_tau"][0] - theirs["test"]["kendall_tau"][0]
        rows.append(
            {"pair": name, "change": change, "spread": spread, "test_change": test,
             "beyond": bool(change > spread)}
        )  # fmt: skip
    return {"probe": probe, "adopted": bool(rows) and all(r["beyond"] for r in rows), "rows": rows}


def verdict_word(met: bool | None) -> str:
    """ "met", "missed" or "n/a" (None)."""
    return "n/a" if met is None else ("met" if met else "missed")


def ablation_rows(
    by_recipe: Mapping[str, Mapping[str, Any]], reference: str
) -> list[dict[str, Any]]:
    """Each variant's test tau and slowdown@1 against `reference`'s: the change of the means
    and whether it exceeds twice the sum of the two spreads (as the tau target).

        ablation_rows(results["standard"]["xla:default"], "recommended")
    """
    ref = by_recipe[reference]["test"]
    rows = []
    for name, summary in by_recipe.items():
        test = summary["test"]
        delta = test["kendall_tau"][0] - ref["kendall_tau"][0]
        needed = SPREAD_FACTOR * (test["kendall_tau"][1] + ref["kendall_tau"][1])
        rows.append(
            {
                "recipe": name,
                "kendall_tau": test["kendall_tau"],
                "delta_tau": delta,
                "beyond_spread": bool(abs(delta) > needed) if name != reference else None,
                "slowdown_1": test["slowdown_1"],
                "delta_slowdown_1": test["slowdown_1"][0] - ref["slowdown_1"][0],
                "train_wall_s": summary["train_wall_s"],
            }
        )
    return rows


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def _f(value: float, digits: int = 3) -> str:
    return "nan" if not math.isfinite(value) else f"{value:.{digits}f}"


def summary_table(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """results[cost_model][collection][recipe] (`recipe_summary`) as one markdown table."""
    header = [
        "cost model", "collection", "recipe", "val tau", "test tau", "test slowdown@1",
        "test slowdown@10", "test slowdown@100", "test tau: ensemble / members", "train s",
    ]  # fmt: skip
    rows = []
    for cost_model, by_collection in results.items():
        for collection, by_recipe in by_collection.items():
            for name, s in by_recipe.items():
                test = s["test"]
                ens = test["ensemble"]
                members = mean_std(test["members"]["kendall_tau"])[0]
                ens_text = f"{_f(ens['kendall_tau'])} / {_f(members)}" if ens else "-"
                rows.append(
                    [
                        cost_model, collection, name, pm(s["valid"]["kendall_tau"]),
                        pm(test["kendall_tau"]), pm(test["slowdown_1"], 4),
                        pm(test["slowdown_10"], 4), pm(test["slowdown_100"], 4), ens_text,
                        pm(s["train_wall_s"], 1),
                    ]
                )  # fmt: skip
    return markdown_table(header, rows)


def verdict_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """Verdict entries (each with cost_model, collection, recipe, target, met, detail)."""
    header = ["cost model", "collection", "recipe", "target", "verdict", "numbers"]
    rows = [
        [
            e["cost_model"],
            e["collection"],
            e["recipe"],
            e["target"],
            verdict_word(e["met"]),
            e["detail"],
        ]
        for e in entries
    ]
    return markdown_table(header, rows)


def program_table(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """Per test program, each recipe's test tau and slowdown@1 (means over seeds)."""
    recipes = list(
        dict.fromkeys(n for by_c in results.values() for by_r in by_c.values() for n in by_r)
    )
    header = ["cost model", "collection", "program", "graphs"]
    header += [f"{n} {what}" for n in recipes for what in ("tau", "slowdown@1")]
    rows = []
    for cost_model, by_collection in results.items():
        for collection, by_recipe in by_collection.items():
            programs = list(
                dict.fromkeys(p for s in by_recipe.values() for p in s["test"]["programs"])
            )
            for program in programs:
                cells: list[object] = []
                graphs = 0
                for name in recipes:
                    p = by_recipe.get(name, {}).get("test", {}).get("programs", {}).get(program)
                    if p is None:
                        cells += ["-", "-"]
                        continue
                    graphs = p["graphs"]
                    cells += [_f(p["kendall_tau"]), _f(p["slowdown_1"], 4)]
                rows.append([cost_model, collection, program, graphs, *cells])
    return markdown_table(header, rows)


def ablation_table(results: Mapping[str, Mapping[str, Mapping[str, Any]]], reference: str) -> str:
    """Per cost model and collection, `ablation_rows` against `reference` as one table."""
    header = [
        "cost model", "collection", "recipe", "test tau", "Δ tau", "beyond 2× spread",
        "test slowdown@1", "Δ slowdown@1", "train s",
    ]  # fmt: skip
    rows = []
    for cost_model, by_collection in results.items():
        for collection, by_recipe in by_collection.items():
            for r in ablation_rows(by_recipe, reference):
                beyond = (
                    "-" if r["beyond_spread"] is None else ("yes" if r["beyond_spread"] else "no")
                )
                rows.append(
                    [
                        cost_model, collection, r["recipe"], pm(r["kendall_tau"]),
                        f"{r['delta_tau']:+.3f}", beyond, pm(r["slowdown_1"], 4),
                        f"{r['delta_slowdown_1']:+.4f}", pm(r["train_wall_s"], 1),
                    ]
                )  # fmt: skip
    return markdown_table(header, rows)


def figure_series(
    results: Mapping[str, Mapping[str, Mapping[str, Any]]],
) -> tuple[list[str], dict[str, list[tuple[float, float]]]]:
    """(groups "cost_model collection", {recipe: [(test tau mean, std) per group]}) for
    `quality_report.spread_bars`; a recipe missing in a group is (nan, 0)."""
    groups, series = [], {}
    recipes = list(
        dict.fromkeys(n for by_c in results.values() for by_r in by_c.values() for n in by_r)
    )
    for name in recipes:
        series[name] = []
    for cost_model, by_collection in results.items():
        for collection, by_recipe in by_collection.items():
            groups.append(f"{cost_model} {collection}")
            for name in recipes:
                tau = (
                    by_recipe[name]["test"]["kendall_tau"] if name in by_recipe else (math.nan, 0.0)
                )
                series[name].append((float(tau[0]), float(tau[1])))
    return groups, series
