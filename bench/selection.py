"""Choosing a recipe on validation only, and the leave-one-world-out report.

A recipe tuned on one world's validation and test splits fits that world. The
benchmark (`bench/quality.py`) therefore keeps the two apart:

- choosing sees validation summaries only (these functions take nothing else);
- a held-out world's recipe is chosen on the *other* worlds' validation
  (`lowo_choices`), then its test split is scored once, beside the baseline's
  (`lowo_rows`), which is the number the docs quote first.

Summaries are what `summarize_runs` makes of one (world, recipe): each metric's
mean and std over seeds, the seeds' ensemble, and per-program means.

    choices = lowo_choices(valid, worlds=["default", "serial", "cache"], candidates=["a", "b"])
    # {"default": "b", "serial": "b", "cache": "a"}: each chosen without its own world
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import quality_report

METRICS = ("top1_err", "top5_err", "top10_err", "opa", "kaggle_score")
# What a recipe is chosen by (lower is better), then what breaks a tie.
CHOICE_KEYS = ("top5_err", "top1_err")


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample std) over seeds; std 0.0 for one seed (`quality_report.mean_std`)."""
    return quality_report.mean_std(values)


def summarize_runs(rows: Sequence[Mapping[str, Any]], walls: Sequence[float]) -> dict:
    """One split's error-table rows of a recipe's seeds (and "ensemble") -> its summary.

    `rows` are `evaluate.error_table` rows with model names "0", "1", ... for the
    seeds and "ensemble" for their ensemble (absent with one seed). The summary
    holds mean and std over seeds of every metric on all kernels, the
    ensemble's metrics, per-program means (top-1/5 error, top-5 std) and the
    worst program (highest mean top-5 error).
    """
    every = [r for r in rows if r["program"] == "ALL"]
    members = [r for r in every if r["model"] != "ensemble"]
    ensembles = [r for r in every if r["model"] == "ensemble"]
    out: dict[str, Any] = {m: mean_std([r[m] for r in members]) for m in METRICS}
    out["seeds"] = len(members)
    out["members"] = {m: [r[m] for r in members] for m in METRICS}
    out["ensemble"] = {m: ensembles[0][m] for m in METRICS} if ensembles else None
    programs: dict[str, dict] = {}
    for program in sorted({r["program"] for r in rows} - {"ALL"}):
        mine = [r for r in rows if r["program"] == program and r["model"] != "ensemble"]
        programs[program] = {
            "kernels": mine[0]["kernels"],
            "top1_err": statistics.mean(r["top1_err"] for r in mine),
            "top5_err": statistics.mean(r["top5_err"] for r in mine),
            "top5_err_std": mean_std([r["top5_err"] for r in mine])[1],
        }
    out["programs"] = programs
    out["worst_program"] = (
        max(programs, key=lambda p: (programs[p]["top5_err"], p)) if programs else None
    )
    out["train_wall_s"] = mean_std(walls) if walls else (math.nan, 0.0)
    return out


def choice_key(summaries: Sequence[Mapping[str, Any]]) -> tuple[float, ...]:
    """Mean over worlds of each choice metric's seed mean (lower is better)."""
    return tuple(statistics.mean(s[k][0] for s in summaries) for k in CHOICE_KEYS)


def choose(
    valid: Mapping[str, Mapping[str, Mapping[str, Any]]],
    worlds: Sequence[str],
    candidates: Sequence[str],
) -> str:
    """The candidate with the lowest mean validation top-5 error over `worlds` (then top-1).

    `valid[world][recipe]` is a validation summary. Ties go to the candidate
    listed first.
    """
    if not worlds or not candidates:
        raise ValueError("choosing needs at least one world and one candidate")
    keyed = [(choice_key([valid[w][c] for w in worlds]), i, c) for i, c in enumerate(candidates)]
    return min(keyed)[2]


def lowo_choices(
    valid: Mapping[str, Mapping[str, Mapping[str, Any]]],
    worlds: Sequence[str],
    candidates: Sequence[str],
) -> dict[str, str]:
    """For each world, the candidate chosen on the validation of every *other* world."""
    if len(worlds) < 2:
        raise ValueError("leaving one world out needs at least two worlds")
    return {w: choose(valid, [o for o in worlds if o != w], candidates) for w in worlds}


