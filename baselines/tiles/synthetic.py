"""Deterministic synthetic tile:xla kernels: graph sampler, analytic tile cost model, npz writer.

The real TpuGraphs tile:xla files are large and third-party; this module makes
small look-alikes for tests, smoke runs and benchmarks. Every file has the real
keys, dtypes and column layout (see `ARRAY_DTYPES`, the `COL_*` and `CFG_*`
constants) and reproduces the quirks a loader meets in the real release (2-node
kernels, 1- and 2-config kernels, tuple outputs with several roots, a re-measured
default config, all-zero config rows, hidden test labels).

Runtimes come from an analytic roofline model of a tiled TPU kernel
(`estimate_runtime_ns`): the output is cut into tiles (and the contraction
dimension of dots and convolutions into K steps); each step costs the larger of
its compute time and its HBM traffic time, padded to the (8, 128) sublane/lane
grid, slowed down when its double-buffered working set exceeds VMEM, plus a
fixed per-step overhead and one unhidden pipeline fill/drain. The measured
runtime adds a per-kernel machine speed factor and ~2.5% log-normal noise.

Everything is a pure function of `(seed, split, index)`: `generate_kernel` seeds
its own `numpy.random.Generator` from them, so adding kernels to a split never
changes the earlier ones, and `write_npz` writes byte-identical files.

    options = GeneratorOptions(min_configs=5, max_configs=200, max_nodes=40)
    kernel = generate_kernel(seed=0, split="train", index=7, options=options)
    write_npz(out_dir / f"{kernel.name}.npz", kernel.arrays)
"""

from __future__ import annotations

import dataclasses
import io
import math
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

# ---------------------------------------------------------------------------
# File format (matches the real release).

NODE_FEAT_DIM = 140
CONFIG_FEAT_DIM = 24
SPLITS = ("train", "valid", "test")

# Keys in the order of the real files, with the dtypes seen there.
ARRAY_DTYPES: Mapping[str, np.dtype] = {
    "node_feat": np.dtype("<f4"),
    "node_opcode": np.dtype("u1"),
    "edge_index": np.dtype("<i8"),
    "config_feat": np.dtype("<f4"),
    "config_runtime": np.dtype("<i8"),
    "config_runtime_normalizers": np.dtype("<i8"),
}

# Node feature columns. Groups of "6 dims + sum + product" start at the named column.
COL_IS_ROOT = 0
COL_ELEMENT_BITS = 1
COL_SHAPE = 21  # dims 0-5 in 21..26
COL_SHAPE_SUM = 27
COL_SHAPE_PRODUCT = 28
COL_TUPLE_SIZE = 29
COL_PARAMETER_NUMBER = 30
COL_DIMENSIONS = 31  # 31..36: reduce dims, broadcast dims, transpose permutation, ...
COL_WINDOW_SIZE = 37  # 37..42, sum 43, product 44
COL_WINDOW_STRIDE = 45  # 45..50, sum 51, product 52
COL_WINDOW_PAD_LOW = 53
COL_WINDOW_PAD_HIGH = 61
COL_WINDOW_DILATION = 69
COL_BASE_DILATION = 77
# Products over empty windows/slices: 1.0 in the real files for ordinary nodes.
EMPTY_PRODUCT_COLS = (44, 52, 60, 68, 76, 84, 112, 116, 120, 124, 128, 132)
COL_LAYOUT = 134  # minor_to_major, 134..139

# Config feature groups (6 dims + sum + product each).
CFG_KERNEL_BOUNDS = 0
CFG_OUTPUT_BOUNDS = 8
CFG_INPUT_BOUNDS = 16


@dataclasses.dataclass(frozen=True)
class ElementType:
    """An XLA element type: its one-hot column in node_feat and its size."""

    name: str
    column: int
    bits: int

    @property
    def bytes(self) -> int:
        return self.bits // 8


F32 = ElementType("f32", 13, 32)
BF16 = ElementType("bf16", 15, 16)
PRED = ElementType("pred", 3, 8)
TUPLE = ElementType("tuple", 18, 0)

# Opcode ids (stable; all < 128 like the real vocabulary).
OP_ADD = 2
OP_BROADCAST = 13
OP_COMPARE = 20
OP_CONSTANT = 24
OP_CONVERT = 25
OP_CONVOLUTION = 26
OP_COPY = 27
OP_DIVIDE = 32
OP_DOT = 34
OP_EXPONENTIAL = 38
OP_REDUCE = 48
OP_MAXIMUM = 57
OP_MULTIPLY = 59
OP_PARAMETER = 63
OP_RESHAPE = 75
OP_RSQRT = 83
OP_SELECT = 87
OP_SUBTRACT = 95
OP_TANH = 100
OP_TRANSPOSE = 105
OP_TUPLE = 107

OPCODE_NAMES: Mapping[int, str] = {
    OP_ADD: "add",
    OP_BROADCAST: "broadcast",
    OP_COMPARE: "compare",
    OP_CONSTANT: "constant",
    OP_CONVERT: "convert",
    OP_CONVOLUTION: "convolution",
    OP_COPY: "copy",
    OP_DIVIDE: "divide",
    OP_DOT: "dot",
    OP_EXPONENTIAL: "exponential",
    OP_REDUCE: "reduce",
    OP_MAXIMUM: "maximum",
    OP_MULTIPLY: "multiply",
    OP_PARAMETER: "parameter",
    OP_RESHAPE: "reshape",
    OP_RSQRT: "rsqrt",
    OP_SELECT: "select",
    OP_SUBTRACT: "subtract",
    OP_TANH: "tanh",
    OP_TRANSPOSE: "transpose",
    OP_TUPLE: "tuple",
}

# Program names: train and valid use disjoint programs, like the real split.
TRAIN_PROGRAMS = (
    "resnet50.4x4.fp16",
    "bert_base.2x2.bf16",
    "mlp_mixer.8x8.fp32",
    "unet2d_batch_16_train",
    "transformer_lm.4x4.bf16",
    "efficientnet_b0_batch_64_train",
    "wide_deep.2x2.fp32",
    "vit_b16.8x8.bf16",
    "retinanet.2x2.fp32",
    "dlrm_batch_256_eval",
)
VALID_PROGRAMS = (
    "inception_v3_batch_128_train",
    "mobilenet_v2.2x2.fp16",
    "gpt_small.4x4.bf16",
)
TEST_PROGRAMS = ("shufflenet.2x2.fp32", "t5_small.4x4.bf16", "deeplab_v3_batch_8_train")

# ---------------------------------------------------------------------------
# Cost model.

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


# ---------------------------------------------------------------------------
# Kernel graphs.


@dataclasses.dataclass(frozen=True)
class _Window:
    size: tuple[int, ...]
    stride: tuple[int, ...]
    pad_low: tuple[int, ...]
    pad_high: tuple[int, ...]


@dataclasses.dataclass
class _Node:
    opcode: int
    shape: tuple[int, ...]
    etype: ElementType
    operands: tuple[int, ...]
    layout: tuple[int, ...] | None
    parameter: int = 0
    dimensions: tuple[int, ...] = ()
    window: _Window | None = None
    tuple_size: int = 0
    is_root: bool = False


def _default_layout(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


class _Graph:
    """A kernel graph under construction; operands always precede their users."""

    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.num_parameters = 0

    def __len__(self) -> int:
        return len(self.nodes)

    def add(
        self,
        opcode: int,
        shape: Sequence[int],
        etype: ElementType,
        operands: Sequence[int] = (),
        layout: Sequence[int] | None = None,
        **extra,
    ) -> int:
        shape = tuple(int(s) for s in shape)
        if layout is None and etype is not TUPLE and shape:
            layout = _default_layout(len(shape))
        node = _Node(opcode, shape, etype, tuple(operands), tuple(layout or ()), **extra)
        self.nodes.append(node)
        return len(self.nodes) - 1

    def parameter(
        self, shape: Sequence[int], etype: ElementType, layout: Sequence[int] | None = None
    ) -> int:
        number = self.num_parameters
        self.num_parameters += 1
        return self.add(OP_PARAMETER, shape, etype, layout=layout, parameter=number)

    def node_features(self) -> np.ndarray:
        feat = np.zeros((len(self.nodes), NODE_FEAT_DIM), dtype=np.float64)
        for i, node in enumerate(self.nodes):
            row = feat[i]
            row[COL_IS_ROOT] = float(node.is_root)
            row[COL_ELEMENT_BITS] = node.etype.bits
            row[node.etype.column] = 1.0
            rank = len(node.shape)
            row[COL_SHAPE : COL_SHAPE + rank] = node.shape
            row[COL_SHAPE_SUM] = sum(node.shape)
            row[COL_SHAPE_PRODUCT] = math.prod(node.shape)
            row[COL_TUPLE_SIZE] = node.tuple_size
            row[COL_PARAMETER_NUMBER] = node.parameter
            dims = node.dimensions[:6]
            row[COL_DIMENSIONS : COL_DIMENSIONS + len(dims)] = dims
            row[list(EMPTY_PRODUCT_COLS)] = 1.0
            if node.window is not None:
                w = node.window
                ones = (1,) * len(w.size)
                for start, values in (
                    (COL_WINDOW_SIZE, w.size),
                    (COL_WINDOW_STRIDE, w.stride),
                    (COL_WINDOW_PAD_LOW, w.pad_low),
                    (COL_WINDOW_PAD_HIGH, w.pad_high),
                    (COL_WINDOW_DILATION, ones),
                    (COL_BASE_DILATION, ones),
                ):
                    row[start : start + len(values)] = values
                    row[start + 6] = sum(values)
                    row[start + 7] = math.prod(values)
            row[COL_LAYOUT : COL_LAYOUT + len(node.layout)] = node.layout
        return feat.astype(np.float32)

    def opcodes(self) -> np.ndarray:
        return np.array([n.opcode for n in self.nodes], dtype=np.uint8)

    def edges(self) -> np.ndarray:
        rows = []
        for u, node in enumerate(self.nodes):
            for v in dict.fromkeys(node.operands):
                rows.append((u, v))
        return np.array(rows, dtype=np.int64).reshape(-1, 2)


@dataclasses.dataclass
class _Work:
    """Per-output-element work and streamed operands, accumulated while building."""

    operands: list[OperandSpec] = dataclasses.field(default_factory=list)
    vpu: float = 0.0
    eup: float = 0.0

    def spec(self, out_dims, layout, out_bytes, contraction=None) -> CostSpec:
        """The CostSpec of a kernel with this work and an output of `layout`."""
        return CostSpec(
            out_dims=out_dims,
            out_minor=layout[0],
            out_second=layout[1] if len(out_dims) > 1 else None,
            out_bytes=out_bytes,
            operands=tuple(self.operands),
            vpu_per_element=self.vpu,
            eup_per_element=self.eup,
            contraction=contraction,
        )


_MINOR_SIZES = (32, 64, 96, 100, 128, 192, 200, 256, 320, 384, 512, 640, 768, 1000, 1024)
_MINOR_SIZES += (1280, 2048, 3072, 4096)
_MAJOR_SIZES = (1, 2, 3, 4, 6, 7, 8, 12, 14, 16, 24, 28, 32, 49, 56, 64, 112, 128, 196, 224)
_MAJOR_SIZES += (256, 384, 512, 1024)


def _choice(rng: np.random.Generator, values: Sequence) -> object:
    return values[int(rng.integers(len(values)))]


def _sample_shape(rng: np.random.Generator, rank: int, log2_size: float) -> tuple[int, ...]:
    """An array shape of `rank` with about 2**log2_size elements, natural-looking dims."""
    best, best_gap = None, math.inf
    for _ in range(200):
        shape = [int(_choice(rng, _MAJOR_SIZES)) for _ in range(rank - 1)]
        shape.append(int(_choice(rng, _MINOR_SIZES)))
        gap = abs(math.log2(math.prod(shape)) - log2_size)
        if gap < best_gap:
            best, best_gap = tuple(shape), gap
        if gap < 1.0:
            break
    return best


def _sample_layout(rng: np.random.Generator, rank: int) -> tuple[int, ...]:
    """Mostly the default layout; sometimes the two minor dims swapped, or a permutation."""
    layout = list(_default_layout(rank))
    u = rng.random()
    if rank >= 2 and u < 0.15:
        layout[0], layout[1] = layout[1], layout[0]
    elif rank >= 3 and u < 0.25:
        layout = [int(x) for x in rng.permutation(rank)]
    return tuple(layout)


def _operand_for(shape_layout: tuple[int, ...], bytes_per_element: int) -> OperandSpec:
    """A full-shaped operand with the given layout (same coordinates as the output)."""
    rank = len(shape_layout)
    return OperandSpec(
        dims=tuple(range(rank)),
        minor=shape_layout[0],
        second=shape_layout[1] if rank > 1 else None,
        bytes_per_element=bytes_per_element,
    )


def _elementwise_chain(
    g: _Graph,
    rng: np.random.Generator,
    x: int,
    budget: int,
    work: _Work,
    template: OperandSpec,
    repeat: float = 1.0,
    vector_dim: int | None = None,
) -> int:
    """Appends elementwise ops on `x` (at most `budget` nodes); returns the last value.

    `template` describes a new full-shaped parameter in output coordinates,
    `repeat` is how many of x's elements make one output element (reduce
    prologues), `vector_dim` the output dim bias-like vectors broadcast along.
    """
    values = [x]
    while budget > 0:
        node = g.nodes[x]
        shape, layout, etype = node.shape, node.layout or None, node.etype
        options = [("unary", 1, 2.0), ("convert", 1, 0.6), ("binary_param", 2, 3.0)]
        options += [("binary_const", 3, 2.0), ("select", 4, 0.8)]
        if vector_dim is not None:
            options.append(("binary_vector", 3, 2.0))
        same_type = [v for v in values[:-1] if g.nodes[v].etype is etype]
        if same_type:
            options.append(("reuse", 1, 1.5))
        options = [o for o in options if o[1] <= budget]
        weights = np.array([o[2] for o in options])
        kind, size, _ = options[int(rng.choice(len(options), p=weights / weights.sum()))]
        budget -= size
        if kind == "unary":
            op = int(_choice(rng, (OP_EXPONENTIAL, OP_TANH, OP_RSQRT)))
            x = g.add(op, shape, etype, (x,), layout)
            work.eup += repeat
            work.vpu += 2 * repeat
        elif kind == "convert":
            etype = BF16 if etype is F32 else F32
            x = g.add(OP_CONVERT, shape, etype, (x,), layout)
            work.vpu += repeat
        elif kind == "binary_param":
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY, OP_SUBTRACT, OP_MAXIMUM, OP_DIVIDE)))
            p = g.parameter(shape, etype, layout)
            work.operands.append(dataclasses.replace(template, bytes_per_element=etype.bytes))
            x = g.add(op, shape, etype, (x, p) if rng.random() < 0.7 else (p, x), layout)
            work.vpu += (2 if op == OP_DIVIDE else 1) * repeat
            work.eup += repeat if op == OP_DIVIDE else 0.0
        elif kind == "binary_const":
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY, OP_MAXIMUM)))
            k = g.add(OP_CONSTANT, (), etype)
            b = g.add(OP_BROADCAST, shape, etype, (k,), layout)
            x = g.add(op, shape, etype, (x, b), layout)
            work.vpu += repeat
        elif kind == "binary_vector":
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY)))
            p = g.parameter((shape[vector_dim],), etype)
            b = g.add(OP_BROADCAST, shape, etype, (p,), layout, dimensions=(vector_dim,))
            x = g.add(op, shape, etype, (x, b), layout)
            work.operands.append(OperandSpec((vector_dim,), vector_dim, None, etype.bytes))
            work.vpu += repeat
        elif kind == "reuse":
            other = same_type[int(rng.integers(len(same_type)))]
            op = int(_choice(rng, (OP_ADD, OP_MULTIPLY, OP_SUBTRACT)))
            x = g.add(op, shape, etype, (x, other), layout)
            work.vpu += repeat
        else:  # select(compare(x, c), x, c)
            k = g.add(OP_CONSTANT, (), etype)
            b = g.add(OP_BROADCAST, shape, etype, (k,), layout)
            pred = g.add(OP_COMPARE, shape, PRED, (x, b), layout)
            x = g.add(OP_SELECT, shape, etype, (pred, x, b), layout)
            work.vpu += 3 * repeat
        values.append(x)
    return x


