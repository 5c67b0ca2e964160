"""Size knobs of a synthetic set, and presets sized like the real tile:xla release.

Two ways to size kernels:

- the default (toy set, `bench/run_bench.py`, `bench/quality.py`): node and
  config counts drawn log-uniformly between `GeneratorOptions` bounds from the
  kernel's own random generator;
- `GeneratorOptions(sizes=SizeDistribution(...))` (the `release*` presets):
  long-tailed log-normal counts with given means. Kernel i of a split takes
  quantile u_i of each distribution, where (u_i) is a randomly shifted R2
  low-discrepancy sequence (`planned_sizes`): every kernel is still a pure
  function of (seed, split, index), but any stretch of consecutive indices
  covers the distributions evenly, so a split's totals land within about 1%
  of the target instead of the several % that independent draws of such a
  heavy tail would give.

    options = GeneratorOptions(sizes=RELEASE_SIZES)
    counts = preset_counts("release_eighth")   # {"train": 714, "valid": 84, "test": 106}
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics

import numpy as np

from synthetic.common.fileformat import SPLITS
from synthetic.tiles.cost_model import DEFAULT_HARDWARE, Hardware


@dataclasses.dataclass(frozen=True)
class SizeDistribution:
    """Log-normal node and config counts per kernel (clipped to [1 or 2, max]).

    `plan_*_mean` is the mean of the clipped, rounded distribution that
    configurable (resp. non-2-node) kernels are planned with; it sits above the
    split-wide mean because some kernels leave the plan (all-zero-config
    kernels keep 1-32 rows, "move" kernels have 2 nodes, a few kernels have
    fewer plausible tiles than planned). `RELEASE_SIZES` is calibrated so the
    generated release-size splits average ~1,840 configs and ~40 nodes per
    kernel, like the real tile:xla release.
    """

    plan_configs_mean: float
    configs_sigma: float
    max_configs: int
    plan_nodes_mean: float
    nodes_sigma: float
    max_nodes: int

    def __post_init__(self) -> None:
        if self.max_configs < 2 or self.max_nodes < 3:
            raise ValueError(
                f"need max_configs >= 2 and max_nodes >= 3, got {self.max_configs}, "
                f"{self.max_nodes}"
            )
        for name in ("plan_configs_mean", "plan_nodes_mean", "configs_sigma", "nodes_sigma"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 2 < self.plan_configs_mean < self.max_configs:
            raise ValueError("plan_configs_mean must lie between 2 and max_configs")
        if not 3 < self.plan_nodes_mean < self.max_nodes:
            raise ValueError("plan_nodes_mean must lie between 3 and max_nodes")


# Real tile:xla release: 5709/676/844 kernels, 12.9M configs (~1,840 per
# kernel, long tail), ~40 nodes per kernel (tail to several hundred).
RELEASE_COUNTS = {"train": 5709, "valid": 676, "test": 844}
RELEASE_SIZES = SizeDistribution(
    plan_configs_mean=2060.0,
    configs_sigma=1.3,
    max_configs=60000,
    plan_nodes_mean=46.0,
    nodes_sigma=1.0,
    max_nodes=1000,
)
# Kernel counts are the release's times the factor; per-kernel sizes are the same.
PRESETS = {"release": 1.0, "release_half": 0.5, "release_quarter": 0.25, "release_eighth": 0.125}


def preset_counts(name: str) -> dict[str, int]:
    """Kernels per split of a preset (release counts scaled, rounded half up)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return {s: int(math.floor(c * PRESETS[name] + 0.5)) for s, c in RELEASE_COUNTS.items()}