def lowo_rows(
    test: Mapping[str, Mapping[str, Mapping[str, Any]]],
    choices: Mapping[str, str],
    baseline: str,
) -> list[dict[str, Any]]:
    """Per held-out world: the chosen recipe's test figures against the baseline's.

    `test[world][recipe]` is a test summary. Ratios are chosen / baseline of the
    seed means; the worst program is the chosen recipe's, and the baseline's
    error is taken on that same program.
    """
    rows = []
    for world, chosen in choices.items():
        mine, base = test[world][chosen], test[world][baseline]
        worst = mine["worst_program"]
        rows.append(
            {
                "world": world,
                "chosen": chosen,
                "top5_err": mine["top5_err"],
                "baseline_top5_err": base["top5_err"],
                "top5_ratio": _ratio(mine["top5_err"][0], base["top5_err"][0]),
                "top1_err": mine["top1_err"],
                "baseline_top1_err": base["top1_err"],
                "top1_ratio": _ratio(mine["top1_err"][0], base["top1_err"][0]),
                "worst_program": worst,
                "worst_top5_err": mine["programs"][worst]["top5_err"] if worst else math.nan,
                "baseline_on_worst_top5_err": (
                    base["programs"][worst]["top5_err"] if worst else math.nan
                ),
                "ensemble_top5_err": (mine["ensemble"] or {}).get("top5_err", math.nan),
                "members_mean_top5_err": mine["top5_err"][0],
            }
        )
    return rows


def lowo_worst_choices(
    valid: Mapping[str, Mapping[str, Mapping[str, Any]]],
    worlds: Sequence[str],
    candidates: Sequence[str],
    incumbent: str,
    baseline: str,
) -> dict[str, tuple[str, str]]:
    """For each world, (chosen, why) on the *other* worlds' validation by the worst-world rule
    (`adopts`): the incumbent is kept unless a candidate is adopted over it; of several, the one
    whose worst world's ratio to the baseline is lowest."""
    if len(worlds) < 2:
        raise ValueError("leaving one world out needs at least two worlds")
    choices = {}
    for held_out in worlds:
        others = [w for w in worlds if w != held_out]
        verdicts = {c: adopts(valid, others, c, incumbent, baseline) for c in candidates}
        adopted = [c for c in candidates if c != incumbent and verdicts[c][0]]
        if not adopted:
            choices[held_out] = (incumbent, f"{incumbent} kept: no candidate adopted")
            continue
        best = min(adopted, key=lambda c: max(world_ratios(valid, others, c, baseline).values()))
        choices[held_out] = (best, verdicts[best][1])
    return choices


def world_ratios(
    summaries: Mapping[str, Mapping[str, Mapping[str, Any]]],
    worlds: Sequence[str],
    recipe: str,
    baseline: str,
) -> dict[str, float]:
    """Per world, the recipe's seed-mean top-5 error over the baseline's."""
    return {w: ratio_of(summaries[w], recipe, baseline, "top5_err") for w in worlds}


def ratio_of(
    by_recipe: Mapping[str, Mapping[str, Any]], recipe: str, baseline: str, metric: str
) -> float:
    """One split's seed-mean `metric` of `recipe` over the baseline's (`by_recipe[recipe]`)."""
    return _ratio(by_recipe[recipe][metric][0], by_recipe[baseline][metric][0])


def worst_world(ratios: Mapping[str, float]) -> str:
    """The world with the highest ratio to the baseline (ties: the last name)."""
    return max(ratios, key=lambda w: (ratios[w], w))


def ratio_rows(
    test: Mapping[str, Mapping[str, Mapping[str, Any]]],
    worlds: Sequence[str],
    recipes: Sequence[str],
    baseline: str,
) -> list[dict[str, Any]]:
    """Per recipe: its test top-5 ratio to the baseline in each held-out world, their mean and
    the worst (highest) with its world: a mean lets one easy world hide a hard one."""
    rows = []
    for recipe in recipes:
        ratios = world_ratios(test, worlds, recipe, baseline)
        worst = worst_world(ratios)
        rows.append(
            {
                "recipe": recipe,
                "ratios": ratios,
                "mean": statistics.mean(ratios.values()),
                "worst": ratios[worst],
                "worst_world": worst,
            }
        )
    return rows


def adopts(
    valid: Mapping[str, Mapping[str, Mapping[str, Any]]],
    worlds: Sequence[str],
    candidate: str,
    incumbent: str,
    baseline: str,
) -> tuple[bool, str]:
    """The worst-world rule, on validation: `candidate` replaces `incumbent` when it lowers the
    top-5 error of the incumbent's worst world (highest ratio to the baseline) by more than the
    seed spread there, and raises no world's by more than its spread. The spread of a world is
    the larger of the two recipes' seed standard deviations. (adopted, why)."""
    ratios = world_ratios(valid, worlds, incumbent, baseline)
    worst = worst_world(ratios)  # the incumbent's

    def change(world: str) -> tuple[float, float]:
        mine, theirs = valid[world][candidate]["top5_err"], valid[world][incumbent]["top5_err"]
        return mine[0] - theirs[0], max(mine[1], theirs[1])

    gain, spread = change(worst)
    if not -gain > spread:
        return False, (
            f"{candidate} does not lower {incumbent}'s worst world ({worst}) beyond the seed "
            f"spread ({gain:+.4f} against {spread:.4f})"
        )
    hurt = [w for w in worlds if change(w)[0] > change(w)[1]]
    if hurt:
        return False, f"{candidate} raises {', '.join(hurt)} beyond the seed spread"
    return True, f"{candidate} lowers the worst world ({worst}) by {-gain:.4f} and hurts none"


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan
