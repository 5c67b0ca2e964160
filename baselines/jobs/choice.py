"""Choosing a collection's option (a candidate recipe's seed ensemble, or the blend of all)
on the validation split alone, with a noise rule.

Every option is scored per validation item (kernel or graph; higher is better):
tile's Kaggle score (2 - best runtime among the predicted top 5 / best runtime),
layout's Kendall's tau. Another option replaces the default (the recommended
recipe) only when its mean paired difference from it is positive beyond `Z`
standard errors; of several, the largest. Why paired: identical reruns move a
mean validation figure by several hundredths and items differ far more than
options do on one item, so pairing removes the items' difficulty and two
standard errors keep the choice from following noise. numpy only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from baselines.core.rank_run import BLEND

Z = 2.0  # standard errors a mean paired difference must exceed


@dataclasses.dataclass(frozen=True)
class Comparison:
    """An option against the default, over the items both score (a defined figure)."""

    option: str
    mean: float  # the option's mean validation figure over every item it scores
    diff: float  # mean paired difference, option - default (nan: no common item)
    se: float  # its standard error (nan: fewer than two common items)
    items: int  # common items

    @property
    def beats_default(self) -> bool:
        """The mean difference is positive beyond `Z` standard errors."""
        return self.items >= 2 and math.isfinite(self.se) and self.diff > Z * self.se


@dataclasses.dataclass(frozen=True)
class Choice:
    chosen: str
    default: str
    comparisons: tuple[Comparison, ...]
    reason: str


def mean_figure(values: Mapping[str, float]) -> float:
    """The mean of the defined figures (nan when none is)."""
    defined = [v for v in values.values() if math.isfinite(v)]
    return float(np.mean(defined)) if defined else float("nan")


def paired(option: Mapping[str, float], default: Mapping[str, float]) -> tuple[float, float, int]:
    """(mean difference option - default, its standard error, items) over common items."""
    common = [k for k in option if k in default]
    diffs = np.array(
        [option[k] - default[k] for k in common if math.isfinite(option[k] - default[k])],
        dtype=np.float64,
    )
    if diffs.size == 0:
        return float("nan"), float("nan"), 0
    if diffs.size < 2:
        return float(diffs.mean()), float("nan"), 1
    return float(diffs.mean()), float(diffs.std(ddof=1) / math.sqrt(diffs.size)), int(diffs.size)


def choose(per_item: Mapping[str, Mapping[str, float]], default: str = "recommended") -> Choice:
    """The option to submit from `per_item[option][item]` (higher is better, nan where
    undefined); `default` must be an option."""
    if default not in per_item:
        raise ValueError(f"the default option {default!r} is not among {sorted(per_item)}")
    comparisons = []
    for name, values in per_item.items():
        diff, se, n = paired(values, per_item[default]) if name != default else (0.0, 0.0, 0)
        comparisons.append(Comparison(name, mean_figure(values), diff, se, n))
    better = [c for c in comparisons if c.option != default and c.beats_default]
    if better:
        best = max(better, key=lambda c: c.diff)
        reason = (
            f"{best.option} beats {default} on validation by {best.diff:+.4f} "
            f"(standard error {best.se:.4f}, {best.items} items)"
        )
        return Choice(best.option, default, tuple(comparisons), reason)
    others = [c for c in comparisons if c.option != default]
    tied = [
        c.option
        for c in others
        if not (c.items >= 2 and math.isfinite(c.se) and abs(c.diff) > Z * c.se)
    ]
    if not others:
        reason = f"{default} is the only option"
    elif not tied:
        reason = f"{default} beats every other option on validation beyond {Z:g} standard errors"
    else:
        reason = (
            f"no option beats {default} on validation beyond {Z:g} standard errors, and "
            f"validation cannot separate {', '.join(tied)} from it; {default} is kept"
        )
    return Choice(default, default, tuple(comparisons), reason)


def option_names(candidates: Sequence[str]) -> list[str]:
    """The options of a collection: each candidate, then the blend when there are two or more."""
    return [*candidates, *([BLEND] if len(candidates) > 1 else [])]
