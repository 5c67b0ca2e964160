"""Analytic estimates of what a tile configuration costs, from the files' columns and TPU facts
(8 x 128 vector tiles, 16 MiB of double-buffered VMEM, `ELEMENT_BYTES`)."""

from __future__ import annotations

import numpy as np

ESTIMATES = ("output_tiles", "padded_share", "vmem_share", "reduction_steps")
NUM_ESTIMATES = len(ESTIMATES)

LANES, SUBLANES = 128, 8
VMEM_BYTES = 16 * 2**20
# One-hot column of node_feat -> element bytes; 2, 18, 19 and 20 hold no array (default).
ELEMENT_BYTES = {
    3: 1,  # pred
    4: 1,  # s8
    5: 2,  # s16
    6: 4,  # s32
    7: 8,  # s64
    8: 1,  # u8
    9: 2,  # u16
    10: 4,  # u32
    11: 8,  # u64
    12: 2,  # f16
    13: 4,  # f32
    14: 8,  # f64
    15: 2,  # bf16
    16: 8,  # c64
    17: 16,  # c128
}
DEFAULT_ELEMENT_BYTES = 4
OP_CONSTANT, OP_CONVOLUTION, OP_DOT, OP_PARAMETER, OP_TUPLE = 24, 26, 34, 63, 107

IS_ROOT, SHAPE, LAYOUT = 0, 21, 134
SHAPE_PRODUCT = SHAPE + 7
ELEMENT_TYPES = slice(2, 21)
KERNEL_INPUT_FEATURE, KERNEL_OUTPUT_FEATURE, KERNEL_SPATIAL = 99, 100, 101
OUTPUT_BATCH, OUTPUT_FEATURE = 105, 106
DOT_DIMENSIONS = 31
KERNEL_BOUNDS, OUTPUT_BOUNDS, INPUT_BOUNDS = 0, 8, 16
DIMS = 6


def _dims(row: np.ndarray) -> list[int]:
    """Shape dims of a node (columns 21-26), up to its rank (the last non-zero one)."""
    shape = [int(x) for x in row[SHAPE : SHAPE + DIMS]]
    rank = max((i + 1 for i, x in enumerate(shape) if x > 0), default=0)
    return shape[:rank]


def element_bytes(row: np.ndarray) -> int:
    """Bytes per element of a node (its one-hot type, columns 2-20; `ELEMENT_BYTES`)."""
    hot = np.flatnonzero(row[ELEMENT_TYPES] > 0)
    column = int(hot[0]) + ELEMENT_TYPES.start if len(hot) else -1
    return ELEMENT_BYTES.get(column, DEFAULT_ELEMENT_BYTES)


def tiled_tensor(node_feat: np.ndarray) -> tuple[list[int], list[int], int]:
    """(dims, minor_to_major, element bytes) of the tiled tensor: the last root op (column 0)
    with a shape (columns 21-26; layout 134-139, one-hot width 2-20); ([], [], 4) if none."""
    roots = [i for i in np.flatnonzero(node_feat[:, IS_ROOT] > 0) if _dims(node_feat[i])]
    if not roots:
        return [], [], DEFAULT_ELEMENT_BYTES
    row = node_feat[roots[-1]]
    dims = _dims(row)
    layout = [int(x) for x in row[LAYOUT : LAYOUT + len(dims)]]
    return dims, layout, element_bytes(row)


def matrix_op(node_opcode: np.ndarray, edges: np.ndarray) -> tuple[int, list[int]]:
    """(node, operand nodes in edge order) of the last convolution (26) or dot (34);
    (-1, []) if none. An `edges` row [u, v]: node u reads the output of v."""
    found = np.flatnonzero((node_opcode == OP_CONVOLUTION) | (node_opcode == OP_DOT))
    if not len(found):
        return -1, []
    node = int(found[-1])
    edges = np.asarray(edges).reshape(-1, 2)
    return node, [int(v) for v in edges[edges[:, 0] == node, 1]]


def contracted_dims(
    node_feat: np.ndarray, node_opcode: np.ndarray, edges: np.ndarray
) -> tuple[list[int], list[int]]:
    """(kernel tensor dims, indices of its contracted dims) of the last convolution (26) or
    dot (34), the kernel tensor the shape of its second operand; ([], []) if none."""
    node, operands = matrix_op(node_opcode, edges)
    if len(operands) < 2:
        return [], []
    kernel = _dims(node_feat[operands[1]])
    rank = len(kernel)
    if rank == 0:
        return [], []
    row = node_feat[node]
    if int(node_opcode[node]) == OP_DOT:
        given = int(row[DOT_DIMENSIONS + 1])
        k = given if 0 < given < rank else max(rank - 2, 0)
        return kernel, [k]
    feature = int(row[KERNEL_INPUT_FEATURE])
    output = int(row[KERNEL_OUTPUT_FEATURE])
    if feature == output:  # no dimension numbers in the file: XLA's default HWIO
        return kernel, [d for d in range(rank) if d != rank - 1]
    spatial = [int(x) for x in row[KERNEL_SPATIAL : KERNEL_SPATIAL + max(rank - 2, 0)]]
    return kernel, sorted({feature, *spatial})


