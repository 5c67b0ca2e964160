"""The `tpu` world's cost model, written from the TPU's published architecture.

A kernel runs as a grid: the output dims in logical order (outer to inner), then
the contraction's K steps innermost. Each grid iteration DMAs the operand tiles
it needs from HBM into VMEM (double-buffered, so the next iteration's copies
overlap this one's compute), runs the 128 x 128 systolic matrix units on the
contraction tiles and the vector unit on the output tile's (8, 128) vector
registers, and writes each output tile back once. Published facts it rests on:

- MXU: 128 x 128 systolic arrays; a pass loads a 128 x 128 weight block and
  streams the rows of the other operand through it, so a pass costs
  (rows + 128) cycles (fill and drain) and a partly filled block wastes the
  rest; TPU v4: 275 TFLOP/s bf16 per chip (eight MXUs at 1.05 GHz);
- vector registers of 8 sublanes x 128 lanes of 32 bits: a tile's minor dim is
  padded to 128, its second-minor dim to 8 rows for 4-byte types, 16 for
  2-byte types (two packed per 32 bits), 32 for 1-byte types;
- 16 MiB of VMEM per core; HBM at 1.2 TB/s per v4 chip;
- Pallas-style pipelining: a block whose index does not change between
  consecutive grid iterations is not copied again, so an operand tile is
  re-read once per change of the grid axes it depends on; about 0.35 us of
  overhead per grid iteration.

    runtime = launch + iterations * step + max(compute, dma) + exposed
              (double-buffered tiles fit VMEM),
              launch + iterations * step + compute + dma
              (only single-buffered tiles fit: no overlap),
              REFUSED_RUNTIME_NS (not even one copy of the tiles fits: the
              compiler refuses the config; recorded at the autotuner's 1 s limit).

compute = iterations * MXU time per iteration + output tiles * vector time per
tile; dma = sum over transfers of (bytes / HBM bandwidth + DMA_LATENCY_NS);
exposed = the first iteration's input transfers and the last output write,
which nothing overlaps. f32 contractions run as six bf16 passes (full
precision). Constants other than these are `TPU_HARDWARE`'s fields.
"""

from __future__ import annotations

import numpy as np

from synthetic.tiles.cost_model import REDUCED_AXIS, CostSpec, Hardware

MXU_DIM = 128
DMA_LATENCY_NS = 500.0  # issue and first-byte latency of one DMA, about an HBM round trip
REFUSED_RUNTIME_NS = 1e9
ACCUMULATOR_BYTES = 4  # the contraction's f32 partial-sum tile, single-buffered scratch
# TPU v4 published figures (per chip, its two TensorCores as one): 275 TFLOP/s bf16,
# 1.2 TB/s HBM, 16 MiB VMEM per core; vector unit 2 cores x 8 x 128 lanes x 1.05 GHz,
# transcendentals a quarter of that; ~0.35 us a grid step (Pallas TPU docs); 2 us launch.
TPU_HARDWARE = Hardware(
    hbm_bytes_per_ns=1200.0,
    mxu_flops_per_ns=275_000.0,
    mxu_f32_factor=1.0 / 6.0,
    vpu_flops_per_ns=2 * 8 * 128 * 1.05,
    eup_ops_per_ns=2 * 8 * 128 * 1.05 / 4,
    vmem_bytes=16 * 2**20,
    step_overhead_ns=350.0,
    launch_ns=2000.0,
    lanes=128,
    sublanes=8,
)


