"""Whole kernels: plan, graph, tile configs, runtimes; a pure function of (seed, split, index)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from synthetic.common.fileformat import (
    ARRAY_DTYPES,
    BF16,
    CONFIG_FEAT_DIM,
    F32,
    SPLITS,
    TEST_PROGRAMS,
    TRAIN_PROGRAMS,
    VALID_PROGRAMS,
    ElementType,
)
from synthetic.tiles.configs import ReleaseConfigSpace, sample_configs
from synthetic.tiles.cost_model import (
    CostSpec,
    config_features,
    default_tiles,
)
from synthetic.tiles.graphs import (
    _BUILDERS,
    _FAMILY_MIN_NODES,
    _FAMILY_WEIGHTS,
    _choice,
    _Graph,
    _Plan,
)
from synthetic.tiles.options import GeneratorOptions, planned_sizes


@dataclasses.dataclass(frozen=True)
class SyntheticKernel:
    """One generated kernel: its file stem, arrays (real dtypes) and cost description."""

    name: str
    split: str
    family: str
    arrays: dict[str, np.ndarray]
    cost: CostSpec


DEFAULT_OPTIONS = GeneratorOptions()


def kernel_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """The generator of kernel `index` of `split`: independent of every other kernel."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if seed < 0 or index < 0:
        raise ValueError(f"seed and index must be non-negative, got {seed}, {index}")
    return np.random.default_rng(np.random.SeedSequence([seed, SPLITS.index(split), index]))


def _log_uniform_int(rng: np.random.Generator, low: int, high: int) -> int:
    if high <= low:
        return low
    return int(min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high)))))))


def _kernel_name(rng: np.random.Generator, split: str, program: str) -> str:
    if split == "test":
        return rng.bytes(16).hex()
    # Real names carry a signed 64-bit hash: `<program>_-342c949e14733d96`.
    value = int(rng.integers(-(2**63), 2**63 - 1, dtype=np.int64))
    return f"{program}_{'-' if value < 0 else ''}{abs(value):016x}"


def _plan(
    rng: np.random.Generator,
    index: int,
    etype: ElementType,
    opts: GeneratorOptions,
    nodes: int | None = None,
    configs: int | None = None,
) -> tuple[_Plan, int, bool]:
    """Family, size and quirks of a kernel; the first five of a split are fixed quirks.

    `nodes` and `configs` (release-size sets) replace the log-uniform draws,
    which are still made so that the default sets keep their random stream.
    """
    max_nodes, max_configs = opts.node_limit, opts.config_limit
    mix = opts.world_model().family_weights or _FAMILY_WEIGHTS
    families = [f for f in mix if _FAMILY_MIN_NODES[f] <= max_nodes]
    weights = np.array([mix[f] for f in families])
    family = families[int(rng.choice(len(families), p=weights / weights.sum()))]
    target = _log_uniform_int(rng, 3, max(3, opts.max_nodes))
    multi = rng.random() < 0.1
    configurable = rng.random() < 0.6
    n_configs = _log_uniform_int(rng, opts.min_configs, opts.max_configs)
    duplicate = rng.random() < 0.2
    zero_rows = int(rng.integers(1, 33))
    target = target if nodes is None else nodes
    n_configs = n_configs if configs is None else configs
    if index == 0:  # the only config of a kernel that cannot be tiled
        family, configurable, zero_rows = "move", False, 1
    elif index == 1:  # two identical all-zero rows (a re-measured default)
        family, configurable, zero_rows = "move", False, 2
    elif index == 2 and max_nodes >= 5:  # tuple output: several roots
        family, multi, target = "elementwise", True, max(target, 5)
    elif index == 3:
        configurable, n_configs, duplicate = True, 2, False
    elif index == 4:
        configurable, duplicate, n_configs = True, True, max(n_configs, 3)
    if family == "move":
        target, multi = 2, False
        if not configurable:
            n_configs, duplicate = min(zero_rows, max_configs), False
    else:
        configurable = True
        target = min(max_nodes, max(target, _FAMILY_MIN_NODES[family]))
        multi = multi and family in ("elementwise", "dot", "conv") and target >= 5
    n_configs = min(n_configs, max_configs)
    return _Plan(family, target, etype, multi, configurable), n_configs, duplicate


