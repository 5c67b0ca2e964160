"""The analytic roofline cost model of a tiled TPU kernel, and which tiles an autotuner tries."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from synthetic.common.fileformat import (
    CFG_INPUT_BOUNDS,
    CFG_KERNEL_BOUNDS,
    CFG_OUTPUT_BOUNDS,
    CONFIG_FEAT_DIM,
)

REDUCED_AXIS = -1  # OperandSpec.minor/second value: the operand's reduced axis


@dataclasses.dataclass(frozen=True)
class Hardware:
    """Constants of the simulated TPU core (rates per nanosecond)."""

    hbm_bytes_per_ns: float = 1000.0
    mxu_flops_per_ns: float = 100_000.0  # bf16 operands; f32 runs at `mxu_f32_factor`
    mxu_f32_factor: float = 0.25
    vpu_flops_per_ns: float = 2048.0
    eup_ops_per_ns: float = 256.0  # transcendental unit
    vmem_bytes: float = 16 * 2**20
    max_spill_factor: float = 4.0
    step_overhead_ns: float = 350.0
    launch_ns: float = 1500.0
    lanes: int = 128
    sublanes: int = 8


DEFAULT_HARDWARE = Hardware()
# A second simulated core with other constants (a quarter of the on-chip
# memory, lower bandwidth, a costlier grid step, a wider alignment), so that a
# modelling gain that only fits one cost model shows up as such.
ALTERNATE_HARDWARE = Hardware(
    hbm_bytes_per_ns=600.0,
    vmem_bytes=4 * 2**20,
    step_overhead_ns=900.0,
    lanes=256,
    sublanes=16,
)
HARDWARE_PRESETS = {"default": DEFAULT_HARDWARE, "alternate": ALTERNATE_HARDWARE}

# Slowdown of the machines kernels are "measured" on (runtime multiplier).
# Random configs are "plausible": at most MAX_STEPS grid steps (output tiles x K
# steps), at most MAX_PADDING_WASTE padded/real output elements per tile, and a K
# tile of at least MIN_K_TILE (or all of K).
MAX_STEPS = 2048
MAX_PADDING_WASTE = 16.0
MIN_K_TILE = 16

MACHINE_SLOWDOWNS = (0.8, 0.9, 1.0, 1.1, 1.25, 1.4)
NOISE_SIGMA = 0.025


@dataclasses.dataclass(frozen=True)
class OperandSpec:
    """A fusion input streamed through VMEM tile by tile (not a dot/conv operand).

    `dims` are the output dimensions it spans (it is broadcast along the others);
    `minor`/`second` are the output dimensions that are its lane (minor-most) and
    sublane (second-minor) dimensions, or `REDUCED_AXIS` for its reduced axis
    (reduce kernels read `reduced` input elements per output element), or None.
    """

    dims: tuple[int, ...]
    minor: int | None
    second: int | None
    bytes_per_element: int
    reduced: int = 1


@dataclasses.dataclass(frozen=True)
class Contraction:
    """The dot or convolution at the heart of a kernel; `k` is the tiled K dimension.

    dot: output (..., M, N), K the contracted size. conv: output (N, H, W, C) in
    NHWC, K the input channels, `window` (kh, kw) and `stride` of the filter.
    """

    kind: str  # "dot" or "conv"
    k: int
    bytes_per_element: int
    window: tuple[int, int] = (1, 1)
    stride: int = 1


@dataclasses.dataclass(frozen=True)
class CostSpec:
    """What the cost model needs to know about a kernel (all derivable from its graph)."""

    out_dims: tuple[int, ...]
    out_minor: int
    out_second: int | None
    out_bytes: int  # bytes per output element, summed over all outputs
    operands: tuple[OperandSpec, ...]
    vpu_per_element: float  # vector flops per output element
    eup_per_element: float  # transcendental ops per output element
    contraction: Contraction | None
    configurable: bool = True


def _round_up(x: np.ndarray, multiple: int) -> np.ndarray:
    return np.ceil(x / multiple) * multiple


def _operand_tile_elements(op: OperandSpec, tiles: np.ndarray, hw: Hardware) -> np.ndarray:
    elems = np.ones(tiles.shape[0])
    for d in op.dims:
        t = tiles[:, d]
        if d == op.minor:
            t = _round_up(t, hw.lanes)
        elif d == op.second:
            t = _round_up(t, hw.sublanes)
        elems = elems * t
    if op.reduced > 1 or REDUCED_AXIS in (op.minor, op.second):
        r = float(op.reduced)
        if op.minor == REDUCED_AXIS:
            r = math.ceil(r / hw.lanes) * hw.lanes
        elif op.second == REDUCED_AXIS:
            r = math.ceil(r / hw.sublanes) * hw.sublanes
        elems = elems * r
    return elems


def estimate_runtime_ns(
    spec: CostSpec,
    out_tiles: np.ndarray,
    k_tiles: np.ndarray | None = None,
    hw: Hardware = DEFAULT_HARDWARE,
) -> np.ndarray:
    """Noise-free runtime (ns, float64) of each tile config of a kernel.

    `out_tiles` is [c, rank] (tile size per output dimension, 1..dim), `k_tiles`
    is [c] (K tile of the contraction; ignored without one).

    runtime = launch + steps * (max(compute, memory) * spill + overhead) + fill/drain,
    where steps = prod(ceil(dim / tile)) * ceil(K / k_tile). Tile dims are padded
    to the (8, 128) grid on the output's (and every operand's) two minor dims.
    """
    tiles = np.asarray(out_tiles, dtype=np.float64).reshape(-1, len(spec.out_dims))
    dims = np.asarray(spec.out_dims, dtype=np.float64)
    c = tiles.shape[0]
    out_tiles_count = np.prod(np.ceil(dims / tiles), axis=1)
    padded = tiles.copy()
    padded[:, spec.out_minor] = _round_up(tiles[:, spec.out_minor], hw.lanes)
    if spec.out_second is not None:
        padded[:, spec.out_second] = _round_up(tiles[:, spec.out_second], hw.sublanes)
    elems = np.prod(padded, axis=1)  # padded output elements per tile

    out_bytes = elems * spec.out_bytes
    in_bytes = np.zeros(c)
    for op in spec.operands:
        in_bytes += _operand_tile_elements(op, tiles, hw) * op.bytes_per_element
    elementwise_time = (
        elems * spec.vpu_per_element / hw.vpu_flops_per_ns
        + elems * spec.eup_per_element / hw.eup_ops_per_ns
    )

    k_steps = np.ones(c)
    step_in = np.zeros(c)  # contraction operand bytes per K step
    mxu_time = np.zeros(c)
    accumulator = np.zeros(c)
    con = spec.contraction
    if con is not None:
        tk = np.asarray(k_tiles, dtype=np.float64).reshape(c)
        k_steps = np.ceil(con.k / tk)
        k_lane = _round_up(tk, hw.lanes)
        k_sub = _round_up(tk, hw.sublanes)
        if con.kind == "dot":
            batch = np.prod(tiles[:, :-2], axis=1)
            m = _round_up(tiles[:, -2], hw.sublanes)
            n = _round_up(tiles[:, -1], hw.lanes)
            lhs = batch * m * k_lane
            rhs = batch * k_sub * n
            flops = 2.0 * batch * m * n * k_lane
        else:
            kh, kw = con.window
            h_in = (tiles[:, 1] - 1) * con.stride + kh
            w_in = (tiles[:, 2] - 1) * con.stride + kw
            lhs = tiles[:, 0] * h_in * _round_up(w_in, hw.sublanes) * k_lane
            rhs = kh * kw * k_sub * _round_up(tiles[:, 3], hw.lanes)
            flops = 2.0 * elems * kh * kw * k_lane
        step_in = (lhs + rhs) * con.bytes_per_element
        rate = hw.mxu_flops_per_ns * (1.0 if con.bytes_per_element <= 2 else hw.mxu_f32_factor)
        mxu_time = flops / rate
        accumulator = np.where(k_steps > 1, elems * 4.0, 0.0)

    steps = out_tiles_count * k_steps
    step_memory = (step_in + (in_bytes + out_bytes) / k_steps) / hw.hbm_bytes_per_ns
    step_compute = mxu_time + elementwise_time / k_steps
    working_set = 2.0 * (step_in + in_bytes + out_bytes) + accumulator
    overflow = working_set / hw.vmem_bytes
    spill = np.where(
        overflow > 1.0,
        np.minimum(hw.max_spill_factor, 2.0 + np.log2(np.maximum(overflow, 1.0))),
        1.0,
    )
    per_step = np.maximum(step_compute, step_memory) * spill + hw.step_overhead_ns
    return hw.launch_ns + steps * per_step + step_memory + step_compute


def default_tiles(spec: CostSpec) -> tuple[tuple[int, ...], int]:
    """The compiler's default tile: a layout-blind heuristic, decent but rarely best.

    The minor-most *logical* dim up to 512, then dims towards the major end grow
    by doubling while the tile stays within min(32K, max(1K, elements / 8))
    elements (the default splits work into about 8 tiles or more); K tile up to 128.
    """
    dims = spec.out_dims
    budget = min(32768, max(1024, math.prod(dims) // 8))
    tile = [1] * len(dims)
    tile[-1] = min(dims[-1], 512)
    for d in reversed(range(len(dims) - 1)):
        while tile[d] < dims[d] and math.prod(tile) * 2 <= budget:
            tile[d] = min(dims[d], tile[d] * 2)
    k = min(spec.contraction.k, 128) if spec.contraction is not None else 0
    return tuple(tile), k


def tile_candidates(size: int) -> np.ndarray:
    """Tile sizes tried for a dimension of `size`: powers of 2, 3*2^k, ceil splits, size."""
    values = {size}
    p = 1
    while p <= size:
        values.add(p)
        if 3 * p <= size:
            values.add(3 * p)
        p *= 2
    for parts in (2, 3, 4, 8):
        values.add(-(-size // parts))
    return np.array(sorted(values), dtype=np.int64)


def release_tile_candidates(size: int) -> np.ndarray:
    """The larger tile menu of release-size sets: `tile_candidates` plus divisors,
    multiples of 8 up to 256, multiples of 128, and ceil splits into 2..16 parts.

    Real output bounds hold sizes like 5, 10, 14 and 20, and real
    kernels list thousands of configs, more than powers of two allow.
    """
    values = set(tile_candidates(size).tolist())
    values.update(d for d in range(1, min(size, 4096) + 1) if size % d == 0)
    values.update(range(8, min(size, 256) + 1, 8))
    values.update(range(128, size + 1, 128))
    values.update(-(-size // parts) for parts in range(2, 17))
    return np.array(sorted(values), dtype=np.int64)


def config_features(spec: CostSpec, out_tiles: np.ndarray, k_tiles: np.ndarray) -> np.ndarray:
    """config_feat rows [c, 24] for tile configs: kernel, output and input bounds.

    output_bounds = output tile per dim; for dots input_bounds = LHS tile
    (batch.., M, K) and kernel_bounds = RHS tile (batch.., K, N); for convolutions
    input_bounds = input patch (N, H, W, K) and kernel_bounds = filter tile
    (kh, kw, K, C). Unused groups are all zero; sums/products over used dims.
    """
    tiles = np.asarray(out_tiles, dtype=np.int64).reshape(-1, len(spec.out_dims))
    c = tiles.shape[0]
    feat = np.zeros((c, CONFIG_FEAT_DIM), dtype=np.float64)

    def fill(start: int, values: np.ndarray) -> None:
        feat[:, start : start + values.shape[1]] = values
        feat[:, start + 6] = values.sum(axis=1)
        feat[:, start + 7] = values.prod(axis=1)

    fill(CFG_OUTPUT_BOUNDS, tiles)
    con = spec.contraction
    if con is not None:
        tk = np.asarray(k_tiles, dtype=np.int64).reshape(c, 1)
        if con.kind == "dot":
            batch = tiles[:, :-2]
            fill(CFG_INPUT_BOUNDS, np.concatenate([batch, tiles[:, -2:-1], tk], axis=1))
            fill(CFG_KERNEL_BOUNDS, np.concatenate([batch, tk, tiles[:, -1:]], axis=1))
        else:
            kh, kw = con.window
            h_in = (tiles[:, 1:2] - 1) * con.stride + kh
            w_in = (tiles[:, 2:3] - 1) * con.stride + kw
            fill(CFG_INPUT_BOUNDS, np.concatenate([tiles[:, 0:1], h_in, w_in, tk], axis=1))
            window = np.tile(np.array([[kh, kw]], dtype=np.int64), (c, 1))
            fill(CFG_KERNEL_BOUNDS, np.concatenate([window, tk, tiles[:, 3:4]], axis=1))
    return feat.astype(np.float32)


def _plausible(spec: CostSpec, rows: np.ndarray, hw: Hardware = DEFAULT_HARDWARE) -> np.ndarray:
    """Which candidate rows (output tile..., K tile) an autotuner would try at all."""
    tiles = rows[:, :-1].astype(np.float64)
    steps = np.prod(np.ceil(np.asarray(spec.out_dims) / tiles), axis=1)
    padded = tiles.copy()
    padded[:, spec.out_minor] = _round_up(tiles[:, spec.out_minor], hw.lanes)
    if spec.out_second is not None:
        padded[:, spec.out_second] = _round_up(tiles[:, spec.out_second], hw.sublanes)
    waste = np.prod(padded, axis=1) / np.prod(tiles, axis=1)
    ok = waste <= MAX_PADDING_WASTE
    if spec.contraction is not None:
        k = spec.contraction.k
        steps = steps * np.ceil(k / rows[:, -1])
        ok &= rows[:, -1] >= min(k, MIN_K_TILE)
    return ok & (steps <= MAX_STEPS)
