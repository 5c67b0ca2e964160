"""Deterministic synthetic tile:xla kernels: graph sampler, analytic tile cost model, npz writer.

The real TpuGraphs tile:xla files are large and third-party; this package makes
look-alikes for tests, smoke runs and benchmarks. Every file has the real keys,
dtypes and column layout (see `ARRAY_DTYPES`, the `COL_*` and `CFG_*`
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

Sets sized like the real release (`PRESETS`, e.g. "release": 5709/676/844
kernels, ~1,840 configs and ~40 nodes per kernel on average, long tails) use
`GeneratorOptions(sizes=RELEASE_SIZES)`; `write_split` writes a split with
several processes, byte-identical whatever their number.

Other worlds (`worlds.WORLDS`: `GeneratorOptions(world=...)`) compute the
runtimes with structurally different cost models, noise and kernel mixes; a
benchmark judges recipes in the first four (`worlds.BENCHMARK_WORLDS`), the
fifth, `tpu` (`tpu_world`), is reached by its name only.

Modules: `fileformat` (keys, columns, opcodes, programs), `cost_model`
(hardware constants, runtime model, tile menus, plausibility), `worlds`
(the cost models a benchmark judges recipes in), `graphs`
(op-graph sampler), `configs` (which tile configs a kernel lists), `options`
(size knobs, release presets), `kernels` (whole kernels), `npz` (writer),
`dataset` (parallel split writer).
"""

from synthetic.common.fileformat import *  # noqa: F403 (columns, opcodes, programs)
from synthetic.common.fileformat import __all__ as _fileformat_names
from synthetic.tiles.cost_model import (
    ALTERNATE_HARDWARE,
    DEFAULT_HARDWARE,
    HARDWARE_PRESETS,
    MACHINE_SLOWDOWNS,
    MAX_PADDING_WASTE,
    MAX_STEPS,
    MIN_K_TILE,
    NOISE_SIGMA,
    REDUCED_AXIS,
    Contraction,
    CostSpec,
    Hardware,
    OperandSpec,
    config_features,
    default_tiles,
    estimate_runtime_ns,
    release_tile_candidates,
    tile_candidates,
)
from synthetic.tiles.dataset import KernelInfo, write_split
from synthetic.tiles.kernels import (
    DEFAULT_OPTIONS,
    SyntheticKernel,
    generate_kernel,
    kernel_rng,
)
from synthetic.tiles.npz import write_npz
from synthetic.tiles.options import (
    PRESETS,
    RELEASE_COUNTS,
    RELEASE_SIZES,
    GeneratorOptions,
    SizeDistribution,
    planned_sizes,
    preset_counts,
)
from synthetic.tiles.worlds import WORLDS, World

__all__ = [
    *_fileformat_names,
    "ALTERNATE_HARDWARE",
    "DEFAULT_HARDWARE",
    "DEFAULT_OPTIONS",
    "HARDWARE_PRESETS",
    "MACHINE_SLOWDOWNS",
    "MAX_PADDING_WASTE",
    "MAX_STEPS",
    "MIN_K_TILE",
    "NOISE_SIGMA",
    "REDUCED_AXIS",
    "Contraction",
    "CostSpec",
    "GeneratorOptions",
    "Hardware",
    "KernelInfo",
    "OperandSpec",
    "PRESETS",
    "RELEASE_COUNTS",
    "RELEASE_SIZES",
    "SizeDistribution",
    "SyntheticKernel",
    "WORLDS",
    "World",
    "config_features",
    "default_tiles",
    "estimate_runtime_ns",
    "generate_kernel",
    "kernel_rng",
    "planned_sizes",
    "preset_counts",
    "release_tile_candidates",
    "tile_candidates",
    "write_npz",
    "write_split",
]
