"""The `tpu` world: its cost for hand-worked configurations, its files, and its place
outside the benchmark's four worlds.

Expected runtimes are worked out below from the published figures written as
numbers: 275 TFLOP/s bf16 (a sixth for f32), 1.2 TB/s, 16 MiB of VMEM, 0.35 us a
grid step, 2 us a launch, 0.5 us a DMA, vector ops at 2 x 8 x 128 x 1.05 a ns and
transcendentals at a quarter of that. Runtimes are float64 sums of at most ~60
terms, each a product or quotient of integers below 2**40: relative error below
1e-14, so rtol 1e-12 still catches any changed term.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest
from conftest import ROOT

from baselines.tiles import data
from synthetic.tiles import WORLDS, GeneratorOptions, generate_kernel
from synthetic.tiles.cost_model import Contraction, CostSpec, OperandSpec
from synthetic.tiles.tpu_world import TPU_PROGRAMS, tpu_runtime_ns
from synthetic.tiles.worlds import BENCHMARK_WORLDS

PEAK, HBM, STEP, LAUNCH, DMA = 275_000.0, 1_200.0, 350.0, 2_000.0, 500.0
VPU = 2 * 8 * 128 * 1.05
EUP = VPU / 4
MIB16 = 16 * 2**20


def copy_ns(nbytes: float) -> float:
    return nbytes / HBM + DMA


@pytest.mark.parametrize("w", [2, 4], ids=["bf16", "f32"])
def test_a_dot_whose_tiles_fit(w):
    """[256, 1024] = [256, 512] x [512, 1024]; output tile [120, 256], K tile 256 or 512;
    then tiles of 244 rows, all of N and K."""
    spec = CostSpec((256, 1024), 1, 0, w, (), 0.0, 0.0, Contraction("dot", 512, w))
    tiles = np.array([[120, 256], [120, 256], [244, 1024]])
    got = tpu_runtime_ns(spec, tiles, np.array([256, 512, 512]))
    sub = 16 if w == 2 else 8  # rows of a vector register tile: two bf16 packed per 32 bits
    rate = PEAK if w == 2 else PEAK / 6
    out = 256 * (-(-120 // sub) * sub) * w  # 256 lanes x 120 rows padded to `sub` rows
    # MXU: blocks (K / 128) x (N / 128), each pass (rows + 128) cycles of 2 x 128 x 128 flops.
    mxu_256 = (2 * 2) * (120 + 128) * 2 * 128 * 128 / rate
    mxu_512 = (4 * 2) * (120 + 128) * 2 * 128 * 128 / rate
    want = []
    # Grid (M, N, K) = (3, 4, 2): lhs [120, 256] and rhs [256, 256] change every iteration.
    lhs = (-(-120 // sub) * sub) * 256 * w
    rhs = 256 * 256 * w
    assert 2 * (lhs + rhs + out) + 120 * 256 * 4 <= MIB16  # + the f32 accumulator
    dma = 12 * copy_ns(out) + 24 * copy_ns(lhs) + 24 * copy_ns(rhs)
    exposed = copy_ns(out) + copy_ns(lhs) + copy_ns(rhs)
    want.append(LAUNCH + 24 * STEP + max(24 * mxu_256, dma) + exposed)
    # Grid (3, 4, 1): lhs [120, 512] is copied when M changes (3 times), rhs [512, 256]
    # when N changes (12 times).
    lhs = (-(-120 // sub) * sub) * 512 * w
    rhs = 512 * 256 * w
    dma = 12 * copy_ns(out) + 3 * copy_ns(lhs) + 12 * copy_ns(rhs)
    exposed = copy_ns(out) + copy_ns(lhs) + copy_ns(rhs)
    want.append(LAUNCH + 12 * STEP + max(12 * mxu_512, dma) + exposed)
    # Grid (2, 1, 1): 4 x 8 blocks of 248 rows (244 padded to 8) an iteration; lhs and
    # output copied twice, rhs once.
    mxu = 2 * (4 * 8) * (248 + 128) * 2 * 128 * 128 / rate
    out = 1024 * (-(-244 // sub) * sub) * w
    lhs = (-(-244 // sub) * sub) * 512 * w
    rhs = 512 * 1024 * w
    dma = 2 * copy_ns(out) + 2 * copy_ns(lhs) + copy_ns(rhs)
    assert (mxu > dma) == (w == 4)  # f32's six passes make it compute-bound
    exposed = copy_ns(out) + copy_ns(lhs) + copy_ns(rhs)
    want.append(LAUNCH + 2 * STEP + max(mxu, dma) + exposed)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_tiles_that_do_not_fit_vmem():
    """f32 [4096, 4096] = f(x) with 2 vector ops and 0.5 transcendentals per element; tiles
    of 128 rows (double-buffered), 384 rows (one copy of each fits 16 MiB, two do not: no
    overlap) and 2048 rows (not even one: refused)."""
    operand = OperandSpec((0, 1), 1, 0, 4)
    spec = CostSpec((4096, 4096), 1, 0, 4, (operand,), 2.0, 0.5, None)
    got = tpu_runtime_ns(spec, np.array([[128, 4096], [384, 4096], [2048, 4096]]))
    want = []
    for rows, tiles in ((128, 32), (384, 11)):
        tile = rows * 4096 * 4  # the input's and the output's tile, bytes
        vector = rows * 4096 * (2.0 / VPU + 0.5 / EUP)
        dma = tiles * copy_ns(tile) + tiles * copy_ns(tile)
        fixed = LAUNCH + tiles * STEP
        if 2 * 2 * tile <= MIB16:
            want.append(fixed + max(tiles * vector, dma) + 2 * copy_ns(tile))
        else:
            assert 2 * tile <= MIB16
            want.append(fixed + tiles * vector + dma)
    want.append(1e9)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_world_draws_its_noise_from_its_own_stream():
    world = WORLDS["tpu"]
    shared = dataclasses.replace(world, noise_stream=None)
    model_ns = np.full(50, 1e6)
    own = world.measure(np.random.default_rng(3), model_ns)[0]
    kernel = shared.measure(np.random.default_rng(3), model_ns)[0]
    assert not np.array_equal(own, kernel)
    np.testing.assert_array_equal(own, world.measure(np.random.default_rng(3), model_ns)[0])


def test_generate_writes_a_valid_tiny_tpu_set(tmp_path):
    spec = importlib.util.spec_from_file_location("make_synthetic", ROOT / "data/make_synthetic.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "tpu"
    flags = ["--train", "8", "--valid", "5", "--test", "5", "--max_configs", "40", "--quiet"]
    assert script.main(["--out", str(out), "--world", "tpu", *flags]) == 0
    for split, count in (("train", 8), ("valid", 5), ("test", 5)):
        loaded = data.load_split(out / split, progress=False)  # the loader's own checks
        assert len(loaded) == count
        if split == "test":
            assert not loaded.config_runtime.any()
            continue
        assert (loaded.config_runtime > 0).all()
        programs = {t.rsplit("_", 1)[0] for t in loaded.tile_ids}
        assert programs <= set(TPU_PROGRAMS[split]), programs


def test_the_world_is_its_own_generator_not_the_defaults():
    options = GeneratorOptions(world="tpu", max_configs=40, max_nodes=20)
    ours = generate_kernel(seed=1, split="train", index=7, options=options)
    theirs = generate_kernel(seed=1, split="train", index=7)
    assert ours.name.rsplit("_", 1)[0] in TPU_PROGRAMS["train"]
    assert ours.name != theirs.name


def test_all_worlds_of_the_benchmark_are_the_first_four():
    spec = importlib.util.spec_from_file_location("quality_bench", ROOT / "bench" / "quality.py")
    quality = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quality)
    assert BENCHMARK_WORLDS == ("default", "alternate", "serial", "cache")
    assert list(WORLDS)[:4] == list(BENCHMARK_WORLDS) and "tpu" in WORLDS
    parse = quality.build_parser().parse_args
    assert quality.Benchmark(parse(["--worlds", "all"])).worlds == list(BENCHMARK_WORLDS)
    assert quality.Benchmark(parse(["--worlds", "tpu"])).worlds == ["tpu"]
