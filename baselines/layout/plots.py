"""Figures of a layout evaluation: Kendall's tau per graph of every model.

    rows = evaluation_rows(graph_ids, runtimes, scores_by_model, subsets)
    save_png(tau_per_graph(rows), "out/layout_evaluation_tau_per_graph.png")

Drawn with `baselines.core.plots` (own Agg canvas, no pyplot, no TensorFlow);
scores against runtimes is `baselines.core.plots.predicted_vs_true(...,
unit="graph")`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure

from baselines.core.plots import bars_width, grouped_bars, legend_above, new_figure

_TITLES = {"all": "all configurations", "subset": "fixed subsets"}


def tau_per_graph(rows: Sequence[Mapping]) -> Figure:
    """Kendall's tau of every model on each graph: one panel per configs block, one bar per model.

        save_png(tau_per_graph(evaluation_rows(ids, runtimes, scores)), "tau.png")

    `rows` are `baselines.layout.evaluate.evaluation_rows`'s. x: "ALL" (the mean
    over graphs), then the graphs in the rows' order; bars: the models in the
    rows' order (the ensemble too when it is there); y: tau (1 = the runtimes'
    own order). Panels: "all" configurations, then "subset" when present.
    """
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
        series = {
            m: [
                float(by_key[block, m, n]["kendall_tau"])
                if (block, m, n) in by_key
                else float("nan")
                for n in names
            ]
            for m in models
        }
        grouped_bars(ax, names, series)
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_ylabel(f"Kendall tau, {_TITLES.get(block, block)}", fontsize=8)
    legend_above(figure, axes[0], 3, "Kendall's tau per graph (higher is better)")
    axes[-1].set_xlabel("graph (ALL = mean over graphs)", fontsize=8)
    return figure
