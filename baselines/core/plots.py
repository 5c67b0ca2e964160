"""Figures of results for both collections, each on its own Agg canvas (no pyplot)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from baselines.core.io_utils import atomic_output
from baselines.core.ranking import standardized

DPI = 100


def new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def series_color(i: int) -> str:
    return f"C{i % 10}"


def grouped_bars(
    ax: Axes,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float]],
    errors: Mapping[str, Sequence[float]] | None = None,
) -> None:
    """One bar per series in each group, side by side; `errors` are ± error bars."""
    x = np.arange(len(groups), dtype=np.float64)
    width = 0.8 / max(len(series), 1)
    for i, (name, heights) in enumerate(series.items()):
        offset = (i - (len(series) - 1) / 2) * width
        yerr = None if errors is None else np.asarray(errors[name], dtype=np.float64)
        ax.bar(
            x + offset,
            np.asarray(heights, dtype=np.float64),
            width,
            yerr=yerr,
            capsize=2 if yerr is not None else 0,
            error_kw={"elinewidth": 0.8},
            label=name,
            color=series_color(i),
        )
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def legend_above(figure: Figure, ax: Axes, columns: int, title: str) -> None:
    """The legend of `ax`'s series above every panel, under the figure's `title`."""
    handles, labels = ax.get_legend_handles_labels()
    # Fewer columns where long labels (model names with hashes) would not fit.
    inches_per_column = 0.6 + 0.06 * max((len(label) for label in labels), default=0)
    fit = int(figure.get_figwidth() // inches_per_column)
    ncols = max(1, min(len(labels), columns, fit))
    figure.legend(
        handles,
        labels,
        loc="outside upper center",
        ncols=ncols,
        fontsize=7,
        title=title,
        title_fontsize=9,
        frameon=False,
    )


def bars_width(groups: int, bars: int) -> float:
    """Figure width (inches) for `groups` groups of `bars` bars: compact, readable."""
    return float(np.clip(1.5 + 0.12 * groups * max(bars, 2), 5.0, 14.0))


def predicted_vs_true(
    scores: Sequence[np.ndarray],
    runtimes: Sequence[np.ndarray],
    label: str,
    max_points: int = 20000,
    seed: int = 0,
    unit: str = "kernel",
) -> Figure:
    """Each config's score (z-score within its `unit`: tile kernel, layout graph) against its
    runtime / the unit's fastest (log); beyond `max_points`, a random `max_points` by `seed`."""
    if len(scores) != len(runtimes):
        raise ValueError(f"{len(scores)} {unit}s of scores but {len(runtimes)} of runtimes")
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    ratios, zs = [np.zeros(0)], [np.zeros(0)]
    for i, (s, r) in enumerate(zip(scores, runtimes)):
        s = np.asarray(s, dtype=np.float64).ravel()
        r = np.asarray(r, dtype=np.float64).ravel()
        if s.shape != r.shape:
            raise ValueError(f"{unit} {i}: {s.size} scores but {r.size} runtimes")
        if not r.size:
            continue
        fastest = r.min()
        if not (np.isfinite(fastest) and fastest > 0):
            raise ValueError(f"{unit} {i}: runtimes must be positive, the fastest is {fastest}")
        ratios.append(r / fastest)
        zs.append(standardized(s))
    x, y = np.concatenate(ratios), np.concatenate(zs)
    total = x.size
    shown = f"{total:,} configs"
    if total > max_points:
        keep = np.sort(np.random.default_rng(seed).choice(total, size=max_points, replace=False))
        x, y = x[keep], y[keep]
        shown = f"{max_points:,} of {total:,} configs"
    figure = new_figure(5.5, 4.0)
    ax = figure.subplots()
    dense = x.size > 5000
    size, alpha = (2, 0.25) if dense else (6, 0.6)
    ax.scatter(x, y, s=size, alpha=alpha, linewidths=0, color=series_color(0), rasterized=True)
    ax.set_xscale("log")
    ax.set_xlabel(f"runtime / {unit}'s fastest runtime (log)", fontsize=8)
    ax.set_ylabel(f"score, z-score within {unit} (low = predicted fast)", fontsize=8)
    ax.set_title(f"{label}: {shown}", fontsize=9)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    return figure


