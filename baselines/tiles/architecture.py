"""Inputs from the TPU's published architecture, per configuration: how full the 128 x 128
matrix unit is, the (8, 128) padding of the two minor tile dims, the grid's iterations, how
often each matrix operand tile is re-read, the VMEM footprint and a roofline time. Read from
the files' columns (`analytic.py`'s constants and helpers) once per kernel, vectorised over
its configurations; a model reads them with `architecture_inputs`."""

from __future__ import annotations

import dataclasses

import numpy as np

from baselines.tiles import analytic
from baselines.tiles.analytic import DIMS, KERNEL_BOUNDS, LANES, SUBLANES, VMEM_BYTES

ARCHITECTURE = (
    "mxu_fill",
    "minor_lane_remainder",
    "minor_lane_waste",
    "minor_sublane_remainder",
    "minor_sublane_waste",
    "second_lane_remainder",
    "second_lane_waste",
    "second_sublane_remainder",
    "second_sublane_waste",
    "grid_iterations",
    "lhs_rereads",
    "rhs_rereads",
    "vmem_ratio",
    "roofline_ns",
)
NUM_ARCHITECTURE = len(ARCHITECTURE)

# Published figures of a TPU v4 chip, its two TensorCores acting as one (megacore): four
# 128 x 128 bf16 MXUs per core, 275 TFLOP/s bf16 peak and 1.2 TB/s of HBM per chip (Google
# Cloud TPU v4 documentation; Jouppi et al., ISCA 2023); 16 MiB of VMEM per core
# (`analytic.VMEM_BYTES`); about 0.35 us of overhead per grid iteration (Pallas TPU
# documentation, "Pipelining"); f32 matmuls as three bf16 passes (XLA's HIGH precision,
# `bf16_3x` in the JAX documentation). The vector rate is an order-of-magnitude figure: one
# op per lane of an (8, 128) vector register per cycle per core at about 1.05 GHz.
MXU_DIM = 128
PEAK_BF16_FLOPS_PER_NS = 275_000.0
F32_MATMUL_PASSES = 3
HBM_BYTES_PER_NS = 1_200.0
VPU_OPS_PER_NS = 2 * SUBLANES * LANES * 1.05
GRID_STEP_NS = 350.0
ACCUMULATOR_BYTES = 4  # f32 partial sums of the output tile across K steps
# Nodes that do no vector work per output element.
NO_VECTOR_WORK = (analytic.OP_PARAMETER, analytic.OP_CONSTANT, analytic.OP_TUPLE)


def round_up(x: np.ndarray, multiple: int) -> np.ndarray:
    """x rounded up to a multiple of `multiple` (float64, elementwise)."""
    return np.ceil(np.asarray(x, np.float64) / multiple) * multiple


@dataclasses.dataclass(frozen=True)
class MatrixOp:
    """Where the last dot or convolution sits in the tiled tensor and its kernel tensor.

    `feature`: the tiled dim of the output feature (a dot's N, a convolution's output
    channels); `rows`: the tiled dims whose tiles stream through the MXU as rows (a dot's M,
    a convolution's batch and spatial dims), `batch`: a dot's batch dims (one matmul each);
    `kernel`: the kernel tensor's dims, `contracted`: its contracted feature dim (a dot's K,
    a convolution's input channels), `taps`: its spatial (window) dims; `width`: its bytes
    per element."""

    feature: int
    rows: tuple[int, ...]
    batch: tuple[int, ...]
    kernel: tuple[int, ...]
    contracted: int
    taps: tuple[int, ...]
    width: int


def matrix_facts(
    node_feat: np.ndarray, node_opcode: np.ndarray, edges: np.ndarray, rank: int
) -> MatrixOp | None:
    """The `MatrixOp` of a kernel whose tiled tensor has `rank` dims; None without a dot or
    convolution, or when its output dims cannot be the tiled tensor's.

    A dot's output is (batch..., M, N) (XLA's order: batch, lhs free, rhs free dims), its
    contracted dim `analytic.contracted_dims`'s K. A convolution's output feature dim is
    column 106 and its kernel's input feature dim column 99 when the file holds dimension
    numbers (columns 99 and 100 differ), else NHWC and HWIO (the last dim; the kernel's
    second-last)."""
    node, operands = analytic.matrix_op(node_opcode, edges)
    kernel, contracted = analytic.contracted_dims(node_feat, node_opcode, edges)
    if not kernel or not contracted:
        return None
    row = node_feat[node]
    width = analytic.element_bytes(node_feat[operands[1]])
    if int(node_opcode[node]) == analytic.OP_DOT:
        if rank < 2:
            return None
        batch = tuple(range(rank - 2))
        return MatrixOp(rank - 1, (rank - 2,), batch, tuple(kernel), contracted[0], (), width)
    named = int(row[analytic.KERNEL_INPUT_FEATURE]) != int(row[analytic.KERNEL_OUTPUT_FEATURE])
    feature = int(row[analytic.OUTPUT_FEATURE]) if named else rank - 1
    k = int(row[analytic.KERNEL_INPUT_FEATURE]) if named else len(kernel) - 2
    if not 0 <= feature < rank or k not in contracted:
        return None
    rows = tuple(d for d in range(rank) if d != feature)
    taps = tuple(d for d in contracted if d != k)
    return MatrixOp(feature, rows, (), tuple(kernel), k, taps, width)


def kernel_tile(op: MatrixOp, config_feat: np.ndarray, dim: int) -> np.ndarray:
    """[c] tile of kernel tensor dim `dim`: its kernel bound (columns 0-5) clipped to the
    dim, the whole dim where the bound is 0 or past column 5."""
    size = float(max(op.kernel[dim], 1))
    if dim >= DIMS:
        return np.full(config_feat.shape[0], size)
    bound = config_feat[:, KERNEL_BOUNDS + dim].astype(np.float64)
    return np.where(bound > 0, np.minimum(bound, size), size)


def streamed_bytes_per_element(
    node_feat: np.ndarray, node_opcode: np.ndarray, skip: list[int], elements: float
) -> float:
    """Bytes read from HBM per element of the tiled tensor for the kernel's parameters
    other than `skip`: sum over parameters of width x (its elements / `elements`), its
    elements the shape product (column 28, at least 1)."""
    params = [i for i in np.flatnonzero(node_opcode == analytic.OP_PARAMETER) if i not in skip]
    total = 0.0
    for i in params:
        size = max(float(node_feat[i, analytic.SHAPE_PRODUCT]), 1.0)
        total += analytic.element_bytes(node_feat[i]) * size / elements
    return total


def _padding_columns(out: np.ndarray, first: int, x: np.ndarray) -> None:
    """Columns first..first+3: x % 128 / 128, pad128(x) / x - 1, x % 8 / 8, pad8(x) / x - 1."""
    out[:, first] = np.mod(x, LANES) / LANES
    out[:, first + 1] = round_up(x, LANES) / x - 1.0
    out[:, first + 2] = np.mod(x, SUBLANES) / SUBLANES
    out[:, first + 3] = round_up(x, SUBLANES) / x - 1.0


