"""Worlds: structurally different cost models of a tiled TPU kernel, for judging a recipe.

A model tuned on one analytic cost model fits that model's formula. To judge a
recipe by what transfers, the benchmark trains and scores it in several
worlds that differ in *structure*, not only in constants: which costs
dominate, how the reduction (K) tile enters, how tiles are padded, the noise,
how much machine-to-machine variation the normalizers leave, and the mix of
kernel kinds. Every world writes the real file format with the real samples'
conventions; only the runtimes (and the mix of kernels) differ.

- `default`: the project's roofline model (`cost_model.estimate_runtime_ns`):
  per grid step the larger of compute and HBM time, a step overhead, a spill
  factor past VMEM, (8, 128) padding of the minor two dims; 2.5% noise; the
  normalizer (the default config on the same machine) removes the machine's
  speed exactly.
- `alternate`: the same structure with other constants (less VMEM, lower
  bandwidth, costlier steps, a (16, 256) grid).
- `serial`: nothing overlaps: DMA latency per transfer, memory time, compute
  time and a large grid-step overhead add up; without an on-chip accumulator
  every K step reads and writes the partial output tile; tiles are padded to
  the next power of two; working sets past VMEM are re-fetched; 1% noise; the
  normalizer was measured on another machine (a 10% drift per kernel);
  elementwise- and reduce-heavy kernels.
- `cache`: compute and memory overlap, but HBM bandwidth falls smoothly as the
  working set outgrows VMEM, the MXU wastes the part of a 128 x 128 pass a
  tile does not fill, every K step pays a pipeline fill, sublane packing
  depends on the element width (16 rows for 2-byte types), transcendental ops
  run serially after the vector ops; 5% noise with 2% outliers; the
  normalizer drifts 5%; dot- and convolution-heavy kernels.
- `tpu`: written from the TPU's published architecture, not from the four
  above (`tpu_world.py`): a grid of DMA'd, double-buffered tiles; 128 x 128
  MXU passes of (rows + 128) cycles; (8, 128) vector tiles packed by element
  width; tiles re-read only when their block index changes; configs whose
  single-buffered tiles exceed 16 MiB of VMEM refused (1 s); 4% noise from its
  own random stream, 1% outliers, 2% normalizer drift; matrix-heavy kernels
  and its own programs. Not one of `BENCHMARK_WORLDS`: reached by its name only.

    world = WORLDS["serial"]
    runtime_ns = world.runtime_ns(spec, out_tiles, k_tiles)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

import numpy as np

from synthetic.common.fileformat import TEST_PROGRAMS, TRAIN_PROGRAMS, VALID_PROGRAMS
from synthetic.tiles.cost_model import (
    ALTERNATE_HARDWARE,
    DEFAULT_HARDWARE,
    MACHINE_SLOWDOWNS,
    NOISE_SIGMA,
    REDUCED_AXIS,
    CostSpec,
    Hardware,
    OperandSpec,
    estimate_runtime_ns,
)
from synthetic.tiles.tpu_world import (
    TPU_FAMILY_WEIGHTS,
    TPU_HARDWARE,
    TPU_PROGRAMS,
    tpu_runtime_ns,
)

RuntimeFn = Callable[[CostSpec, np.ndarray, np.ndarray | None, Hardware], np.ndarray]


def _tiles_of(spec: CostSpec, out_tiles: np.ndarray) -> np.ndarray:
    return np.asarray(out_tiles, dtype=np.float64).reshape(-1, len(spec.out_dims))


def _pow2_at_least(x: np.ndarray, floor: int) -> np.ndarray:
    return np.maximum(float(floor), 2.0 ** np.ceil(np.log2(np.maximum(x, 1.0))))


def _serial_operand_elements(op: OperandSpec, tiles: np.ndarray, hw: Hardware) -> np.ndarray:
    elems = np.ones(tiles.shape[0])
    for d in op.dims:
        t = tiles[:, d]
        if d == op.minor:
            t = _pow2_at_least(t, hw.lanes)
        elif d == op.second:
            t = _pow2_at_least(t, hw.sublanes)
        elems = elems * t
    if op.reduced > 1 or REDUCED_AXIS in (op.minor, op.second):
        r = float(op.reduced)
        if op.minor == REDUCED_AXIS:
            r = float(_pow2_at_least(np.array([r]), hw.lanes)[0])
        elif op.second == REDUCED_AXIS:
            r = float(_pow2_at_least(np.array([r]), hw.sublanes)[0])
        elems = elems * r
    return elems


def serial_runtime_ns(
    spec: CostSpec,
    out_tiles: np.ndarray,
    k_tiles: np.ndarray | None = None,
    hw: Hardware = DEFAULT_HARDWARE,
) -> np.ndarray:
    """Noise-free runtime (ns) when nothing overlaps.

    runtime = launch + steps * (transfers * dma_latency + memory + compute + overhead),
    steps = prod(ceil(dim / tile)) * ceil(K / k_tile); tile dims padded to the next
    power of two (at least the lane/sublane width) on the minor two dims; every K
    step moves the partial output tile in and out (4 bytes an element); a working
    set past VMEM is fetched twice.
    """
    tiles = _tiles_of(spec, out_tiles)
    dims = np.asarray(spec.out_dims, dtype=np.float64)
    c = tiles.shape[0]
    padded = tiles.copy()
    padded[:, spec.out_minor] = _pow2_at_least(tiles[:, spec.out_minor], hw.lanes)
    if spec.out_second is not None:
        padded[:, spec.out_second] = _pow2_at_least(tiles[:, spec.out_second], hw.sublanes)
    elems = np.prod(padded, axis=1)
    out_tiles_count = np.prod(np.ceil(dims / tiles), axis=1)
    in_bytes = np.zeros(c)
    for op in spec.operands:
        in_bytes += _serial_operand_elements(op, tiles, hw) * op.bytes_per_element
    transfers = 1.0 + len(spec.operands)
    vector = elems * (spec.vpu_per_element / hw.vpu_flops_per_ns)
    vector += elems * (spec.eup_per_element / hw.eup_ops_per_ns)
    k_steps = np.ones(c)
    step_in = np.zeros(c)
    mxu = np.zeros(c)
    partial = np.zeros(c)
    con = spec.contraction
    if con is not None:
        tk = np.asarray(k_tiles, dtype=np.float64).reshape(c)
        k_steps = np.ceil(con.k / tk)
        kp = _pow2_at_least(tk, hw.sublanes)
        if con.kind == "dot":
            batch = np.prod(tiles[:, :-2], axis=1)
            m = _pow2_at_least(tiles[:, -2], hw.sublanes)
            n = _pow2_at_least(tiles[:, -1], hw.lanes)
            step_in = (batch * m * kp + batch * kp * n) * con.bytes_per_element
            mxu = 2.0 * batch * m * n * kp
        else:
            kh, kw = con.window
            h_in = (tiles[:, 1] - 1) * con.stride + kh
            w_in = (tiles[:, 2] - 1) * con.stride + kw
            lhs = tiles[:, 0] * h_in * w_in * kp
            rhs = kh * kw * kp * _pow2_at_least(tiles[:, 3], hw.lanes)
            step_in = (lhs + rhs) * con.bytes_per_element
            mxu = 2.0 * elems * kh * kw * kp
        rate = hw.mxu_flops_per_ns * (1.0 if con.bytes_per_element <= 2 else hw.mxu_f32_factor)
        mxu = mxu / rate
        transfers += 2.0
        partial = np.where(k_steps > 1, 2.0 * elems * 4.0, 0.0)
    step_bytes = step_in + partial + (in_bytes + elems * spec.out_bytes) / k_steps
    working_set = step_in + in_bytes + elems * spec.out_bytes
    refetch = np.where(working_set > hw.vmem_bytes, 2.0, 1.0)
    memory = refetch * step_bytes / hw.hbm_bytes_per_ns
    per_step = transfers * SERIAL_DMA_LATENCY_NS + memory + mxu + vector / k_steps
    return hw.launch_ns + out_tiles_count * k_steps * (per_step + hw.step_overhead_ns)


SERIAL_DMA_LATENCY_NS = 120.0
SERIAL_HARDWARE = Hardware(step_overhead_ns=1200.0, launch_ns=4000.0, hbm_bytes_per_ns=900.0)


def _cache_operand_elements(
    op: OperandSpec, tiles: np.ndarray, lanes: int, sublanes: int
) -> np.ndarray:
    elems = np.ones(tiles.shape[0])
    for d in op.dims:
        t = tiles[:, d]
        if d == op.minor:
            t = np.ceil(t / lanes) * lanes
        elif d == op.second:
            t = np.ceil(t / sublanes) * sublanes
        elems = elems * t
    if op.reduced > 1 or REDUCED_AXIS in (op.minor, op.second):
        elems = elems * float(op.reduced)
    return elems


def cache_runtime_ns(
    spec: CostSpec,
    out_tiles: np.ndarray,
    k_tiles: np.ndarray | None = None,
    hw: Hardware = DEFAULT_HARDWARE,
) -> np.ndarray:
    """Noise-free runtime (ns) with a smooth memory hierarchy and MXU granularity.

    per step = max(mxu / efficiency + vector, memory / bandwidth(ws)) + eup + fill + overhead,
    bandwidth(ws) = hbm / (1 + (ws / vmem)^2); efficiency = the filled share of the
    128 x 128 passes; a pipeline fill per K step; sublanes packed by element width
    (8 rows for 4-byte types, 16 for 2-byte ones).
    """
    tiles = _tiles_of(spec, out_tiles)
    dims = np.asarray(spec.out_dims, dtype=np.float64)
    c = tiles.shape[0]
    out_width = max(1, min(4, spec.out_bytes))
    sublanes = hw.sublanes * max(1, 4 // out_width)
    padded = tiles.copy()
    padded[:, spec.out_minor] = np.ceil(tiles[:, spec.out_minor] / hw.lanes) * hw.lanes
    if spec.out_second is not None:
        padded[:, spec.out_second] = np.ceil(tiles[:, spec.out_second] / sublanes) * sublanes
    elems = np.prod(padded, axis=1)
    out_tiles_count = np.prod(np.ceil(dims / tiles), axis=1)
    in_bytes = np.zeros(c)
    for op in spec.operands:
        op_sub = hw.sublanes * max(1, 4 // max(1, op.bytes_per_element))
        in_bytes += _cache_operand_elements(op, tiles, hw.lanes, op_sub) * op.bytes_per_element
    vector = elems * spec.vpu_per_element / hw.vpu_flops_per_ns
    eup = elems * spec.eup_per_element / hw.eup_ops_per_ns
    k_steps = np.ones(c)
    step_in = np.zeros(c)
    mxu = np.zeros(c)
    fill = np.zeros(c)
    con = spec.contraction
    if con is not None:
        tk = np.asarray(k_tiles, dtype=np.float64).reshape(c)
        k_steps = np.ceil(con.k / tk)
        if con.kind == "dot":
            batch = np.prod(tiles[:, :-2], axis=1)
            m, n = tiles[:, -2], tiles[:, -1]
            step_in = (batch * m * tk + batch * tk * n) * con.bytes_per_element
            flops = 2.0 * batch * m * n * tk
            efficiency = (m / (np.ceil(m / 128) * 128)) * (n / (np.ceil(n / 128) * 128))
        else:
            kh, kw = con.window
            h_in = (tiles[:, 1] - 1) * con.stride + kh
            w_in = (tiles[:, 2] - 1) * con.stride + kw
            step_in = tiles[:, 0] * h_in * w_in * tk + kh * kw * tk * tiles[:, 3]
            step_in = step_in * con.bytes_per_element
            flops = 2.0 * np.prod(tiles, axis=1) * kh * kw * tk
            efficiency = (tk / (np.ceil(tk / 128) * 128)) * (
                tiles[:, 3] / (np.ceil(tiles[:, 3] / 128) * 128)
            )
        rate = hw.mxu_flops_per_ns * (1.0 if con.bytes_per_element <= 2 else hw.mxu_f32_factor)
        mxu = flops / (rate * np.maximum(efficiency, 1e-3))
        fill = np.full(c, CACHE_PIPELINE_FILL_NS)
    working_set = 2.0 * (step_in + in_bytes + elems * spec.out_bytes)
    bandwidth = hw.hbm_bytes_per_ns / (1.0 + (working_set / hw.vmem_bytes) ** 2)
    memory = (step_in + (in_bytes + elems * spec.out_bytes) / k_steps) / bandwidth
    compute = mxu + vector / k_steps
    per_step = np.maximum(compute, memory) + eup / k_steps + fill + hw.step_overhead_ns
    return hw.launch_ns + out_tiles_count * k_steps * per_step


CACHE_PIPELINE_FILL_NS = 400.0
CACHE_HARDWARE = Hardware(vmem_bytes=8 * 2**20, eup_ops_per_ns=96.0, step_overhead_ns=250.0)


@dataclasses.dataclass(frozen=True)
class World:
    """A cost model with its constants, noise, machines and mix of kernels.

    `normalizer_drift`: log-std of the ratio between the machine the default
    config was measured on (the normalizer) and the machine of the other
    configs; 0 means the normalizer removes the machine's speed exactly.
    `outlier_rate`/`outlier_factor`: measurements slowed by an interfering job.
    `noise_stream`: if set, the noise comes from a generator of its own, seeded by one draw
    of the kernel's generator and this number (None: the kernel's generator itself).
    """

    name: str
    runtime: RuntimeFn
    hardware: Hardware
    noise_sigma: float = NOISE_SIGMA
    outlier_rate: float = 0.0
    outlier_factor: tuple[float, float] = (1.2, 1.5)
    machine_slowdowns: tuple[float, ...] = MACHINE_SLOWDOWNS
    normalizer_drift: float = 0.0
    family_weights: Mapping[str, float] | None = None  # None: the generator's own mix
    programs: Mapping[str, tuple[str, ...]] | None = None  # None: the generator's own
    noise_stream: int | None = None

    def runtime_ns(
        self, spec: CostSpec, out_tiles: np.ndarray, k_tiles: np.ndarray | None
    ) -> np.ndarray:
        return self.runtime(spec, out_tiles, k_tiles, self.hardware)

    def measure(
        self, rng: np.random.Generator, model_ns: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Measured runtimes (ns, int64) and their normalizers; row 0 is the default config."""
        if self.noise_stream is not None:
            rng = np.random.default_rng([int(rng.integers(2**63)), self.noise_stream])
        slowdown = float(self.machine_slowdowns[int(rng.integers(len(self.machine_slowdowns)))])
        noise = np.exp(rng.normal(0.0, self.noise_sigma, size=len(model_ns)))
        if self.outlier_rate > 0:
            hit = rng.random(len(model_ns)) < self.outlier_rate
            noise = noise * np.where(hit, rng.uniform(*self.outlier_factor, len(model_ns)), 1.0)
        runtime = np.maximum(1, np.rint(model_ns * slowdown * noise)).astype(np.int64)
        drift = math.exp(rng.normal(0.0, self.normalizer_drift)) if self.normalizer_drift else 1.0
        normalizer = max(1, int(round(float(runtime[0]) * drift)))
        return runtime, np.full_like(runtime, normalizer)