def sublane_rows(bytes_per_element: int, hw: Hardware) -> int:
    """Rows of a vector register tile: 8 for 4-byte elements, 16 for 2, 32 for 1 (packed)."""
    return hw.sublanes * max(1, 4 // max(1, int(bytes_per_element)))


def pad(x: np.ndarray, multiple: int) -> np.ndarray:
    """x rounded up to a multiple of `multiple` (float64)."""
    return np.ceil(np.asarray(x, np.float64) / multiple) * multiple


def fetches(grid: np.ndarray, axes: set[int]) -> np.ndarray:
    """[c] copies of a block whose index depends on grid `axes` ([c, n] grid sizes, outer to
    inner): it changes whenever its innermost axis of size > 1 does, so prod(grid[:, :j+1])
    for that axis j; 1 when every axis it depends on has size 1."""
    out = np.ones(grid.shape[0])
    for j in range(grid.shape[1]):
        whole = np.prod(grid[:, : j + 1], axis=1)
        out = np.where((j in axes) & (grid[:, j] > 1), whole, out)
    return out


def _transfers(spec: CostSpec, tiles: np.ndarray, k_tile: np.ndarray, hw: Hardware):
    """[(bytes per copy [c], grid axes it depends on)] of every input tile of a kernel."""
    rank = len(spec.out_dims)
    out = []
    for op in spec.operands:
        elements = np.ones(tiles.shape[0])
        for d in op.dims:
            t = tiles[:, d]
            if d == op.minor:
                t = pad(t, hw.lanes)
            elif d == op.second:
                t = pad(t, sublane_rows(op.bytes_per_element, hw))
            elements = elements * t
        reduced = float(op.reduced)
        if op.minor == REDUCED_AXIS:
            reduced = float(pad(reduced, hw.lanes))
        elif op.second == REDUCED_AXIS:
            reduced = float(pad(reduced, sublane_rows(op.bytes_per_element, hw)))
        out.append((elements * reduced * op.bytes_per_element, set(op.dims)))
    con = spec.contraction
    if con is None:
        return out
    rows = sublane_rows(con.bytes_per_element, hw)
    width = con.bytes_per_element
    if con.kind == "dot":
        batch = np.prod(tiles[:, : rank - 2], axis=1)
        both = set(range(rank - 2)) | {rank}
        lhs = batch * pad(tiles[:, rank - 2], rows) * pad(k_tile, hw.lanes) * width
        rhs = batch * pad(k_tile, rows) * pad(tiles[:, rank - 1], hw.lanes) * width
        return out + [(lhs, both | {rank - 2}), (rhs, both | {rank - 1})]
    kh, kw = con.window
    h_in = (tiles[:, 1] - 1) * con.stride + kh
    w_in = (tiles[:, 2] - 1) * con.stride + kw
    patch = tiles[:, 0] * h_in * pad(w_in, rows) * pad(k_tile, hw.lanes) * width
    kernel = kh * kw * pad(k_tile, rows) * pad(tiles[:, 3], hw.lanes) * width
    return out + [(patch, {0, 1, 2, rank}), (kernel, {3, rank})]


def _mxu_ns(spec: CostSpec, tiles: np.ndarray, k_tile: np.ndarray, hw: Hardware) -> np.ndarray:
    """[c] matrix-unit time (ns) of one grid iteration: one pass per 128 x 128 weight block
    (K tile x N tile, times the batch tile or the window's taps), each (rows + 128) cycles
    for rows the M tile (a dot) or batch x spatial tile (a convolution) padded to 8; at the
    bf16 peak a cycle of all MXUs is 2 x 128 x 128 flops; f32 at `mxu_f32_factor` of it."""
    con = spec.contraction
    if con is None:
        return np.zeros(tiles.shape[0])
    rank = len(spec.out_dims)
    blocks = np.ceil(k_tile / MXU_DIM)
    if con.kind == "dot":
        rows = pad(tiles[:, rank - 2], hw.sublanes)
        blocks = blocks * np.ceil(tiles[:, rank - 1] / MXU_DIM) * np.prod(tiles[:, :-2], axis=1)
    else:
        rows = pad(tiles[:, 0] * tiles[:, 1] * tiles[:, 2], hw.sublanes)
        blocks = blocks * np.ceil(tiles[:, 3] / MXU_DIM) * con.window[0] * con.window[1]
    rate = hw.mxu_flops_per_ns * (1.0 if con.bytes_per_element <= 2 else hw.mxu_f32_factor)
    return blocks * (rows + MXU_DIM) * 2.0 * MXU_DIM * MXU_DIM / rate


def tpu_runtime_ns(
    spec: CostSpec,
    out_tiles: np.ndarray,
    k_tiles: np.ndarray | None = None,
    hw: Hardware = TPU_HARDWARE,
) -> np.ndarray:
    """[c] noise-free runtime (ns, float64) of each config (`out_tiles` [c, rank] output tile,
    `k_tiles` [c] K tile): the module docstring's formula."""
    tiles = np.asarray(out_tiles, np.float64).reshape(-1, len(spec.out_dims))
    c = tiles.shape[0]
    dims = np.asarray(spec.out_dims, np.float64)
    grid = np.ceil(dims / tiles)
    k_tile = np.zeros(c)
    if spec.contraction is not None:
        k_tile = np.asarray(k_tiles, np.float64).reshape(c)
        grid = np.concatenate([grid, np.ceil(spec.contraction.k / k_tile)[:, None]], axis=1)
    iterations = np.prod(grid, axis=1)
    output_tiles = np.prod(np.ceil(dims / tiles), axis=1)
    out_elements = np.prod(tiles, axis=1) / tiles[:, spec.out_minor]
    out_elements = out_elements * pad(tiles[:, spec.out_minor], hw.lanes)
    accumulator = out_elements.copy()
    if spec.out_second is not None:
        second = tiles[:, spec.out_second]
        out_elements = out_elements / second * pad(second, sublane_rows(spec.out_bytes, hw))
        accumulator = accumulator / second * pad(second, hw.sublanes)
    out_bytes = out_elements * spec.out_bytes
    transfers = _transfers(spec, tiles, k_tile, hw)
    in_bytes = sum((b for b, _ in transfers), np.zeros(c))
    scratch = np.zeros(c)
    if spec.contraction is not None:  # partial sums kept across K steps
        scratch = np.where(grid[:, -1] > 1, accumulator * ACCUMULATOR_BYTES, 0.0)
    single = in_bytes + out_bytes + scratch
    double = 2.0 * (in_bytes + out_bytes) + scratch
    dma = output_tiles * (out_bytes / hw.hbm_bytes_per_ns + DMA_LATENCY_NS)
    exposed = out_bytes / hw.hbm_bytes_per_ns + DMA_LATENCY_NS
    for size, axes in transfers:
        dma = dma + fetches(grid, axes) * (size / hw.hbm_bytes_per_ns + DMA_LATENCY_NS)
        exposed = exposed + size / hw.hbm_bytes_per_ns + DMA_LATENCY_NS
    vector = out_elements * spec.vpu_per_element / hw.vpu_flops_per_ns
    vector = vector + out_elements * spec.eup_per_element / hw.eup_ops_per_ns
    compute = iterations * _mxu_ns(spec, tiles, k_tile, hw) + output_tiles * vector
    fixed = hw.launch_ns + iterations * hw.step_overhead_ns
    overlapped = fixed + np.maximum(compute, dma) + exposed
    serial = fixed + compute + dma
    runtime = np.where(double <= hw.vmem_bytes, overlapped, serial)
    return np.where(single <= hw.vmem_bytes, runtime, REFUSED_RUNTIME_NS)


TPU_PROGRAMS = {
    "train": (
        "t5_large.4x4.bf16",
        "palm_1b.8x8.bf16",
        "resnet101.4x4.bf16",
        "bert_large_batch_32_train",
        "coatnet.2x2.bf16",
        "flan_t5.4x4.bf16",
        "alphafold_lite.2x2.fp32",
        "conformer_l.4x4.bf16",
        "imagen_unet.8x8.bf16",
        "recsys_embed_batch_1024_eval",
    ),
    "valid": ("lamda_small.4x4.bf16", "efficientnet_v2.2x2.bf16", "maxvit_batch_64_train"),
    "test": ("ul2_base.4x4.bf16", "resnet_rs.2x2.fp32", "gshard_moe_batch_16_train"),
}
# Matrix-heavy, as TPU programs are: dots most, then convolutions.
TPU_FAMILY_WEIGHTS = {"move": 0.06, "elementwise": 0.2, "reduce": 0.12, "dot": 0.38, "conv": 0.24}
