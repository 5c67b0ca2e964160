"""A tile run's record and feature statistics, read without TensorFlow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from baselines.core.run_files import read_record, read_run, read_runs
from baselines.tiles.features import FeatureStats

# What rebuilding a tile model and normalizing its inputs need.
REQUIRED = ("model", "model_kwargs", "configs", "feature_stats")


def read_run_file(path: Path) -> dict[str, Any]:
    """The tile run record at `path` (a `run_<hash>.jsonz` or a model folder's copy)."""
    return read_record(Path(path), "tile", REQUIRED)


def read_run_for_model(model_dir: Path) -> tuple[dict[str, Any], FeatureStats]:
    record = read_run(model_dir, "tile", REQUIRED)
    return record, FeatureStats.from_dict(record["feature_stats"])


def read_model_list(text: str, flag: str) -> list[tuple[Path, dict[str, Any]]]:
    return read_runs(text, flag, lambda folder: read_run_for_model(folder)[0])