def kernel_architecture(
    node_feat: np.ndarray,
    node_opcode: np.ndarray,
    edges: np.ndarray,
    config_feat: np.ndarray,
    estimates: np.ndarray | None = None,
) -> np.ndarray:
    """[c, 14] float64 raw architecture inputs (`ARCHITECTURE`); `estimates`: the kernel's
    raw `analytic.kernel_estimates` if already computed. t: the output tile
    (`analytic.output_tile`), its minor and second-minor dims t_1, t_2 (1 without one);
    pad_m(x) = ceil(x / m) * m; P = prod(t) / (t_1 t_2) * pad128(t_1) * pad8(t_2).

    - `mxu_fill`: tk / pad128(tk) * tn / pad128(tn), tk the kernel tile of the contracted
      feature dim, tn the output tile of the feature dim (`MatrixOp`); 1.0 without a matrix op;
    - for x = t_1, then t_2: x % 128 / 128, pad128(x) / x - 1, x % 8 / 8, pad8(x) / x - 1
      (all 0 without a tiled tensor);
    - `grid_iterations`: I = output tiles x reduction steps (`analytic` estimates 0 and 3);
    - `lhs_rereads`: ceil(N / tn), output tiles along the feature dim; `rhs_rereads`: the
      output tiles along the row dims; 1 and 1 without a matrix op;
    - `vmem_ratio`: (2 (P w + P s + L + R) + [K steps > 1] P * 4) / 16 MiB, w the tiled
      tensor's bytes, s `streamed_bytes_per_element` (parameters but the matrix operands),
      L = B pad8(rows) pad128(tk) v and R = B taps pad8(tk) pad128(tn) v the operand tiles
      (B the batch tile, rows the product of the row dims' tiles, taps the window dims'
      kernel tiles, v the operand width; 0 without a matrix op);
    - `roofline_ns`: max(I F / rate + T P e / VPU, (I (L + R) + T P (w + s)) / HBM) + I * 350,
      F = 2 B pad8(rows) taps pad128(tk) pad128(tn) the MXU flops per iteration, rate the
      bf16 peak (a third of it for operands of 4 or more bytes), T the output tiles, e the
      nodes but parameters, constants, tuples and the matrix op (vector ops per element).
    """
    c = config_feat.shape[0]
    if estimates is None:
        estimates = analytic.kernel_estimates(node_feat, node_opcode, edges, config_feat)
    dims, layout, width = analytic.tiled_tensor(node_feat)
    out = np.zeros((c, NUM_ARCHITECTURE), np.float64)
    tile = analytic.output_tile(dims, config_feat)
    t_1 = t_2 = np.ones(c)
    if dims:
        minor, second = analytic.minor_dims(dims, layout)
        t_1 = tile[:, minor]
        t_2 = np.ones(c) if second is None else tile[:, second]
        _padding_columns(out, 1, t_1)
        _padding_columns(out, 5, t_2)
    padded = np.prod(tile, axis=1) / (t_1 * t_2) * round_up(t_1, LANES) * round_up(t_2, SUBLANES)
    out_tiles, steps = estimates[:, 0], estimates[:, 3]
    iterations = out_tiles * steps
    op = matrix_facts(node_feat, node_opcode, edges, len(dims)) if dims else None
    out[:, [0, 10, 11]] = 1.0
    lhs = rhs = flops = np.zeros(c)
    rate = PEAK_BF16_FLOPS_PER_NS
    if op is not None:
        out[:, [0, 10, 11]], lhs, rhs, flops = _matrix_terms(op, dims, tile, config_feat)
        rate = PEAK_BF16_FLOPS_PER_NS / (F32_MATMUL_PASSES if op.width >= 4 else 1)
    skip = analytic.matrix_op(node_opcode, edges)[1] if op is not None else []
    elements = float(np.prod(np.maximum(np.asarray(dims, np.float64), 1.0)))
    streamed = streamed_bytes_per_element(node_feat, node_opcode, skip, elements)
    vector_ops = max(float((~np.isin(node_opcode, NO_VECTOR_WORK)).sum()) - (op is not None), 0.0)
    accumulator = np.where(steps > 1, padded * ACCUMULATOR_BYTES, 0.0)
    out[:, 9] = iterations
    out[:, 12] = (2.0 * (padded * (width + streamed) + lhs + rhs) + accumulator) / VMEM_BYTES
    compute = iterations * flops / rate + out_tiles * padded * vector_ops / VPU_OPS_PER_NS
    traffic = iterations * (lhs + rhs) + out_tiles * padded * (width + streamed)
    out[:, 13] = np.maximum(compute, traffic / HBM_BYTES_PER_NS) + iterations * GRID_STEP_NS
    return out