SERIAL_PROGRAMS = {
    "train": (
        "conformer_asr.4x4.bf16",
        "wavenet.2x2.fp32",
        "lstm_lm_batch_64_train",
        "fastspeech.2x2.bf16",
        "graphcast.8x8.fp32",
        "ncf_batch_512_eval",
        "deepfm.2x2.fp32",
        "swin_t.4x4.bf16",
        "yolo_v3_batch_16_train",
        "maskrcnn.2x2.fp32",
    ),
    "valid": ("rnnt.2x2.fp32", "ssd_resnet34.4x4.bf16", "xlnet_batch_32_train"),
    "test": ("tacotron2.2x2.fp32", "convnext_t.4x4.bf16", "electra_batch_64_train"),
}
CACHE_PROGRAMS = {
    "train": (
        "vgg16.4x4.fp16",
        "densenet121.2x2.fp32",
        "gpt2_medium.8x8.bf16",
        "palm_toy.4x4.bf16",
        "nasnet_batch_32_train",
        "regnet_y.2x2.fp32",
        "bigbird.4x4.bf16",
        "senet154_batch_16_train",
        "vit_l16.8x8.bf16",
        "detr.2x2.fp32",
    ),
    "valid": ("resnext101.4x4.bf16", "albert_batch_128_train", "pointnet.2x2.fp32"),
    "test": ("efficientdet_d1.2x2.fp32", "bart_base.4x4.bf16", "mnasnet_batch_64_train"),
}

