"""Shared fixtures: repository paths, the real samples, the bundled toy data."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REAL_SAMPLES = ROOT.parent / "shared" / "real_samples"
TOY_ROOT = ROOT / "data" / "tile_xla_toy"


@pytest.fixture
def real_samples() -> Path:
    if not (REAL_SAMPLES / "tile_xla").is_dir():
        pytest.skip(f"real TpuGraphs samples not found at {REAL_SAMPLES}")
    return REAL_SAMPLES


@pytest.fixture
def toy_root() -> Path:
    return TOY_ROOT