# A release-size kernel planned with more configs than its graph's tile space
# holds is rebuilt (a new family and shape from the same generator) up to this
# many times; after that it keeps the largest space seen.
MAX_GRAPH_ATTEMPTS = 24


def _release_kernel(
    rng: np.random.Generator,
    seed: int,
    split: str,
    index: int,
    etype: ElementType,
    opts: GeneratorOptions,
) -> tuple[_Plan, _Graph, CostSpec, np.ndarray, np.ndarray]:
    """Graph and tile configs of a kernel of a release-size set (`opts.sizes`)."""
    nodes, configs = planned_sizes(seed, split, index, opts.sizes)
    best = None
    for _ in range(MAX_GRAPH_ATTEMPTS):
        plan, n_configs, duplicate = _plan(rng, index, etype, opts, int(nodes[0]), int(configs[0]))
        g = _Graph()
        spec = _BUILDERS[plan.family](g, rng, plan)
        if not spec.configurable:
            return plan, g, spec, *_unconfigured(spec, n_configs)
        space = ReleaseConfigSpace(spec, opts.world_model().hardware)
        capacity = space.capacity(rng)
        if best is None or capacity > best[0]:
            best = (capacity, plan, g, spec, space, n_configs, duplicate)
        # Room to spare: a sampled estimate can be optimistic.
        if capacity >= 1.25 * n_configs:
            break
    _, plan, g, spec, space, n_configs, duplicate = best
    return plan, g, spec, *space.sample(rng, n_configs, duplicate)


def _unconfigured(spec: CostSpec, n_configs: int) -> tuple[np.ndarray, np.ndarray]:
    """`n_configs` copies of the default tile (their config features are all zero)."""
    default, default_k = default_tiles(spec)
    tiles = np.tile(np.array([default], dtype=np.int64), (n_configs, 1))
    return tiles, np.full(n_configs, default_k, dtype=np.int64)


def generate_kernel(
    seed: int, split: str, index: int, options: GeneratorOptions = DEFAULT_OPTIONS
) -> SyntheticKernel:
    """Kernel `index` of `split`: a pure function of its arguments."""
    rng = kernel_rng(seed, split, index)
    world = options.world_model()
    own = {"train": TRAIN_PROGRAMS, "valid": VALID_PROGRAMS, "test": TEST_PROGRAMS}
    programs = (world.programs or own)[split]
    program = str(_choice(rng, programs))
    name = _kernel_name(rng, split, program)
    if split == "test" and options.test_labels:  # a benchmark set: name the program too
        name = f"{program}_{name[:16]}"
    if "fp32" in program:
        etype = F32
    elif "fp16" in program or "bf16" in program:
        etype = BF16
    else:
        etype = F32 if rng.random() < 0.5 else BF16
    if options.sizes is None:
        plan, n_configs, duplicate = _plan(rng, index, etype, options)
        g = _Graph()
        spec = _BUILDERS[plan.family](g, rng, plan)
        if spec.configurable:
            tiles, k_tiles = sample_configs(rng, spec, n_configs, duplicate, world.hardware)
        else:
            tiles, k_tiles = _unconfigured(spec, n_configs)
    else:
        plan, g, spec, tiles, k_tiles = _release_kernel(rng, seed, split, index, etype, options)
    if spec.configurable:
        config_feat = config_features(spec, tiles, k_tiles)
    else:
        config_feat = np.zeros((len(tiles), CONFIG_FEAT_DIM), dtype=np.float32)
    runtime, normalizers = world.measure(rng, world.runtime_ns(spec, tiles, k_tiles))
    if split == "test" and not options.test_labels:  # hidden, like the real test split
        runtime = np.zeros_like(runtime)
        normalizers = np.ones_like(normalizers)

    arrays = {
        "node_feat": g.node_features(),
        "node_opcode": g.opcodes(),
        "edge_index": g.edges(),
        "config_feat": config_feat,
        "config_runtime": runtime,
        "config_runtime_normalizers": normalizers,
    }
    arrays = {k: np.ascontiguousarray(v, dtype=ARRAY_DTYPES[k]) for k, v in arrays.items()}
    return SyntheticKernel(name, split, plan.family, arrays, spec)