WORLDS: dict[str, World] = {
    "default": World("default", estimate_runtime_ns, DEFAULT_HARDWARE),
    "alternate": World("alternate", estimate_runtime_ns, ALTERNATE_HARDWARE),
    "serial": World(
        "serial",
        serial_runtime_ns,
        SERIAL_HARDWARE,
        noise_sigma=0.01,
        normalizer_drift=0.10,
        family_weights={
            "move": 0.1,
            "elementwise": 0.42,
            "reduce": 0.28,
            "dot": 0.12,
            "conv": 0.08,
        },
        programs=SERIAL_PROGRAMS,
    ),
    "cache": World(
        "cache",
        cache_runtime_ns,
        CACHE_HARDWARE,
        noise_sigma=0.05,
        outlier_rate=0.02,
        normalizer_drift=0.05,
        family_weights={
            "move": 0.08,
            "elementwise": 0.2,
            "reduce": 0.14,
            "dot": 0.3,
            "conv": 0.28,
        },
        programs=CACHE_PROGRAMS,
    ),
    "tpu": World(
        "tpu",
        tpu_runtime_ns,
        TPU_HARDWARE,
        noise_sigma=0.04,
        outlier_rate=0.01,
        outlier_factor=(1.3, 2.0),
        machine_slowdowns=(0.9, 1.0, 1.0, 1.15),
        normalizer_drift=0.02,
        family_weights=TPU_FAMILY_WEIGHTS,
        programs=TPU_PROGRAMS,
        noise_stream=0x7C0,
    ),
}
# What `bench/quality.py --worlds all` means: the four worlds recipes are judged in.
BENCHMARK_WORLDS = ("default", "alternate", "serial", "cache")
# The generator's own programs, for worlds that keep them.
DEFAULT_PROGRAMS = {"train": TRAIN_PROGRAMS, "valid": VALID_PROGRAMS, "test": TEST_PROGRAMS}
