"""Shared fixtures: repository paths, the real samples, the bundled toy data."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# The benchmarks' own modules (bench_common, selection, ...), as a bench script sees them.
sys.path.append(str(ROOT / "bench"))

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


@pytest.fixture(params=["toy", "real"])
def sample_root(request) -> Path:
    """A data root: the bundled toy set (always) and the real samples (when present).

    Core behaviour is checked on the toy set, which has the real set's edge cases
    (1- and 2-config kernels, 2-node kernels, hidden test labels); the real
    samples add a compatibility check where they exist.
    """
    if request.param == "toy":
        return TOY_ROOT
    if not (REAL_SAMPLES / "tile_xla").is_dir():
        pytest.skip(f"real TpuGraphs samples not found at {REAL_SAMPLES}")
    return REAL_SAMPLES / "tile_xla"


def signed_log(x: np.ndarray) -> np.ndarray:
    """sign(x) * log(1 + |x|) in float64: the tests' own copy of the feature transform."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.log1p(np.abs(x))


def numpy_feature_stats(feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column mean and std (constant columns get std 1) of signed-log features."""
    logged = signed_log(feats)
    std = logged.std(axis=0)
    return logged.mean(axis=0), np.where(std < 1e-6, 1.0, std)


def random_kernel(rng: np.random.Generator, n: int, c: int, labelled: bool = True) -> dict:
    """One kernel's npz arrays in the real format, with wide-ranging, signed features."""
    scale = 10.0 ** rng.integers(0, 5, size=140)
    node_feat = rng.normal(size=(n, 140)) * scale
    node_feat[:, rng.random(140) < 0.3] = 0.0  # constant columns, as in real files
    return {
        "node_feat": node_feat.astype(np.float32),
        "node_opcode": rng.integers(0, 120, n).astype(np.uint8),
        "edge_index": np.array([[i, int(rng.integers(0, i))] for i in range(1, n)], np.int64),
        "config_feat": rng.integers(-2, 600, size=(c, 24)).astype(np.float32),
        "config_runtime": (rng.integers(1_000, 100_000, c) if labelled else np.zeros(c)).astype(
            np.int64
        ),
        "config_runtime_normalizers": (
            rng.integers(1_000, 3_000, c) if labelled else np.ones(c)
        ).astype(np.int64),
    }


def write_random_root(
    root: Path, seed: int = 0, sizes: dict | None = None, test_configs=(1, 3, 7, 40, 90)
) -> Path:
    """A small data root of random kernels: train/valid labelled, test hidden.

    Valid and test features are drawn at other scales than train's, so
    statistics fitted on the wrong split differ visibly from train's.
    """
    rng = np.random.default_rng(seed)
    sizes = sizes or {"train": 12, "valid": 4}
    for split, count in sizes.items():
        (root / split).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            arrays = random_kernel(rng, int(rng.integers(2, 12)), int(rng.integers(2, 30)))
            if split != "train":
                arrays["node_feat"] *= 7.0
                arrays["config_feat"] *= 3.0
            np.savez(root / split / f"prog{i % 2}_{split}{i:04x}.npz", **arrays)
    (root / "test").mkdir(parents=True, exist_ok=True)
    for i, c in enumerate(test_configs):
        arrays = random_kernel(rng, int(rng.integers(2, 12)), c, labelled=False)
        np.savez(root / "test" / f"{i:032x}.npz", **arrays)
    return root


# Never part of a copy of the repository: build outputs and environments.
_NOT_COPIED = {".git", ".venv", "out", "__pycache__", ".pytest_cache", ".ruff_cache"}


def copy_repository(dest: Path) -> Path:
    """A copy of the repository's files as a clean clone plus uncommitted work holds them.

    With git: the tracked and untracked, not ignored files. Without (the
    mutation check runs the tests in a copy that has no .git): every file but
    environments, caches and outputs.
    """
    import shutil
    import subprocess

    if (ROOT / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        names = [n.decode() for n in listed if n]
    else:
        names = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and not _NOT_COPIED & set(p.relative_to(ROOT).parts)
        ]
    for name in names:
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


def run_repo_script(
    script: str, *flags: str, cwd: Path = ROOT, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Runs one of the repository's entry scripts with this interpreter; output captured.

    TensorFlow's C++ start-up log is off (as the entry scripts set it by default),
    so stderr holds what the script itself says.
    """
    return subprocess.run(
        [sys.executable, str(ROOT / script), *flags],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        timeout=timeout,
    )


def read_run_file(path: Path) -> dict:
    """A run file (`run_<hash>.jsonz`, gzip'd JSON), read with nothing but gzip and json."""
    with gzip.open(path, "rb") as f:
        return json.loads(f.read())


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The one stderr line of a refused command (non-zero exit, no traceback)."""
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def tensorboard_metadata(tb_dir, tag: str) -> bytes:
    """The plugin content of summary `tag` in any event file of `tb_dir` (the run's root)."""
    from tensorboard.backend.event_processing import event_accumulator

    found = []
    for events in tb_dir.glob("events.out.tfevents.*"):
        acc = event_accumulator.EventAccumulator(str(events))
        acc.Reload()
        if tag in acc.summary_metadata:
            found.append(acc.summary_metadata[tag].plugin_data.content)
    assert len(found) == 1, (tag, len(found))
    return found[0]


def tensorboard_hparams(tb_dir) -> dict:
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = tensorboard_metadata(tb_dir, "_hparams_/session_start_info")
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    values = {"_trial": start.group_name}
    for name, value in start.hparams.items():
        kind = value.WhichOneof("kind")
        values[name] = getattr(value, kind)
    return values
