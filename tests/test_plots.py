"""Figures: what is drawn is the data given (read back from the Figure), and PNGs are atomic."""

from __future__ import annotations

import re
import struct
import subprocess
import sys

import bench_figures
import numpy as np
import pytest
from conftest import ROOT

from baselines.core import plots
from baselines.core.errors import PipelineError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def error_rows(models, programs, rng) -> list[dict]:
    """Rows shaped like evaluate.error_table's, with random errors."""
    return [
        {
            "model": m,
            "program": p,
            "kernels": int(rng.integers(1, 50)),
            "top1_err": float(rng.uniform(0.0, 0.5)),
            "top5_err": float(rng.uniform(0.0, 0.2)),
            "top10_err": float(rng.uniform(0.0, 0.1)),
            "kaggle_score": 0.0,
            "opa": 0.5,
        }
        for m in models
        for p in programs
    ]


def legend_texts(figure) -> list[str]:
    legends = [*figure.legends, *(ax.get_legend() for ax in figure.axes)]
    return [t.get_text() for leg in legends if leg is not None for t in leg.get_texts()]


def tick_names(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def drawn_bars(ax, names: list[str] | None = None) -> dict[tuple[str, str], float]:
    """{(series label, x tick label): bar height}, read from the axes' bar patches.

    `names`: the tick labels, where another panel shows them (shared x).
    """
    ticks = ax.get_xticks()
    names = tick_names(ax) if names is None else names
    bars = {}
    for container in ax.containers:
        if not hasattr(container, "patches"):
            continue
        for patch in container.patches:
            assert patch in ax.patches
            center = patch.get_x() + patch.get_width() / 2
            group = names[int(np.argmin(np.abs(ticks - center)))]
            bars[container.get_label(), group] = patch.get_height()
    return bars


def error_bar_halves(ax) -> dict[tuple[str, str], float]:
    """{(series label, x tick label): half the drawn error bar's length}."""
    ticks = ax.get_xticks()
    names = tick_names(ax)
    halves = {}
    for container in ax.containers:
        if getattr(container, "errorbar", None) is None:
            continue
        (segments,) = [c.get_segments() for c in container.errorbar.lines[2]]
        for (x0, y0), (_, y1) in segments:
            group = names[int(np.argmin(np.abs(ticks - x0)))]
            halves[container.get_label(), group] = (y1 - y0) / 2
    return halves


@pytest.mark.parametrize("shuffle", [False, True])
def test_per_program_errors_draws_each_models_error_per_program(shuffle):
    rng = np.random.default_rng(0)
    models = ["GAT model_a", "SAGE model_b", "ensemble"]
    programs = ["ALL", "bert", "resnet", "alexnet"]
    rows = error_rows(models, programs, rng)
    if shuffle:  # ALL still comes first; the others in the order the rows name them
        rows = rows[2:] + rows[:2]
        expected_programs = ["ALL", "resnet", "alexnet", "bert"]
    else:
        expected_programs = programs
    figure = plots.per_program_errors(rows)

    axes = figure.axes
    assert len(axes) == 3
    names = tick_names(axes[-1])  # the panels share x; the bottom one shows the labels
    assert names == expected_programs
    for ax, k in zip(axes, (1, 5, 10)):
        assert f"top-{k}" in ax.get_ylabel()
        np.testing.assert_array_equal(ax.get_xticks(), axes[-1].get_xticks())
        bars = drawn_bars(ax, names)
        assert len(ax.patches) == len(bars) == len(models) * len(programs)
        for r in rows:
            assert bars[r["model"], r["program"]] == pytest.approx(r[f"top{k}_err"])
    assert sorted(legend_texts(figure)) == sorted(models)


def test_per_program_errors_refuses_a_k_the_rows_lack():
    rows = error_rows(["a"], ["ALL", "p"], np.random.default_rng(1))
    with pytest.raises(ValueError, match="top3_err"):
        plots.per_program_errors(rows, ks=(3,))


def kernels_of(sizes, rng):
    """Per kernel: scores on different offsets and scales, and positive runtimes."""
    scores = [rng.normal(loc=10.0 * i, scale=1.0 + i, size=c) for i, c in enumerate(sizes)]
    runtimes = [rng.uniform(0.5, 50.0, size=c) * (i + 1) for i, c in enumerate(sizes)]
    return scores, runtimes


def test_predicted_vs_true_plots_z_scores_against_runtime_ratios():
    rng = np.random.default_rng(2)
    scores, runtimes = kernels_of([7, 1, 3, 12], rng)
    scores[2] = np.full(3, 4.5)  # all equal: z-scores of 0
    figure = plots.predicted_vs_true(scores, runtimes, "model x")

    ratios = np.concatenate([r / r.min() for r in runtimes])
    z = np.concatenate(
        [(s - s.mean()) / s.std() if s.std() > 0 else np.zeros_like(s) for s in scores]
    )
    (ax,) = figure.axes
    points = np.asarray(ax.collections[0].get_offsets())
    np.testing.assert_allclose(points, np.column_stack([ratios, z]), rtol=1e-12)
    assert ax.get_xscale() == "log"
    assert ax.get_title() == "model x: 23 configs"


def test_predicted_vs_true_subsamples_exactly_max_points_for_a_seed():
    rng = np.random.default_rng(3)
    scores, runtimes = kernels_of([1500, 2500, 2000], rng)
    every = {
        (round(x, 9), round(y, 9))
        for s, r in zip(scores, runtimes)
        for x, y in zip(r / r.min(), (s - s.mean()) / s.std())
    }

    def points(seed):
        figure = plots.predicted_vs_true(scores, runtimes, "m", max_points=500, seed=seed)
        title = figure.axes[0].get_title()
        return np.asarray(figure.axes[0].collections[0].get_offsets()), title

    first, title = points(seed=7)
    assert first.shape == (500, 2)
    assert title == "m: 500 of 6,000 configs"
    kept = {(round(x, 9), round(y, 9)) for x, y in first}
    assert len(kept) == 500 and kept <= every  # distinct configs, each a real one
    np.testing.assert_array_equal(points(seed=7)[0], first)
    assert not np.array_equal(points(seed=8)[0], first)


def test_growth_figure_legend_gives_the_least_squares_exponents():
    rng = np.random.default_rng(4)
    configs = np.array([1.6e6, 3.2e6, 6.5e6, 12.9e6])
    series = {
        "warm load s": 0.002 * configs**0.93 * rng.uniform(0.9, 1.1, 4),
        "epoch s": 3e-5 * configs**1.2 * rng.uniform(0.9, 1.1, 4),
        "peak RSS MB": 40.0 * configs**0.35 * rng.uniform(0.9, 1.1, 4),
    }
    units = {"warm load s": "s", "epoch s": "s", "peak RSS MB": "MB"}
    figure = bench_figures.growth_figure(
        list(configs), {k: list(v) for k, v in series.items()}, units
    )

    expected = {k: np.polyfit(np.log(configs), np.log(v), 1)[0] for k, v in series.items()}
    shown = {}
    for text in legend_texts(figure):
        match = re.fullmatch(r"(.+) \(k = (-?\d+\.\d+)\)", text)
        assert match, text
        shown[match.group(1)] = float(match.group(2))
    assert shown.keys() == expected.keys()
    for label, k in expected.items():
        assert shown[label] == pytest.approx(k, abs=0.0051), label

    panels = {ax.get_ylabel(): ax for ax in figure.axes}
    assert sorted(panels) == ["MB", "s"]
    for ax in figure.axes:
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    drawn = {
        line.get_label().split(" (k")[0]: (ax.get_ylabel(), line)
        for ax in figure.axes
        for line in ax.get_lines()
    }
    for label, values in series.items():
        panel, line = drawn[label]
        assert panel == units[label]
        np.testing.assert_allclose(line.get_xdata(), configs)
        np.testing.assert_allclose(line.get_ydata(), values)


def quality_result() -> dict:
    """A quality.json-shaped result: 2 sets, recipes given in non-alphabetical order."""
    rng = np.random.default_rng(5)
    recipes = {"zeta_recipe": "configs/z.flags", "alpha_recipe": "configs/a.flags"}
    results = {}
    for hardware in ("default", "alternate"):
        for name in recipes:
            entry = {}
            for split in ("valid", "test"):
                entry[split] = {
                    "top5_err": [float(rng.uniform(0, 0.2)), float(rng.uniform(0, 0.02))],
                    "programs": {
                        p: {
                            "kernels": 5,
                            "top1_err": 0.3,
                            "top5_err": float(rng.uniform(0, 0.2)),
                            "top5_err_std": float(rng.uniform(0.001, 0.03)),
                        }
                        for p in ("t5_small", "deeplab", "shufflenet")
                    },
                }
            results[f"{hardware}|{name}"] = entry
    return {"recipes": recipes, "results": results}


def test_quality_figures_draw_means_with_the_seeds_std():
    result = quality_result()
    per_program, ablation = bench_figures.quality_figures(result)

    assert [ax.get_title() for ax in per_program.axes] == ["world default", "world alternate"]
    for ax, hardware in zip(per_program.axes, ("default", "alternate")):
        bars, halves = drawn_bars(ax), error_bar_halves(ax)
        assert len(bars) == 2 * 3
        for name in ("zeta_recipe", "alpha_recipe"):
            for p, v in result["results"][f"{hardware}|{name}"]["test"]["programs"].items():
                assert bars[name, p] == pytest.approx(v["top5_err"])
                assert halves[name, p] == pytest.approx(v["top5_err_std"])
    assert sorted(legend_texts(per_program)) == ["alpha_recipe", "zeta_recipe"]

    for ax, hardware in zip(ablation.axes, ("default", "alternate")):
        assert [t.get_text() for t in ax.get_xticklabels()] == ["zeta_recipe", "alpha_recipe"]
        bars, halves = drawn_bars(ax), error_bar_halves(ax)
        for name in ("zeta_recipe", "alpha_recipe"):
            for split, label in (("valid", "val"), ("test", "test")):
                mean, std = result["results"][f"{hardware}|{name}"][split]["top5_err"]
                assert bars[label, name] == pytest.approx(mean)
                assert halves[label, name] == pytest.approx(std)
    assert sorted(legend_texts(ablation)) == ["test", "val"]


def test_save_png_writes_a_small_png_and_replaces_the_old_file(tmp_path):
    rows = error_rows(["a", "b"], ["ALL", "p"], np.random.default_rng(6))
    figure = plots.per_program_errors(rows)
    path = tmp_path / "errors.png"
    path.write_bytes(b"old")
    assert plots.save_png(figure, path) == path
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    inches = figure.get_size_inches()
    assert (width, height) == (round(inches[0] * figure.dpi), round(inches[1] * figure.dpi))
    assert len(data) < 150_000
    assert [p.name for p in tmp_path.iterdir()] == ["errors.png"]  # no temporary left


def test_save_png_keeps_the_old_file_when_drawing_fails(tmp_path, monkeypatch):
    figure = plots.predicted_vs_true([np.array([1.0, 2.0])], [np.array([1.0, 3.0])], "m")
    path = tmp_path / "pred.png"
    path.write_bytes(b"old")

    def half_written(target, **kwargs):
        with open(target, "wb") as f:
            f.write(PNG_SIGNATURE + b"truncated")
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(figure, "savefig", half_written)
    with pytest.raises(RuntimeError, match="drawing failed"):
        plots.save_png(figure, path)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["pred.png"]
    with pytest.raises(PipelineError, match="does not exist"):
        plots.save_png(figure, tmp_path / "missing" / "pred.png")


@pytest.mark.slow  # starts a fresh Python process
def test_making_and_saving_figures_imports_neither_pyplot_nor_tensorflow(tmp_path):
    code = f"""
import sys
import numpy as np
import matplotlib
from baselines.core import plots
backend = matplotlib.rcParams._get_backend_or_none()
rows = [dict(model="m", program="ALL", top1_err=0.1, top5_err=0.0, top10_err=0.0)]
plots.save_png(plots.per_program_errors(rows), {str(tmp_path / "a.png")!r})
figure = plots.predicted_vs_true([np.ones(2)], [np.ones(2)], "m")
plots.save_png(figure, {str(tmp_path / "b.png")!r})
assert matplotlib.rcParams._get_backend_or_none() == backend
print(sorted(m for m in sys.modules if m.startswith(("matplotlib.pyplot", "tensorflow"))))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.png"]
