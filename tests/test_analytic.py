"""The analytic estimates per configuration, against hand computations.

Each estimate is recomputed here by hand from the numbers a file holds (the
real samples where they have the case, else a kernel built in the test), so a
wrong column, a wrong constant or a wrong formula shows.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines.tiles import analytic, data
from baselines.tiles.features import ANALYTIC_COLUMN, FeatureStats
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT

MIB16 = 16 * 2**20


def read(real_samples, name: str) -> data.Kernel:
    return data.read_kernel(real_samples / "tile_xla" / "test" / f"{name}.npz")


def estimates(kernel: data.Kernel) -> np.ndarray:
    return analytic.kernel_estimates(
        kernel.node_feat, kernel.node_opcode, kernel.edge_index, kernel.config_feat
    )


def test_an_elementwise_kernel_of_the_real_samples(real_samples):
    """Tiled tensor [2, 300, 300, 64], bf16, minor_to_major [2, 3, 1, 0]; no contraction."""
    kernel = read(real_samples, "0a8a2b247d7a20b9dcab1daf50066a4d")
    got = estimates(kernel)
    # Config 0: output bounds [2, 14, 4, 1].
    tiles = math.ceil(2 / 2) * math.ceil(300 / 14) * math.ceil(300 / 4) * math.ceil(64 / 1)
    assert tiles == 105600
    # Most minor dim 2 (bound 4) on 128 lanes, second-minor dim 3 (bound 1) on 8 sublanes.
    padded_share = 1 - (4 * 1) / (128 * 8)
    vmem = 2 * (2 * 14 * 4 * 1 * 2) / MIB16  # double-buffered bf16 output tile
    np.testing.assert_allclose(got[0], [tiles, padded_share, vmem, 1.0], rtol=1e-12)
    # Config 1: output bounds [1, 2, 4, 2].
    tiles = 2 * 150 * 75 * 32
    np.testing.assert_allclose(
        got[1], [tiles, 1 - 4 * 2 / (128 * 8), 2 * (1 * 2 * 4 * 2 * 2) / MIB16, 1.0], rtol=1e-12
    )


def test_a_convolution_kernel_of_the_real_samples(real_samples):
    """Tiled tensor (last root with a shape) [1, 1, 1024, 512] f32, minor_to_major
    [3, 2, 1, 0]; the convolution's filter [1, 1, 1024, 512] with dimension numbers
    input feature 3, spatial 0 and 1 (columns 99, 101-102)."""
    kernel = read(real_samples, "0ac539372cc77cc6791794b369b984e1")
    got = estimates(kernel)
    # Config 0: kernel bounds [1, 1, 64, 2], output bounds [5, 2, 6, 4].
    assert kernel.config_feat[0, :4].tolist() == [1, 1, 64, 2]
    assert kernel.config_feat[0, 8:12].tolist() == [5, 2, 6, 4]
    tiles = 1 * 1 * math.ceil(1024 / 6) * math.ceil(512 / 4)  # bounds past a dim's size: 1
    padded_share = 1 - (4 * 6) / (128 * 8)  # minor dim 3 (bound 4), second dim 2 (bound 6)
    vmem = 2 * ((5 * 2 * 6 * 4) * 4 + (1 * 1 * 64 * 2) * 4) / MIB16
    steps = 1 * 1 * math.ceil(512 / 2)  # contracted: input feature 3 and spatial 0, 1
    np.testing.assert_allclose(got[0], [tiles, padded_share, vmem, steps], rtol=1e-12)


def handmade_dot(k_bound: int) -> data.Kernel:
    """lhs [256, 512] x rhs [512, 1024] -> dot [256, 1024] (f32, default layout), one config."""
    node_feat = np.zeros((3, 140), np.float32)
    for i, dims in enumerate(([256, 512], [512, 1024], [256, 1024])):
        node_feat[i, 21 : 21 + len(dims)] = dims
        node_feat[i, 134:136] = [1, 0]
        node_feat[i, 13] = 1  # f32
    node_feat[2, 0] = 1  # the dot is the root
    config = np.zeros((1, 24), np.float32)
    config[0, 0:2] = [k_bound, 256]  # kernel bounds: the rhs tile (K, N)
    config[0, 8:10] = [64, 256]  # output tile (M, N)
    return data.Kernel(
        tile_id="dot",
        node_feat=node_feat,
        node_opcode=np.array([63, 63, 34], np.uint8),
        edge_index=np.array([[2, 0], [2, 1]], np.int64),
        config_feat=config,
        config_runtime=np.ones(1, np.int64),
        config_runtime_normalizers=np.ones(1, np.int64),
    )


@pytest.mark.parametrize("k_bound, steps", [(128, 4), (512, 1), (100, 6), (0, 1)])
def test_a_dot_counts_its_reduction_steps_over_k(k_bound, steps):
    got = estimates(handmade_dot(k_bound))[0]
    tiles = math.ceil(256 / 64) * math.ceil(1024 / 256)
    kernel_bytes = (k_bound * 256 * 4) if k_bound else (256 * 4)
    vmem = 2 * (64 * 256 * 4 + kernel_bytes) / MIB16
    np.testing.assert_allclose(got, [tiles, 0.0, vmem, steps], rtol=1e-12)


def test_a_config_without_bounds_is_one_whole_tile():
    kernel = handmade_dot(128)
    kernel.config_feat[:] = 0
    got = estimates(kernel)[0]
    # The whole [256, 1024] output in one tile; 256 rows are 32 sublane groups, no padding.
    np.testing.assert_allclose(got, [1.0, 0.0, 4 / MIB16, 1.0], rtol=1e-12)  # one f32 element


def test_the_model_inputs_scale_each_estimate_as_documented():
    raw = np.array([[2.0**16, 0.25, 2.0**-8, 2.0**4]])
    np.testing.assert_allclose(analytic.model_inputs(raw), [[2.0, 0.25, -2.0, 0.5]], rtol=1e-6)


def test_normalized_splits_carry_the_estimates_of_the_raw_files():
    raw = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    normalized = FeatureStats.fit_split(raw).normalize_split(raw)
    i = int(np.argmax(raw.num_configs))
    c0, c1 = raw.config_offsets[i], raw.config_offsets[i + 1]
    kernel = raw.kernel(i)
    expected = analytic.model_inputs(estimates(kernel))
    np.testing.assert_allclose(normalized.config_feat[c0:c1, ANALYTIC_COLUMN:], expected)


def bf16_convolution_nodes() -> np.ndarray:
    """bf16 input [2, 8, 8, 64], filter [3, 3, 64, 32] and convolution output [2, 8, 8, 32]
    (the root), minor_to_major [3, 2, 1, 0], no dimension numbers."""
    node_feat = np.zeros((3, 140), np.float32)
    for i, dims in enumerate(([2, 8, 8, 64], [3, 3, 64, 32], [2, 8, 8, 32])):
        node_feat[i, 21:25] = dims
        node_feat[i, 134:138] = [3, 2, 1, 0]
        node_feat[i, 15] = 1  # bf16
    node_feat[2, 0] = 1
    return node_feat


def test_a_convolution_without_dimension_numbers_reduces_over_hwi():
    """The generator writes no dimension numbers: XLA's default filter layout HWIO."""
    node_feat = bf16_convolution_nodes()
    config = np.zeros((1, 24), np.float32)
    config[0, 0:4] = [3, 3, 16, 16]  # filter tile: K tile 16 of 64, Co tile 16 of 32
    config[0, 8:12] = [1, 8, 8, 16]
    got = analytic.kernel_estimates(
        node_feat, np.array([63, 63, 26], np.uint8), np.array([[2, 0], [2, 1]]), config
    )[0]
    assert got[3] == math.ceil(3 / 3) * math.ceil(3 / 3) * math.ceil(64 / 16)  # Co not reduced
    assert got[0] == 2 * 1 * 1 * 2  # batch 2 in tiles of 1, channels 32 in tiles of 16