def _finish_outputs(g: _Graph, rng: np.random.Generator, x: int, multi_output: bool) -> int:
    """Marks the roots (with `multi_output`: a tuple of two same-shaped values, 1-2 nodes).

    Returns the output bytes per element, summed over the outputs.
    """
    if not multi_output:
        g.nodes[x].is_root = True
        return g.nodes[x].etype.bytes
    node = g.nodes[x]
    candidates = [
        i
        for i, n in enumerate(g.nodes)
        if i != x
        and n.shape == node.shape
        and n.opcode not in (OP_PARAMETER, OP_BROADCAST)
        and n.etype is not PRED
    ]
    if candidates:
        other = candidates[int(rng.integers(len(candidates)))]
    else:
        other = g.add(OP_CONVERT, node.shape, BF16 if node.etype is F32 else F32, (x,), node.layout)
    first, second = sorted((x, other))
    t = g.add(OP_TUPLE, (), TUPLE, (first, second), tuple_size=2)
    for i in (first, second, t):
        g.nodes[i].is_root = True
    return g.nodes[first].etype.bytes + g.nodes[second].etype.bytes


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Per-kernel choices made before building the graph."""

    family: str
    target_nodes: int
    etype: ElementType
    multi_output: bool = False
    configurable: bool = True


def _build_move(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """2 nodes: parameter -> copy / transpose / reshape / convert."""
    rank = int(_choice(rng, (1, 2, 2, 3, 3, 4)))
    shape = _sample_shape(rng, rank, rng.uniform(10, 23))
    etype = plan.etype
    kind = str(_choice(rng, ("copy", "transpose", "reshape", "convert")))
    if rank == 1 and kind in ("copy", "transpose"):
        kind = "convert"
    in_etype, out_etype = etype, etype
    if kind == "copy":
        in_layout = tuple(int(v) for v in rng.permutation(rank))
        if in_layout == _default_layout(rank):
            in_layout = tuple(reversed(in_layout))
        p = g.parameter(shape, etype, in_layout)
        x = g.add(OP_COPY, shape, etype, (p,))
        operand = OperandSpec(tuple(range(rank)), in_layout[0], in_layout[1], etype.bytes)
    elif kind == "transpose":
        perm = tuple(int(v) for v in rng.permutation(rank))
        if perm == tuple(range(rank)):
            perm = tuple(reversed(perm))
        in_shape = tuple(shape[perm.index(d)] for d in range(rank))  # shape[j] = in[perm[j]]
        p = g.parameter(in_shape, etype)
        x = g.add(OP_TRANSPOSE, shape, etype, (p,), dimensions=perm)
        minor, second = perm.index(rank - 1), perm.index(rank - 2)
        operand = OperandSpec(tuple(range(rank)), minor, second, etype.bytes)
    elif kind == "reshape":
        if rank >= 2:
            in_shape = shape[:-2] + (shape[-2] * shape[-1],)
        else:
            in_shape = (2, shape[0] // 2) if shape[0] % 2 == 0 else (1, shape[0])
        p = g.parameter(in_shape, etype)
        x = g.add(OP_RESHAPE, shape, etype, (p,))
        operand = _operand_for(_default_layout(rank), etype.bytes)
    else:
        in_etype = BF16 if etype is F32 else F32
        p = g.parameter(shape, in_etype)
        x = g.add(OP_CONVERT, shape, out_etype, (p,))
        operand = _operand_for(_default_layout(rank), in_etype.bytes)
    g.nodes[x].is_root = True
    layout = g.nodes[x].layout
    return CostSpec(
        out_dims=shape,
        out_minor=layout[0],
        out_second=layout[1] if rank > 1 else None,
        out_bytes=out_etype.bytes,
        operands=(operand,),
        vpu_per_element=1.0 if kind == "convert" else 0.0,
        eup_per_element=0.0,
        contraction=None,
        configurable=plan.configurable,
    )


def _build_elementwise(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    rank = int(_choice(rng, (1, 2, 2, 3, 3, 4, 4)))
    shape = _sample_shape(rng, rank, rng.uniform(10, 25))
    layout = _sample_layout(rng, rank)
    work = _Work()
    template = _operand_for(layout, plan.etype.bytes)
    x = g.parameter(shape, plan.etype, layout)
    work.operands.append(template)
    budget = max(1, plan.target_nodes - 1 - (2 if plan.multi_output else 0))
    x = _elementwise_chain(g, rng, x, budget, work, template, vector_dim=layout[0])
    out_bytes = _finish_outputs(g, rng, x, plan.multi_output)
    return work.spec(shape, layout, out_bytes)


def _build_reduce(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """parameter -> elementwise prologue -> reduce over one axis -> epilogue."""
    in_rank = int(_choice(rng, (2, 2, 3, 3, 4)))
    in_shape = _sample_shape(rng, in_rank, rng.uniform(12, 25))
    axis = in_rank - 1 if rng.random() < 0.5 else int(rng.integers(in_rank - 1))
    out_shape = tuple(s for d, s in enumerate(in_shape) if d != axis)
    out_rank = in_rank - 1
    reduced = in_shape[axis]

    def out_dim(d: int) -> int:
        return REDUCED_AXIS if d == axis else (d if d < axis else d - 1)

    work = _Work()
    template = OperandSpec(
        tuple(range(out_rank)),
        out_dim(in_rank - 1),
        out_dim(in_rank - 2),
        plan.etype.bytes,
        reduced=reduced,
    )
    x = g.parameter(in_shape, plan.etype)
    work.operands.append(template)
    budget = max(0, plan.target_nodes - 3)
    pre = int(rng.integers(budget + 1)) if budget else 0
    x = _elementwise_chain(g, rng, x, pre, work, template, repeat=float(reduced))
    etype = g.nodes[x].etype
    init = g.add(OP_CONSTANT, (), etype)
    x = g.add(OP_REDUCE, out_shape, etype, (x, init), dimensions=(axis,))
    work.vpu += reduced
    out_layout = _default_layout(out_rank)
    out_template = _operand_for(out_layout, etype.bytes)
    x = _elementwise_chain(g, rng, x, budget - pre, work, out_template, vector_dim=out_layout[0])
    out_bytes = _finish_outputs(g, rng, x, False)
    return work.spec(out_shape, out_layout, out_bytes)


def _build_dot(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """lhs (B.., M, K) x rhs (B.., K, N) -> dot -> epilogue (bias, activation, ...)."""
    sizes = (64, 96, 128, 192, 256, 384, 512, 768, 1000, 1024, 2048, 3072, 4096)
    for _ in range(100):
        batch = () if rng.random() < 0.6 else (int(_choice(rng, (2, 4, 8, 12, 16, 32))),)
        m, n = int(_choice(rng, sizes)), int(_choice(rng, sizes))
        k = int(_choice(rng, sizes + (8192,)))
        out = math.prod(batch) * m * n
        if out <= 2**24 and out * k <= 2**35:
            break
    etype = plan.etype
    lhs = g.parameter(batch + (m, k), etype)
    rhs = g.parameter(batch + (k, n), etype)
    shape = batch + (m, n)
    rank = len(shape)
    x = g.add(OP_DOT, shape, etype, (lhs, rhs), dimensions=(rank - 1, rank - 2))
    layout = _default_layout(rank)
    work = _Work()
    budget = max(0, plan.target_nodes - 3 - (2 if plan.multi_output else 0))
    x = _elementwise_chain(
        g, rng, x, budget, work, _operand_for(layout, etype.bytes), vector_dim=rank - 1
    )
    out_bytes = _finish_outputs(g, rng, x, plan.multi_output)
    return work.spec(shape, (rank - 1, rank - 2), out_bytes, Contraction("dot", k, etype.bytes))


def _build_conv(g: _Graph, rng: np.random.Generator, plan: _Plan) -> CostSpec:
    """input (N, H, W, Ci) * filter (kh, kw, Ci, Co) -> convolution -> epilogue."""
    for _ in range(100):
        n = int(_choice(rng, (1, 2, 4, 8, 16, 32, 64)))
        hw_size = int(_choice(rng, (7, 14, 28, 56, 112)))
        ci = int(_choice(rng, (16, 32, 64, 96, 128, 256, 512)))
        co = int(_choice(rng, (16, 32, 64, 96, 128, 256, 512)))
        kh = int(_choice(rng, (1, 3, 3, 5, 7)))
        stride = 2 if rng.random() < 0.25 else 1
        ho = -(-hw_size // stride)
        out = n * ho * ho * co
        if out <= 2**24 and out * kh * kh * ci <= 2**35:
            break
    etype = plan.etype
    inp = g.parameter((n, hw_size, hw_size, ci), etype)
    flt = g.parameter((kh, kh, ci, co), etype)
    pad = (kh - 1) // 2
    window = _Window((kh, kh), (stride, stride), (pad, pad), (pad, pad))
    shape = (n, ho, ho, co)
    x = g.add(OP_CONVOLUTION, shape, etype, (inp, flt), window=window)
    layout = _default_layout(4)
    work = _Work()
    budget = max(0, plan.target_nodes - 3 - (2 if plan.multi_output else 0))
    x = _elementwise_chain(g, rng, x, budget, work, _operand_for(layout, etype.bytes), vector_dim=3)
    out_bytes = _finish_outputs(g, rng, x, plan.multi_output)
    return work.spec(
        shape, (3, 2), out_bytes, Contraction("conv", ci, etype.bytes, (kh, kh), stride)
    )


_BUILDERS = {
    "move": _build_move,
    "elementwise": _build_elementwise,
    "reduce": _build_reduce,
    "dot": _build_dot,
    "conv": _build_conv,
}
_FAMILY_MIN_NODES = {"move": 2, "elementwise": 2, "reduce": 3, "dot": 3, "conv": 3}
_FAMILY_WEIGHTS = {"move": 0.12, "elementwise": 0.33, "reduce": 0.2, "dot": 0.2, "conv": 0.15}


# ---------------------------------------------------------------------------
# Whole kernels.


@dataclasses.dataclass(frozen=True)
class GeneratorOptions:
    """Size knobs of a synthetic set (the toy set uses the defaults)."""

    min_configs: int = 5
    max_configs: int = 200
    max_nodes: int = 40
    # Cost-model constants the runtimes are computed with.
    hardware: Hardware = DEFAULT_HARDWARE
    # The real test split hides its runtimes; benchmarks need them to score.
    test_labels: bool = False

    def __post_init__(self) -> None:
        if self.min_configs < 1 or self.max_configs < self.min_configs:
            raise ValueError(
                f"need 1 <= min_configs <= max_configs, got {self.min_configs}, {self.max_configs}"
            )
        if self.max_nodes < 2:
            raise ValueError(f"max_nodes must be at least 2, got {self.max_nodes}")


@dataclasses.dataclass(frozen=True)
class SyntheticKernel:
    """One generated kernel: its file stem, arrays (real dtypes) and cost description."""

    name: str
    split: str
    family: str
    arrays: dict[str, np.ndarray]
    cost: CostSpec


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
    seed: int, split: str, index: int, options: GeneratorOptions = GeneratorOptions()
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


# ---------------------------------------------------------------------------
# Writing.

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def write_npz(path: Path | str, arrays: Mapping[str, np.ndarray]) -> None:
    """Writes `arrays` as a compressed npz that is byte-identical for identical input.

    `numpy.savez_compressed` stamps the current time into the zip; this writes the
    same layout (one `<key>.npy` entry per array, deflated) with fixed metadata,
    so `numpy.load` reads it like any npz. Not atomic: write into a temporary
    directory and rename it, as `data/make_synthetic.py` does.
    """
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, value in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(
                buf, np.ascontiguousarray(value), version=(1, 0), allow_pickle=False
            )
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compresslevel=9)