def save_png(figure: Figure, path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not isinstance(figure.canvas, FigureCanvasAgg):
        FigureCanvasAgg(figure)
    with atomic_output(path) as tmp:
        figure.savefig(tmp, format="png", dpi=figure.dpi)
    return path


ALL = "ALL"  # the program of error_table's rows over every kernel


def per_program_errors(rows: Sequence[Mapping], ks: Sequence[int] = (1, 5, 10)) -> Figure:
    """Top-k error of every model per program (`error_table`'s rows), a panel per k."""
    if not rows:
        raise ValueError("no rows to plot")
    models = list(dict.fromkeys(str(r["model"]) for r in rows))
    programs = list(dict.fromkeys(str(r["program"]) for r in rows))
    if ALL in programs:
        programs = [ALL] + [p for p in programs if p != ALL]
    by_key = {(str(r["model"]), str(r["program"])): r for r in rows}
    figure = new_figure(bars_width(len(programs), len(models)), 0.6 + 2.0 * len(ks))
    axes = figure.subplots(len(ks), 1, sharex=True, squeeze=False)[:, 0]
    for ax, k in zip(axes, ks):
        column = f"top{k}_err"
        if column not in rows[0]:
            raise ValueError(f"the rows have no {column} column (k={k})")
        series = {
            m: [float(by_key[m, p][column]) if (m, p) in by_key else float("nan") for p in programs]
            for m in models
        }
        grouped_bars(ax, programs, series)
        ax.set_ylabel(f"top-{k} error", fontsize=8)
    legend_above(figure, axes[0], 4, "Top-k error per program (lower is better)")
    axes[-1].set_xlabel("program (ALL = every kernel)", fontsize=8)
    return figure


_TITLES = {"all": "all configurations", "subset": "fixed subsets"}


def tau_per_graph(rows: Sequence[Mapping]) -> Figure:
    """Kendall's tau of every model per graph (`evaluation_rows`), a panel per configs block."""
    shown = [r for r in rows if r["level"] in ("all", "graph")]
    if not shown:
        raise ValueError("no rows to plot")
    models = list(dict.fromkeys(str(r["model"]) for r in shown))
    names = list(dict.fromkeys(str(r["name"]) for r in shown))
    blocks = list(dict.fromkeys(str(r["configs"]) for r in shown))
    by_key = {(str(r["configs"]), str(r["model"]), str(r["name"])): r for r in shown}
    figure = new_figure(bars_width(len(names), len(models)), 0.6 + 2.2 * len(blocks))
    axes = figure.subplots(len(blocks), 1, sharex=True, squeeze=False)[:, 0]
    for ax, block in zip(axes, blocks):
        missing = {"kendall_tau": float("nan")}
        series = {
            m: [float(by_key.get((block, m, n), missing)["kendall_tau"]) for n in names]
            for m in models
        }
        grouped_bars(ax, names, series)
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_ylabel(f"Kendall tau, {_TITLES.get(block, block)}", fontsize=8)
    legend_above(figure, axes[0], 3, "Kendall's tau per graph (higher is better)")
    axes[-1].set_xlabel("graph (ALL = mean over graphs)", fontsize=8)
    return figure


def options_per_item(per_item: Mapping[str, Mapping[str, float]], metric: str) -> Figure:
    """Each option's validation figure per item (`per_item[option][item]`), items sorted by the
    first option's, "MEAN" first; over 40 items, markers instead of named bars."""
    options = list(per_item)
    first = per_item[options[0]] if options else {}
    items = sorted(first, key=lambda i: (not np.isfinite(first[i]), first[i]))
    if not items:
        raise ValueError("no items to plot")
    means = {}
    for option, values in per_item.items():
        defined = [v for v in values.values() if np.isfinite(v)]
        means[option] = float(np.mean(defined)) if defined else float("nan")
    many = len(items) > 40
    figure = new_figure(8.0 if many else bars_width(len(items) + 1, len(options)), 2.8)
    ax = figure.subplots()
    if many:
        for k, (option, values) in enumerate(per_item.items()):
            y = [float(values.get(i, float("nan"))) for i in items]
            label = f"{option} (mean {means[option]:.4f})"
            ax.plot(range(len(items)), y, ".", markersize=3, color=series_color(k), label=label)
        ax.set_xlabel(f"items, sorted by {options[0]}'s figure", fontsize=8)
        ax.grid(alpha=0.3)
    else:
        series = {
            o: [means[o], *(float(v.get(i, float("nan"))) for i in items)]
            for o, v in per_item.items()
        }
        grouped_bars(ax, ["MEAN", *items], series)
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.set_ylabel(metric, fontsize=8)
    legend_above(figure, ax, 4, f"validation {metric} per item, each option (higher is better)")
    return figure