def output_tile(dims: list[int], config_feat: np.ndarray) -> np.ndarray:
    """[c, len(dims)] float64 output tile of each config: the output bound of each dim
    (columns 8-13) clipped to the dim, the whole dim where the bound is 0; a dim of size 0
    inside the rank counts 1."""
    size = np.maximum(np.asarray(dims, np.float64), 1.0)
    tile = config_feat[:, OUTPUT_BOUNDS : OUTPUT_BOUNDS + len(dims)].astype(np.float64)
    return np.where(tile > 0, np.minimum(tile, size), size)


def minor_dims(dims: list[int], layout: list[int]) -> tuple[int, int | None]:
    """(most minor, second-most minor) dim of a tensor: minor_to_major[0] (the last dim when
    it names none) and minor_to_major[1] (None for rank 1 or when it names none)."""
    rank = len(dims)
    minor = layout[0] if layout and 0 <= layout[0] < rank else rank - 1
    second = layout[1] if rank > 1 and len(layout) > 1 and 0 <= layout[1] < rank else None
    return minor, second


def kernel_estimates(
    node_feat: np.ndarray, node_opcode: np.ndarray, edges: np.ndarray, config_feat: np.ndarray
) -> np.ndarray:
    """[c, 4] float64 raw estimates; config bounds: kernel 0-5, output 8-13, input 16-21:
    - `output_tiles`: prod over the tiled dims of ceil(dim / output bound), bound 0 = whole dim;
    - `padded_share`: 1 - (t_minor * t_second) / (ceil(t_minor / 128) * 128 *
      ceil(t_second / 8) * 8), t the output bound of the most and second-most minor dim;
    - `vmem_share`: 2 x (output + input + kernel tile bytes) / 16 MiB, a tile's
      bytes the product of its non-zero bounds times the element width;
    - `reduction_steps`: prod over the kernel tensor's contracted dims of
      ceil(size / kernel bound) (a convolution's input-feature and spatial dims,
      columns 99 and 101-104, else HWIO; a dot's K of (..., K, N)); 1 without bounds.
    """
    c = config_feat.shape[0]
    dims, layout, width = tiled_tensor(node_feat)
    out = np.ones((c, NUM_ESTIMATES), np.float64)
    out[:, 1] = 0.0
    if dims:
        size = np.maximum(np.asarray(dims, np.float64), 1.0)
        tile = output_tile(dims, config_feat)
        out[:, 0] = np.prod(np.ceil(size / tile), axis=1)
        minor, second = minor_dims(dims, layout)
        t_minor = tile[:, minor]
        t_second = np.ones(c) if second is None else tile[:, second]
        padded = np.ceil(t_minor / LANES) * LANES * np.ceil(t_second / SUBLANES) * SUBLANES
        out[:, 1] = 1.0 - t_minor * t_second / padded

    def tile_bytes(start: int) -> np.ndarray:
        group = config_feat[:, start : start + DIMS].astype(np.float64)
        used = group > 0
        product = np.prod(np.where(used, group, 1.0), axis=1)
        return np.where(used.any(axis=1), product * width, 0.0)

    total = tile_bytes(OUTPUT_BOUNDS) + tile_bytes(INPUT_BOUNDS) + tile_bytes(KERNEL_BOUNDS)
    out[:, 2] = np.maximum(2.0 * total, float(width)) / VMEM_BYTES
    kernel, contracted = contracted_dims(node_feat, node_opcode, edges)
    kernel_bounds = config_feat[:, KERNEL_BOUNDS : KERNEL_BOUNDS + DIMS].astype(np.float64)
    if kernel and contracted:
        steps = np.ones(c)
        for d in contracted:
            if d < len(kernel) and d < DIMS:
                b = kernel_bounds[:, d]
                steps *= np.where(b > 0, np.ceil(kernel[d] / np.maximum(b, 1.0)), 1.0)
        has_bounds = (kernel_bounds > 0).any(axis=1)
        out[:, 3] = np.where(has_bounds, steps, 1.0)
    return out


def model_inputs(estimates: np.ndarray) -> np.ndarray:
    """Raw estimates -> the four model inputs, each on a scale near 1 (float32)."""
    x = np.empty_like(estimates, dtype=np.float32)
    x[:, 0] = np.log2(np.maximum(estimates[:, 0], 1.0)) / 8.0
    x[:, 1] = estimates[:, 1]
    x[:, 2] = np.log2(np.maximum(estimates[:, 2], 2.0**-40)) / 4.0
    x[:, 3] = np.log2(np.maximum(estimates[:, 3], 1.0)) / 8.0
    return x
