"""Whole kernels: plan, graph, tile configs, runtimes; a pure function of (seed, split, index)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from baselines.tiles.synthetic.cost_model import (
    DEFAULT_HARDWARE,
    MACHINE_SLOWDOWNS,
    NOISE_SIGMA,
    CostSpec,
    Hardware,
    _plausible,
    config_features,
    default_tiles,
    estimate_runtime_ns,
    tile_candidates,
)
from baselines.tiles.synthetic.fileformat import (
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
from baselines.tiles.synthetic.graphs import (
    _BUILDERS,
    _FAMILY_MIN_NODES,
    _FAMILY_WEIGHTS,
    _choice,
    _Graph,
    _Plan,
)
from baselines.tiles.synthetic.options import (
    GeneratorOptions,
)


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
    rng: np.random.Generator, index: int, etype: ElementType, opts: GeneratorOptions
) -> tuple[_Plan, int, bool]:
    """Family, size and quirks of a kernel; the first five of a split are fixed quirks."""
    families = [f for f in _FAMILY_WEIGHTS if _FAMILY_MIN_NODES[f] <= opts.max_nodes]
    weights = np.array([_FAMILY_WEIGHTS[f] for f in families])
    family = families[int(rng.choice(len(families), p=weights / weights.sum()))]
    target = _log_uniform_int(rng, 3, max(3, opts.max_nodes))
    multi = rng.random() < 0.1
    configurable = rng.random() < 0.6
    n_configs = _log_uniform_int(rng, opts.min_configs, opts.max_configs)
    duplicate = rng.random() < 0.2
    zero_rows = int(rng.integers(1, 33))
    if index == 0:  # the only config of a kernel that cannot be tiled
        family, configurable, zero_rows = "move", False, 1
    elif index == 1:  # two identical all-zero rows (a re-measured default)
        family, configurable, zero_rows = "move", False, 2
    elif index == 2 and opts.max_nodes >= 5:  # tuple output: several roots
        family, multi, target = "elementwise", True, max(target, 5)
    elif index == 3:
        configurable, n_configs, duplicate = True, 2, False
    elif index == 4:
        configurable, duplicate, n_configs = True, True, max(n_configs, 3)
    if family == "move":
        target, multi = 2, False
        if not configurable:
            n_configs, duplicate = min(zero_rows, opts.max_configs), False
    else:
        configurable = True
        target = min(opts.max_nodes, max(target, _FAMILY_MIN_NODES[family]))
        multi = multi and family in ("elementwise", "dot", "conv") and target >= 5
    n_configs = min(n_configs, opts.max_configs)
    return _Plan(family, target, etype, multi, configurable), n_configs, duplicate


def _sample_configs(
    rng: np.random.Generator,
    spec: CostSpec,
    count: int,
    duplicate: bool,
    hw: Hardware = DEFAULT_HARDWARE,
) -> tuple[np.ndarray, np.ndarray]:
    """Tile configs: the default first, then distinct random ones (maybe the default again).

    Random configs that `_plausible` rejects are skipped, like an autotuner that
    never tries absurdly small tiles.
    """
    default, default_k = default_tiles(spec)
    candidates = [tile_candidates(d) for d in spec.out_dims]
    if spec.contraction is not None:
        candidates.append(tile_candidates(spec.contraction.k))
    else:
        candidates.append(np.zeros(1, dtype=np.int64))
    seen = {default + (default_k,)}
    rows = [default + (default_k,)]
    wanted = count - (1 if duplicate and count >= 3 else 0)
    for _ in range(8):
        missing = wanted - len(rows)
        if missing <= 0:
            break
        draws = 2 * missing + 8
        block = np.stack([c[rng.integers(len(c), size=draws)] for c in candidates], axis=1)
        for row in map(tuple, block[_plausible(spec, block, hw)].tolist()):
            if row not in seen:
                seen.add(row)
                rows.append(row)
                if len(rows) == wanted:
                    break
    if duplicate and count >= 3:
        rows.insert(int(rng.integers(1, len(rows) + 1)), rows[0])
    table = np.array(rows, dtype=np.int64)
    return table[:, :-1], table[:, -1]


def generate_kernel(
    seed: int, split: str, index: int, options: GeneratorOptions = DEFAULT_OPTIONS
) -> SyntheticKernel:
    """Kernel `index` of `split`: a pure function of its arguments."""
    rng = kernel_rng(seed, split, index)
    programs = {"train": TRAIN_PROGRAMS, "valid": VALID_PROGRAMS, "test": TEST_PROGRAMS}[split]
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
    plan, n_configs, duplicate = _plan(rng, index, etype, options)
    g = _Graph()
    spec = _BUILDERS[plan.family](g, rng, plan)

    if spec.configurable:
        tiles, k_tiles = _sample_configs(rng, spec, n_configs, duplicate, options.hardware)
        config_feat = config_features(spec, tiles, k_tiles)
    else:
        default, default_k = default_tiles(spec)
        tiles = np.tile(np.array([default], dtype=np.int64), (n_configs, 1))
        k_tiles = np.full(n_configs, default_k, dtype=np.int64)
        config_feat = np.zeros((n_configs, CONFIG_FEAT_DIM), dtype=np.float32)
    model = estimate_runtime_ns(spec, tiles, k_tiles, options.hardware)
    slowdown = float(_choice(rng, MACHINE_SLOWDOWNS))
    noise = np.exp(rng.normal(0.0, NOISE_SIGMA, size=len(model)))
    runtime = np.maximum(1, np.rint(model * slowdown * noise)).astype(np.int64)
    normalizers = np.full_like(runtime, runtime[0])  # row 0 is the default config
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
