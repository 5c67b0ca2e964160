"""Worlds: each writes the real format, and each cost model is the formula it documents.

A world changes how runtimes come about (structure, constants, noise, machines,
the mix of kernels), never the file format: every world's files load through
the project's reader, keep the real conventions (row 0 the default config,
one normalizer per kernel, hidden test labels, layouts that are permutations),
and train, valid and test programs stay apart.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines.tiles import data
from synthetic.tiles import WORLDS, GeneratorOptions, generate_kernel, write_npz
from synthetic.tiles.cost_model import DEFAULT_HARDWARE, CostSpec, OperandSpec
from synthetic.tiles.worlds import (
    CACHE_PIPELINE_FILL_NS,
    SERIAL_DMA_LATENCY_NS,
    cache_runtime_ns,
    serial_runtime_ns,
)

KERNELS = 12


@pytest.mark.parametrize("world", list(WORLDS))
def test_every_world_writes_the_real_format_and_conventions(world, tmp_path):
    options = GeneratorOptions(world=world, max_configs=60, max_nodes=20)
    programs = {}
    for split in ("train", "valid", "test"):
        programs[split] = set()
        for index in range(KERNELS):
            kernel = generate_kernel(seed=5, split=split, index=index, options=options)
            path = tmp_path / split / f"{kernel.name}.npz"
            path.parent.mkdir(exist_ok=True)
            write_npz(path, kernel.arrays)
            loaded = data.read_kernel(path)  # the loader's own checks: keys, dtypes, ranges
            with np.load(path) as raw:
                assert raw["node_opcode"].dtype == np.uint8
                assert raw["edge_index"].dtype == np.int64
                assert raw["config_runtime"].dtype == np.int64
            runtime, normalizers = loaded.config_runtime, loaded.config_runtime_normalizers
            assert len(set(normalizers.tolist())) == 1  # one normalizer per kernel
            if split == "test":  # hidden, as in the real release
                assert not runtime.any() and (normalizers == 1).all()
            else:
                assert (runtime > 0).all() and normalizers[0] > 0
                if WORLDS[world].normalizer_drift == 0:
                    assert normalizers[0] == runtime[0]  # the default config, row 0
            shape = loaded.node_feat[:, 21:27] > 0
            ranks = shape.sum(axis=1)
            for row, rank in zip(loaded.node_feat, ranks):
                layout = sorted(int(x) for x in row[134 : 134 + rank])
                assert layout == list(range(rank))  # minor_to_major is a permutation
            programs[split].add(kernel.name.rsplit("_", 1)[0])
    assert not programs["train"] & programs["valid"]
    assert not programs["valid"] & (programs["test"] - {""})


def test_the_default_world_is_the_generator_as_it_was():
    """`default` adds nothing to the random stream: its kernels are the default options'."""
    for index in range(6):
        a = generate_kernel(seed=2, split="train", index=index)
        b = generate_kernel(seed=2, split="train", index=index, options=GeneratorOptions())
        for key in a.arrays:
            np.testing.assert_array_equal(a.arrays[key], b.arrays[key])


def spec() -> CostSpec:
    """A [64, 512] f32 elementwise kernel: one operand, 2 vector flops, 1 transcendental."""
    return CostSpec(
        out_dims=(64, 512),
        out_minor=1,
        out_second=0,
        out_bytes=4,
        operands=(OperandSpec(dims=(0, 1), minor=1, second=0, bytes_per_element=4),),
        vpu_per_element=2.0,
        eup_per_element=1.0,
        contraction=None,
    )


def test_serial_runtime_is_its_documented_sum():
    hw = DEFAULT_HARDWARE
    tiles = np.array([[8, 100], [64, 512]])
    got = serial_runtime_ns(spec(), tiles, None, hw)
    expected = []
    for rows, cols in tiles:
        steps = math.ceil(64 / rows) * math.ceil(512 / cols)
        padded = max(8, 2 ** math.ceil(math.log2(rows))) * max(128, 2 ** math.ceil(math.log2(cols)))
        memory = (padded * 4 + padded * 4) / hw.hbm_bytes_per_ns  # operand in, output out
        vector = padded * 2 / hw.vpu_flops_per_ns + padded * 1 / hw.eup_ops_per_ns
        per_step = 2 * SERIAL_DMA_LATENCY_NS + memory + vector + hw.step_overhead_ns
        expected.append(hw.launch_ns + steps * per_step)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_cache_runtime_is_its_documented_max_with_a_smooth_bandwidth():
    hw = DEFAULT_HARDWARE
    tiles = np.array([[8, 128], [64, 512]])
    got = cache_runtime_ns(spec(), tiles, None, hw)
    expected = []
    for rows, cols in tiles:
        steps = math.ceil(64 / rows) * math.ceil(512 / cols)
        elems = math.ceil(rows / 8) * 8 * math.ceil(cols / 128) * 128  # f32: 8 sublanes
        working_set = 2 * (elems * 4 + elems * 4)
        bandwidth = hw.hbm_bytes_per_ns / (1 + (working_set / hw.vmem_bytes) ** 2)
        memory = (elems * 4 + elems * 4) / bandwidth
        compute = elems * 2 / hw.vpu_flops_per_ns
        eup = elems * 1 / hw.eup_ops_per_ns
        expected.append(hw.launch_ns + steps * (max(compute, memory) + eup + hw.step_overhead_ns))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert CACHE_PIPELINE_FILL_NS > 0  # paid per K step by contractions only


def test_the_worlds_disagree_on_which_tiles_are_fast():
    """Structurally different models rank the same kernel's tiles differently."""
    disagree = {"serial": 0, "cache": 0}
    compared = 0
    for index in range(5, 60):
        kernel = generate_kernel(
            seed=3,
            split="train",
            index=index,
            options=GeneratorOptions(max_configs=200, max_nodes=30),
        )
        cost = kernel.cost
        bounds = kernel.arrays["config_feat"][:, 8 : 8 + len(cost.out_dims)]
        if cost.contraction is not None or len(bounds) < 20 or not bounds.all():
            continue
        compared += 1
        ranks = {
            w: np.argsort(np.argsort(WORLDS[w].runtime_ns(cost, bounds, None)))
            for w in ("default", "serial", "cache")
        }
        for world in disagree:
            disagree[world] += np.corrcoef(ranks["default"], ranks[world])[0, 1] < 0.95
    assert compared >= 5
    assert all(count >= 1 for count in disagree.values()), (disagree, compared)