def _matrix_terms(
    op: MatrixOp, dims: list[int], tile: np.ndarray, config_feat: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """([c, 3] fill and lhs, rhs re-reads; L; R; F) of `kernel_architecture`'s docstring."""
    c = config_feat.shape[0]
    size = np.maximum(np.asarray(dims, np.float64), 1.0)
    t_k = kernel_tile(op, config_feat, op.contracted)
    t_n = tile[:, op.feature]
    batch = np.prod(tile[:, list(op.batch)], axis=1)
    rows = round_up(np.prod(tile[:, list(op.rows)], axis=1), SUBLANES)
    taps = np.prod([kernel_tile(op, config_feat, d) for d in op.taps] or [np.ones(c)], axis=0)
    fill = t_k / round_up(t_k, MXU_DIM) * t_n / round_up(t_n, MXU_DIM)
    lhs_rereads = np.ceil(size[op.feature] / t_n)
    rhs_rereads = np.prod(np.ceil(size[list(op.rows)] / tile[:, list(op.rows)]), axis=1)
    lhs = batch * rows * round_up(t_k, LANES) * op.width
    rhs = batch * taps * round_up(t_k, SUBLANES) * round_up(t_n, LANES) * op.width
    flops = 2.0 * batch * rows * taps * round_up(t_k, MXU_DIM) * round_up(t_n, MXU_DIM)
    return np.stack([fill, lhs_rereads, rhs_rereads], axis=1), lhs, rhs, flops


def model_inputs(raw: np.ndarray) -> np.ndarray:
    """Raw architecture inputs -> model inputs near 1 (float32): the fill and remainders as
    they are, each waste w as log2(1 + w) / 7, iterations and re-reads as log2(x) / 8, the
    VMEM ratio as log2(x) / 4, the roofline as (log2(ns) - 16) / 8."""
    x = raw.astype(np.float32)
    for i in (2, 4, 6, 8):
        x[:, i] = np.log2(1.0 + raw[:, i]) / 7.0
    for i in (9, 10, 11):
        x[:, i] = np.log2(np.maximum(raw[:, i], 1.0)) / 8.0
    x[:, 12] = np.log2(np.maximum(raw[:, 12], 2.0**-40)) / 4.0
    x[:, 13] = (np.log2(np.maximum(raw[:, 13], 1.0)) - 16.0) / 8.0
    return x


def config_inputs(
    split, estimates: bool = True, architecture: bool = True
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """([configs, 4] analytic, [configs, 14] architecture) float32 model inputs of every
    configuration of a raw `TileSplit`, each None unless asked for; one pass over the
    kernels, the analytic estimates computed once per kernel for both."""
    total = int(split.config_offsets[-1])
    est = np.zeros((total, analytic.NUM_ESTIMATES), np.float32) if estimates else None
    arch = np.zeros((total, NUM_ARCHITECTURE), np.float32) if architecture else None
    if not (estimates or architecture):
        return est, arch
    for i in range(len(split)):
        n0, n1 = int(split.node_offsets[i]), int(split.node_offsets[i + 1])
        e0, e1 = int(split.edge_offsets[i]), int(split.edge_offsets[i + 1])
        c0, c1 = int(split.config_offsets[i]), int(split.config_offsets[i + 1])
        if c1 == c0:
            continue
        kernel = (split.node_feat[n0:n1], split.node_opcode[n0:n1], split.edge_index[e0:e1])
        raw = analytic.kernel_estimates(*kernel, split.config_feat[c0:c1])
        if est is not None:
            est[c0:c1] = analytic.model_inputs(raw)
        if arch is not None:
            arch[c0:c1] = model_inputs(kernel_architecture(*kernel, split.config_feat[c0:c1], raw))
    return est, arch
