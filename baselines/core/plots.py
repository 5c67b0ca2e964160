"""Figure helpers both collections use: canvases, grouped bars, scores against runtimes, PNGs.

    figure = predicted_vs_true(scores, runtimes, "ensemble", unit="graph")
    save_png(figure, "out/evaluation_pred_vs_true.png")

Each figure is a `matplotlib.figure.Figure` drawn on its own Agg canvas
(`new_figure`): pyplot is never imported and no global backend is set, so any
process (headless, threaded, one that also runs TensorFlow) can make figures.
Nothing here imports TensorFlow. `save_png` writes a figure atomically, as a
small PNG (DPI dots per inch, a few inches a side).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from baselines.core.io_utils import atomic_output

DPI = 100


def new_figure(width: float, height: float) -> Figure:
    """An empty figure of `width` x `height` inches on its own Agg canvas."""
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


def zscores(scores: np.ndarray) -> np.ndarray:
    """Scores as z-scores, zeros when all are equal (as the ensembles standardize)."""
    scores = np.asarray(scores, dtype=np.float64)
    std = scores.std()
    return (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)


def predicted_vs_true(
    scores: Sequence[np.ndarray],
    runtimes: Sequence[np.ndarray],
    label: str,
    max_points: int = 20000,
    seed: int = 0,
    unit: str = "kernel",
) -> Figure:
    """Each config's score against its runtime relative to its `unit`'s fastest config.

        scores = SavedRanker.load(model_dir).score(split)
        save_png(predicted_vs_true(scores, split.normalized_runtimes(), "GAT"), "pvt.png")

    `scores` and `runtimes` hold one array per `unit` (a tile kernel, a layout
    graph). x: runtime / the unit's fastest runtime (log scale, 1 = fastest);
    y: the score standardized within its unit (z-score, as the ensembles of
    both collections standardize). A good model puts the configs at x = 1 at low
    scores. Beyond `max_points` configs, `max_points` of them drawn at random
    (the same ones for the same `seed`) are shown, and the title says so.
    """
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
        zs.append(zscores(s))
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
    """Writes `figure` as a PNG at `path`, atomically (complete or unchanged); returns it."""
    path = Path(path)
    if not isinstance(figure.canvas, FigureCanvasAgg):
        FigureCanvasAgg(figure)
    with atomic_output(path) as tmp:
        figure.savefig(tmp, format="png", dpi=figure.dpi)
    return path
