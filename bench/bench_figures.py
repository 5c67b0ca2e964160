"""The benchmarks' figures: recipe quality per program, held-out worlds, growth with size.

Built on the library's figure helpers (`baselines/core/plots.py`), which the
evaluation scripts use for their own figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from baselines.core.plots import bars_width, grouped_bars, legend_above, new_figure, series_color


def _split_key(key: str) -> tuple[str, str]:
    """("default", "baseline") of quality.json's result key "default|baseline"."""
    hardware, _, recipe = key.partition("|")
    return hardware, recipe


def quality_figures(result: Mapping, split: str = "test") -> tuple[Figure, Figure]:
    """Recipes' top-5 errors: (per program of `split`, ablation of val and test) figures.

    `result` is `bench/quality.py`'s quality.json: "recipes" (names in the order
    given) and "results" keyed "<set>|<recipe>", each with "valid" and "test"
    holding [mean, std] over seeds per metric and "programs" (per program the
    seeds' mean "top5_err" and std "top5_err_std"). Both figures have one
    panel per set.
    """
    results = result["results"]
    if not results:
        raise ValueError("the result holds no recipes")
    keys = [_split_key(key) for key in results]
    sets = list(dict.fromkeys(h for h, _ in keys))
    given = [r for r in result.get("recipes", {}) if any(r == name for _, name in keys)]
    recipes = list(dict.fromkeys([*given, *(name for _, name in keys)]))

    def split_of(hardware: str, recipe: str, name: str) -> Mapping:
        return results.get(f"{hardware}|{recipe}", {}).get(name, {})

    programs = {
        h: sorted({p for r in recipes for p in split_of(h, r, split).get("programs", {})})
        for h in sets
    }
    widest = max(len(p) for p in programs.values())
    width = bars_width(widest, len(recipes)) * len(sets)
    per_program = new_figure(min(width, 16.0), 3.6)
    axes = per_program.subplots(1, len(sets), squeeze=False, sharey=True)[0]
    for ax, h in zip(axes, sets):
        means, stds = {}, {}
        for r in recipes:
            table = split_of(h, r, split).get("programs", {})
            means[r] = [table[p]["top5_err"] if p in table else np.nan for p in programs[h]]
            stds[r] = [table.get(p, {}).get("top5_err_std", np.nan) for p in programs[h]]
        grouped_bars(ax, programs[h], means, stds)
        ax.set_title(f"world {h}", fontsize=9)
    axes[0].set_ylabel("top-5 error, mean ± std over seeds", fontsize=8)
    legend_above(per_program, axes[0], 4, f"{split} top-5 error per program and recipe")

    ablation = new_figure(float(np.clip(1.5 + 0.6 * len(recipes), 4.0, 8.0)) * len(sets), 3.6)
    axes = ablation.subplots(1, len(sets), squeeze=False, sharey=True)[0]
    for ax, h in zip(axes, sets):
        means, stds = {}, {}
        present = [
            (name, label)
            for name, label in (("valid", "val"), ("test", "test"))
            if any(split_of(s, r, name) for s in sets for r in recipes)
        ]
        for name, label in present:
            pairs = [split_of(h, r, name).get("top5_err") for r in recipes]
            means[label] = [pair[0] if pair else np.nan for pair in pairs]
            stds[label] = [pair[1] if pair else np.nan for pair in pairs]
        grouped_bars(ax, recipes, means, stds)
        ax.set_title(f"world {h}", fontsize=9)
    axes[0].set_ylabel("top-5 error, mean ± std over seeds", fontsize=8)
    legend_above(ablation, axes[0], 2, "top-5 error per recipe, in the order given")
    return per_program, ablation


def lowo_figure(rows: Sequence[Mapping]) -> Figure:
    """Leave-one-world-out: each held-out world's test top-5 and top-1 error, chosen vs baseline.

    `rows` are `selection.lowo_rows`'s. One panel per metric; x the held-out
    worlds (the chosen recipe under each name); bars mean ± std over seeds.
    """
    if not rows:
        raise ValueError("no held-out worlds to draw")
    groups = [f"{r['world']}\n({r['chosen']})" for r in rows]
    figure = new_figure(float(np.clip(2.0 + 1.2 * len(rows), 5.0, 12.0)), 3.4)
    axes = figure.subplots(1, 2, squeeze=False)[0]
    for ax, metric, title in zip(axes, ("top5_err", "top1_err"), ("top-5", "top-1")):
        means = {
            "chosen on the other worlds": [r[metric][0] for r in rows],
            "baseline": [r[f"baseline_{metric}"][0] for r in rows],
        }
        stds = {
            "chosen on the other worlds": [r[metric][1] for r in rows],
            "baseline": [r[f"baseline_{metric}"][1] for r in rows],
        }
        grouped_bars(ax, groups, means, stds)
        ax.set_ylabel(f"test {title} error, mean ± std", fontsize=8)
    legend_above(figure, axes[0], 2, "held-out worlds: test error of the recipe chosen elsewhere")
    return figure


def _log_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of log(y) on log(x)."""
    lx, ly = np.log(x), np.log(y)
    lx = lx - lx.mean()
    return float((lx * (ly - ly.mean())).sum() / (lx * lx).sum())


def growth_figure(
    configs: Sequence[float],
    figures: Mapping[str, Sequence[float]],
    panels: Mapping[str, str] | None = None,
    x_label: str = "configurations",
) -> Figure:
    """How each measured figure grows with the data: log-log lines against configurations.

    `figures` maps a figure's name to its value at each of `configs`. `panels`
    names each figure's panel (its unit: "s", "MB"; default, one panel). The
    legend gives each line's growth exponent k (value ∝ configs^k, the
    least-squares slope on log-log). Values <= 0 are not drawn.
    """
    x = np.asarray(configs, dtype=np.float64)
    if x.size < 2 or np.any(x <= 0) or np.ptp(np.log(x)) == 0:
        raise ValueError("need two or more different positive sizes")
    panels = dict(panels or {})
    names = list(dict.fromkeys(panels.get(label, "") for label in figures)) or [""]
    rows_of = {n: sum(panels.get(label, "") == n for label in figures) for n in names}
    height = 2.6 + 0.13 * max(rows_of.values())
    figure = new_figure(4.2 * len(names), height)
    axes = figure.subplots(1, len(names), squeeze=False)[0]
    for ax, name in zip(axes, names):
        i = 0
        for label, values in figures.items():
            if panels.get(label, "") != name:
                continue
            y = np.asarray(values, dtype=np.float64)
            if y.shape != x.shape:
                raise ValueError(f"{label}: {y.size} values for {x.size} sizes")
            ok = np.isfinite(y) & (y > 0)
            fit = np.ptp(np.log(x[ok])) > 0 if ok.sum() >= 2 else False
            k = f"k = {_log_slope(x[ok], y[ok]):.2f}" if fit else "k n/a"
            ax.plot(
                x[ok],
                y[ok],
                marker="o",
                markersize=3,
                linewidth=1,
                color=series_color(i),
                linestyle=("-", "--", ":")[i // 10 % 3],  # the colours repeat after 10
                label=f"{label} ({k})",
            )
            i += 1
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(x, [f"{c:,.0f}" if c < 1e5 else f"{c / 1e6:.3g}M" for c in x])
        ax.xaxis.set_minor_formatter(NullFormatter())  # 2x10^6, 3x10^6, ... would overlap
        ax.set_xlabel(x_label, fontsize=8)
        ax.set_ylabel(name or "value", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    figure.suptitle("Growth with the data: figure ∝ configs^k", fontsize=9)
    return figure