@dataclasses.dataclass(frozen=True)
class GeneratorOptions:
    """Size knobs of a synthetic set (the toy set uses the defaults).

    With `sizes`, node and config counts follow that distribution and
    `min_configs`, `max_configs` and `max_nodes` are not used.
    """

    min_configs: int = 5
    max_configs: int = 200
    max_nodes: int = 40
    # Cost-model constants the runtimes are computed with (the default world's).
    hardware: Hardware = DEFAULT_HARDWARE
    # The cost model's structure, noise, machines and kernel mix (worlds.WORLDS).
    world: str = "default"
    # The real test split hides its runtimes; benchmarks need them to score.
    test_labels: bool = False
    sizes: SizeDistribution | None = None

    def __post_init__(self) -> None:
        if self.min_configs < 1 or self.max_configs < self.min_configs:
            raise ValueError(
                f"need 1 <= min_configs <= max_configs, got {self.min_configs}, {self.max_configs}"
            )
        if self.max_nodes < 2:
            raise ValueError(f"max_nodes must be at least 2, got {self.max_nodes}")
        from synthetic.tiles.worlds import WORLDS

        if self.world not in WORLDS:
            raise ValueError(f"unknown world {self.world!r}; choose one of {', '.join(WORLDS)}")
        if self.world != "default" and self.hardware != DEFAULT_HARDWARE:
            raise ValueError(
                f"the {self.world} world has constants of its own; other hardware constants "
                "apply to the default world only"
            )

    def world_model(self):
        """The `worlds.World` the runtimes come from (the default one with `hardware`)."""
        from synthetic.tiles.worlds import WORLDS

        world = WORLDS[self.world]
        if self.world == "default":
            world = dataclasses.replace(world, hardware=self.hardware)
        return world

    @property
    def node_limit(self) -> int:
        return self.sizes.max_nodes if self.sizes is not None else self.max_nodes

    @property
    def config_limit(self) -> int:
        return self.sizes.max_configs if self.sizes is not None else self.max_configs


# R2 sequence (Roberts 2018): i * (1/g, 1/g^2) mod 1, g the plastic number, is
# evenly spread in the unit square for every prefix and every window.
_PLASTIC = 1.324717957244746
_R2_STEP = (1.0 / _PLASTIC, 1.0 / _PLASTIC**2)
_CALIBRATION_POINTS = 1 << 14


def _quantiles(u: np.ndarray, median: float, sigma: float, low: int, high: int) -> np.ndarray:
    z = np.array([statistics.NormalDist().inv_cdf(float(x)) for x in np.ravel(u)])
    return np.clip(np.rint(median * np.exp(sigma * z)), low, high).astype(np.int64)


@functools.lru_cache(maxsize=32)
def _median_for_mean(mean: float, sigma: float, low: int, high: int) -> float:
    """The log-normal median whose clipped, rounded quantiles average `mean`."""
    u = (np.arange(_CALIBRATION_POINTS) + 0.5) / _CALIBRATION_POINTS
    z = np.array([statistics.NormalDist().inv_cdf(float(x)) for x in u])

    def grid_mean(median: float) -> float:
        return float(np.clip(np.rint(median * np.exp(sigma * z)), low, high).mean())

    lo, hi = float(low) * 1e-3, float(high)
    for _ in range(100):  # the grid mean grows with the median
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if grid_mean(mid) < mean else (lo, mid)
    return math.sqrt(lo * hi)


def _r2_offset(seed: int, split: str) -> np.ndarray:
    """The random shift of a split's sequence (seeded apart from any kernel's generator)."""
    seq = np.random.SeedSequence([seed, SPLITS.index(split), 0x51E5])
    return np.random.default_rng(seq).random(2)


def planned_sizes(
    seed: int, split: str, indices: int | np.ndarray, sizes: SizeDistribution
) -> tuple[np.ndarray, np.ndarray]:
    """Planned (nodes, configs) of kernels `indices` of a split; cheap, no kernel is built."""
    idx = np.atleast_1d(np.asarray(indices, dtype=np.float64))
    u = (_r2_offset(seed, split)[None, :] + (idx[:, None] + 1.0) * np.array(_R2_STEP)) % 1.0
    u = np.clip(u, 1e-9, 1 - 1e-9)
    c_med = _median_for_mean(sizes.plan_configs_mean, sizes.configs_sigma, 2, sizes.max_configs)
    n_med = _median_for_mean(sizes.plan_nodes_mean, sizes.nodes_sigma, 3, sizes.max_nodes)
    configs = _quantiles(u[:, 0], c_med, sizes.configs_sigma, 2, sizes.max_configs)
    nodes = _quantiles(u[:, 1], n_med, sizes.nodes_sigma, 3, sizes.max_nodes)
    return nodes, configs
