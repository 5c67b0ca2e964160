"""What the quality benchmarks of both collections share: lists, seed spread, tables, bars.

    names("baseline,recommended", "--recipes")       # ["baseline", "recommended"]
    mean_std([0.4, 0.5, 0.6], population=True)       # (0.5, 0.0816...)
    pm((0.5, 0.0816))                                 # "0.500 ± 0.082"
    markdown_table(["recipe", "tau"], [["a", "0.5"]])  # header, |---|---| rule, one line a row
    figure = spread_bars(["xla:default"], {"baseline": [(0.3, 0.02)]}, "test tau", "Test tau")

`bench/quality.py` (tiles) and `bench/layout_quality.py` (layout) write their
tables, seed spreads and figures with these. Pure Python and matplotlib (no
TensorFlow, no pyplot).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from baselines.core.errors import PipelineError
from baselines.core.plots import bars_width, grouped_bars, legend_above, new_figure
from baselines.core.tables import markdown_table  # noqa: F401 (the benchmarks' table writer)


def names(text: str, flag: str) -> list[str]:
    """The comma-separated items of a flag's value; an empty item is one line naming `flag`.

    names("a, b", "--recipes") -> ["a", "b"]
    """
    items = [n.strip() for n in text.split(",")]
    if not all(items):
        raise PipelineError(f"{flag}: empty item in {text!r}")
    return items


def mean_std(values: Sequence[float], *, population: bool = False) -> tuple[float, float]:
    """(mean, std) of the values: the sample std (n - 1), or with `population` the population
    std (n); 0.0 for a single value.

    mean_std([1.0, 3.0]) -> (2.0, 1.414...); mean_std([1.0, 3.0], population=True) -> (2.0, 1.0)
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std of no values")
    if len(values) == 1:
        return values[0], 0.0
    std = statistics.pstdev(values) if population else statistics.stdev(values)
    return statistics.mean(values), std


def pm(pair: Sequence[float], digits: int = 3) -> str:
    """A (mean, std) pair as "mean ± std"; pm((0.5, 0.01)) -> "0.500 ± 0.010"."""
    return f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"


def spread_bars(
    groups: Sequence[str],
    series: Mapping[str, Sequence[tuple[float, float]]],
    ylabel: str,
    title: str,
) -> Figure:
    """One panel of grouped bars: per group, each series' mean with its ± std error bar.

        figure = spread_bars(["xla:default", "nlp:random"],
                             {"baseline": [(0.3, 0.02), (0.5, 0.01)],
                              "recommended": [(0.4, 0.01), (0.6, 0.02)]}, "test tau", "Tau")

    `series[name][i]` is the (mean, std) of that series in `groups[i]`.
    """
    for name, pairs in series.items():
        if len(pairs) != len(groups):
            raise ValueError(f"series {name}: {len(pairs)} values for {len(groups)} groups")
    figure = new_figure(bars_width(len(groups), len(series)), 3.2)
    ax = figure.subplots(1, 1)
    grouped_bars(
        ax,
        list(groups),
        {n: [p[0] for p in pairs] for n, pairs in series.items()},
        {n: [p[1] for p in pairs] for n, pairs in series.items()},
    )
    ax.set_ylabel(ylabel, fontsize=8)
    legend_above(figure, ax, 4, title)
    return figure