def test_a_saved_model_with_analytic_inputs_is_scored_with_the_estimates():
    from baselines.tiles.model_builder import build_model, create_variables
    from baselines.tiles.predict import ConfigScorer, SavedRanker

    raw = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    stats = FeatureStats.fit_split(raw)
    model = build_model("MLP", 4, {"hidden_dim": 8, "analytic_inputs": True})
    create_variables(model)
    ranker = SavedRanker(BUNDLED_TOY_ROOT, {}, stats, ConfigScorer(model))
    got = ranker.score(raw, progress=False)
    want = ranker.scorer.score_split(stats.normalize_split(raw, estimates=True), progress=False)
    without = ranker.scorer.score_split(stats.normalize_split(raw, estimates=False), progress=False)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert not all(np.allclose(g, w) for g, w in zip(got, without))  # the estimates matter


# --- bytes per element, for every element type the files can hold ----------------------

# node_feat columns 2-20 are a one-hot of the output's element type, in the order of
# the dataset's feature list; the bytes are what XLA stores each element in. Types
# that hold no array (invalid, tuple, opaque, token) and a row with no type set are
# documented to count 4 bytes.
ELEMENT_TYPE_BYTES = {
    2: ("invalid", 4),
    3: ("pred", 1),
    4: ("s8", 1),
    5: ("s16", 2),
    6: ("s32", 4),
    7: ("s64", 8),
    8: ("u8", 1),
    9: ("u16", 2),
    10: ("u32", 4),
    11: ("u64", 8),
    12: ("f16", 2),
    13: ("f32", 4),
    14: ("f64", 8),
    15: ("bf16", 2),
    16: ("c64", 8),
    17: ("c128", 16),
    18: ("tuple", 4),
    19: ("opaque", 4),
    20: ("token", 4),
}


