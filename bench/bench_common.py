"""Helpers shared by the benchmarks (the scaling ones, bench/quality.py, bench/recipe_cost.py).

Measures nothing itself: tile recipe files by name, growth exponents of figures against a data
size, medians of repeated runs, table cells, folder sizes and the commit measured.

    from bench_common import growth_exponent
    growth_exponent([1, 2, 4], [3, 6, 12])   # 1.0: linear growth
"""

from __future__ import annotations

import statistics
import subprocess
from pathlib import Path

import numpy as np

from baselines.core.errors import PipelineError

ROOT = Path(__file__).resolve().parents[1]

# Size names of the benchmarks and the synthetic presets they generate.
SIZES = {
    "eighth": "release_eighth",
    "quarter": "release_quarter",
    "half": "release_half",
    "full": "release",
}
SIZE_ORDER = ("eighth", "quarter", "half", "full")


def recipe_path(name: str) -> Path:
    """A tile recipe's flagfile: a path ending in .flags, or a name under configs/."""
    path = Path(name)
    if path.suffix == ".flags" and path.is_file():
        return path.resolve()
    path = ROOT / "configs" / f"{name}.flags"
    if not path.is_file():
        raise PipelineError(f"--recipes: no flagfile for '{name}' (looked for {path})")
    return path


def growth_exponent(sizes: list[float], values: list[float]) -> float:
    """k of values ∝ sizes^k: the least-squares slope of log(value) on log(size)."""
    if len(sizes) != len(values) or len(sizes) < 2:
        raise ValueError("need at least two (size, value) pairs")
    x = np.log(np.asarray(sizes, dtype=np.float64))
    y = np.log(np.asarray(values, dtype=np.float64))
    if np.ptp(x) == 0:
        raise ValueError("sizes must differ")
    x = x - x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


def growth_exponents(
    sizes: list[float], tables: list[dict[str, float]], keep=lambda label: True
) -> dict[str, float]:
    """k (`growth_exponent`) of every figure positive in all `tables`, one table per size.

    A figure missing or not positive at any size, or refused by `keep(label)`, gets no
    k; fewer than two sizes give none.
    """
    if len(tables) < 2:
        return {}
    return {
        label: growth_exponent(sizes, [t[label] for t in tables])
        for label in tables[0]
        if all(t.get(label, 0) > 0 for t in tables) and keep(label)
    }


def medians(runs: list[dict]) -> dict:
    """The median of every key over repeated runs (the keys of the first run)."""
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def fmt(value: float) -> str:
    """A table cell: 3 significant-ish digits."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def dir_mb(path: Path) -> float:
    """Bytes of every file under `path`, in MB (10^6)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def code_version() -> str:
    """The commit measured, marked "+changes" when the working tree differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' +changes' if dirty else ''}" or "unknown"