def elementwise_kernel(type_column: int | None) -> data.Kernel:
    """An elementwise kernel shaped like a real sample's: root [2, 300, 300, 64],
    minor_to_major [2, 3, 1, 0], of the element type whose one-hot column is given
    (None: no type set). Two configurations, input bounds given in the second."""
    node_feat = np.zeros((2, 140), np.float32)
    for i in range(2):
        node_feat[i, 21:25] = [2, 300, 300, 64]
        node_feat[i, 134:138] = [2, 3, 1, 0]
        if type_column is not None:
            node_feat[i, type_column] = 1
    node_feat[1, 0] = 1  # the root
    config = np.zeros((2, 24), np.float32)
    config[0, 8:12] = [2, 14, 4, 1]  # the real sample's first two output bounds
    config[1, 8:12] = [1, 2, 4, 2]
    config[1, 16:20] = [1, 2, 8, 2]  # an input tile too
    return data.Kernel(
        tile_id="elementwise",
        node_feat=node_feat,
        node_opcode=np.array([63, 2], np.uint8),
        edge_index=np.array([[1, 0]], np.int64),
        config_feat=config,
        config_runtime=np.ones(2, np.int64),
        config_runtime_normalizers=np.ones(2, np.int64),
    )


@pytest.mark.parametrize(
    "column", sorted(ELEMENT_TYPE_BYTES), ids=lambda c: ELEMENT_TYPE_BYTES[c][0]
)
def test_every_element_type_counts_its_own_bytes(column):
    name, width = ELEMENT_TYPE_BYTES[column]
    kernel = elementwise_kernel(column)
    assert analytic.tiled_tensor(kernel.node_feat)[2] == width, name
    got = estimates(kernel)
    # Width-free estimates, by hand: tiles and padding of the two output tiles.
    tiles0 = 1 * math.ceil(300 / 14) * math.ceil(300 / 4) * 64
    tiles1 = 2 * 150 * 75 * 32
    pad0, pad1 = 1 - 4 * 1 / (128 * 8), 1 - 4 * 2 / (128 * 8)
    # VMEM share: double-buffered tiles, each its bounds' product times the width.
    vmem0 = 2 * (2 * 14 * 4 * 1) * width / MIB16
    vmem1 = 2 * (1 * 2 * 4 * 2 + 1 * 2 * 8 * 2) * width / MIB16
    np.testing.assert_allclose(
        got, [[tiles0, pad0, vmem0, 1.0], [tiles1, pad1, vmem1, 1.0]], rtol=1e-12, err_msg=name
    )
    # The model input: log2(vmem share) / 4, by hand.
    inputs = analytic.model_inputs(got)
    np.testing.assert_allclose(inputs[:, 2], np.log2([vmem0, vmem1]) / 4, rtol=1e-6)


def test_a_node_with_no_element_type_counts_four_bytes():
    assert analytic.tiled_tensor(elementwise_kernel(None).node_feat)[2] == 4


def test_the_widths_differ_where_the_types_do():
    """The table above is not one width for all: a wrong column shows in most types."""
    widths = {name: width for name, width in ELEMENT_TYPE_BYTES.values()}
    assert (widths["bf16"], widths["f32"], widths["s8"], widths["s64"]) == (2, 4, 1, 8)
    for column in range(3, 17):  # neighbouring columns of different widths
        if ELEMENT_TYPE_BYTES[column][1] != ELEMENT_TYPE_BYTES[column + 1][1]:
            a, b = elementwise_kernel(column), elementwise_kernel(column + 1)
            assert estimates(a)[0, 2] != estimates(b)[0, 2]


def test_a_bf16_convolution_counts_two_bytes_in_every_tile():
    """bf16 input [2, 8, 8, 64], filter [3, 3, 64, 32], output [2, 8, 8, 32]."""
    node_feat = bf16_convolution_nodes()
    config = np.zeros((1, 24), np.float32)
    config[0, 0:4] = [3, 3, 16, 16]  # filter tile
    config[0, 8:12] = [1, 8, 8, 16]  # output tile
    config[0, 16:20] = [1, 8, 8, 16]  # input tile
    got = analytic.kernel_estimates(
        node_feat, np.array([63, 63, 26], np.uint8), np.array([[2, 0], [2, 1]]), config
    )[0]
    tile_bytes = (3 * 3 * 16 * 16 + 1 * 8 * 8 * 16 + 1 * 8 * 8 * 16) * 2
    assert got[2] == pytest.approx(2 * tile_bytes / MIB16, rel=1e-12)
    # Output tile (16 channels minor, 8 rows second-minor): no padding of the 8 sublanes.
    assert got[1] == pytest.approx(1 - 16 * 8 / (128 * 8), rel=1e-12)
