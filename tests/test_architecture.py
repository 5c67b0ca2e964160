"""The architecture inputs per configuration, against hand computations.

Each kernel is built here column by column; every expected value is worked out
below from its dims and bounds and the published constants written out as
numbers (275 TFLOP/s bf16, a third of it for f32, 1.2 TB/s, 16 MiB, 0.35 us a
grid step, 2 x 8 x 128 x 1.05 vector ops a ns), so a wrong column, constant or
formula shows. Raw values are float64 sums and products of at most ~10 terms of
integers below 2**40 (exact) and a few divisions: relative error below 1e-15
each, so rtol 1e-12 leaves room and still catches any changed term.
"""

from __future__ import annotations

import numpy as np
import pytest

from baselines.tiles import architecture, data
from baselines.tiles.features import ARCHITECTURE_COLUMN, FeatureStats
from baselines.tiles.tile_args import BUNDLED_TOY_ROOT

MIB16 = 16 * 2**20
PEAK = 275_000.0  # bf16 flops per ns
HBM = 1_200.0  # bytes per ns
STEP = 350.0  # ns per grid iteration
VPU = 2 * 8 * 128 * 1.05  # vector element ops per ns
TYPES = [(15, 2), (13, 4)]  # (one-hot column, bytes): bf16, f32
TYPE_IDS = ["bf16", "f32"]


def nodes(shapes: list[list[int]], layouts: list[list[int]], type_column: int) -> np.ndarray:
    """node_feat rows: shape columns 21-26, their product (28), layout 134-139, element type;
    the last node is the root."""
    node_feat = np.zeros((len(shapes), 140), np.float32)
    for i, (dims, layout) in enumerate(zip(shapes, layouts)):
        node_feat[i, 21 : 21 + len(dims)] = dims
        node_feat[i, 27] = sum(dims)
        node_feat[i, 28] = np.prod(dims)
        node_feat[i, 134 : 134 + len(layout)] = layout
        node_feat[i, type_column] = 1
    node_feat[-1, 0] = 1
    return node_feat


def arch(node_feat, opcodes, edges, config) -> np.ndarray:
    return architecture.kernel_architecture(
        node_feat, np.array(opcodes, np.uint8), np.array(edges, np.int64), config
    )


@pytest.mark.parametrize("type_column, w", TYPES, ids=TYPE_IDS)
def test_a_dot(type_column, w):
    """lhs [256, 512] x rhs [512, 1024] -> dot [256, 1024], layout [1, 0]; kernel bounds (the
    rhs tile) [96, 200], output bounds [100, 200]."""
    node_feat = nodes([[256, 512], [512, 1024], [256, 1024]], [[1, 0]] * 3, type_column)
    config = np.zeros((1, 24), np.float32)
    config[0, 0:2] = [96, 200]
    config[0, 8:10] = [100, 200]
    got = arch(node_feat, [63, 63, 34], [[2, 0], [2, 1]], config)[0]
    # Minor dim 1 (tile 200), second-minor dim 0 (tile 100).
    minor = [72 / 128, 256 / 200 - 1, 0 / 8, 200 / 200 - 1]
    second = [100 / 128, 128 / 100 - 1, 4 / 8, 104 / 100 - 1]
    tiles = 3 * 6  # ceil(256 / 100) * ceil(1024 / 200)
    iterations = tiles * 6  # K steps ceil(512 / 96)
    fill = (96 / 128) * (200 / 256)
    padded = 104 * 256  # output tile padded to (8, 128)
    lhs = 104 * 128 * w  # tm 100 -> 104 rows, tk 96 -> 128 lanes
    rhs = 96 * 256 * w  # tk 96 rows (a multiple of 8), tn 200 -> 256 lanes
    vmem = (2 * (padded * w + lhs + rhs) + padded * 4) / MIB16  # + f32 accumulator
    flops = 2 * 104 * 128 * 256  # per iteration, on padded operands
    rate = PEAK if w == 2 else PEAK / 3
    traffic = iterations * (lhs + rhs) + tiles * padded * w
    roofline = max(iterations * flops / rate, traffic / HBM) + iterations * STEP
    want = [fill, *minor, *second, iterations, 6, 3, vmem, roofline]
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("type_column, w", TYPES, ids=TYPE_IDS)
def test_a_convolution(type_column, w):
    """input [2, 8, 8, 64] * filter [3, 3, 64, 32] -> [2, 8, 8, 32], no dimension numbers
    (NHWC, HWIO); kernel bounds [3, 3, 16, 16], output bounds [1, 8, 8, 16]."""
    node_feat = nodes(
        [[2, 8, 8, 64], [3, 3, 64, 32], [2, 8, 8, 32]], [[3, 2, 1, 0]] * 3, type_column
    )
    config = np.zeros((1, 24), np.float32)
    config[0, 0:4] = [3, 3, 16, 16]
    config[0, 8:12] = [1, 8, 8, 16]
    got = arch(node_feat, [63, 63, 26], [[2, 0], [2, 1]], config)[0]
    minor = [16 / 128, 128 / 16 - 1, 0.0, 0.0]  # channels tile 16
    second = [8 / 128, 128 / 8 - 1, 0.0, 0.0]  # width tile 8
    tiles = 2 * 1 * 1 * 2  # batch 2 in 1s, channels 32 in 16s
    iterations = tiles * 4  # input channels 64 in 16s; 3 x 3 window whole
    fill = (16 / 128) * (16 / 128)
    padded = 8 * 8 * 128  # 1 x 8 rows x 8 (second minor) x 16 -> 128 lanes
    lhs = 64 * 128 * w  # rows 1 * 8 * 8 = 64, tk 16 -> 128 lanes
    rhs = 9 * 16 * 128 * w  # 3 x 3 taps, tk 16 rows, 16 output channels -> 128 lanes
    vmem = (2 * (padded * w + lhs + rhs) + padded * 4) / MIB16
    flops = 2 * 64 * 9 * 128 * 128
    rate = PEAK if w == 2 else PEAK / 3
    traffic = iterations * (lhs + rhs) + tiles * padded * w
    roofline = max(iterations * flops / rate, traffic / HBM) + iterations * STEP
    assert iterations * flops / rate > traffic / HBM  # this one is compute-bound
    # Re-reads: input once per output-channel tile (2), filter once per batch tile (2).
    want = [fill, *minor, *second, iterations, 2, 2, vmem, roofline]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_convolution_with_dimension_numbers():
    """NCHW output [2, 32, 8, 8] (feature dim 1, column 106) from an OIHW filter
    [32, 64, 3, 3] (input feature 1, output feature 0, spatial 2 and 3: columns 99-102)."""
    node_feat = nodes(
        [[2, 64, 8, 8], [32, 64, 3, 3], [2, 32, 8, 8]], [[3, 2, 1, 0]] * 3, type_column=15
    )
    node_feat[2, 99:103] = [1, 0, 2, 3]
    node_feat[2, 105:107] = [0, 1]
    config = np.zeros((1, 24), np.float32)
    config[0, 0:4] = [16, 32, 3, 3]  # filter tile: 16 of 32 outputs, 32 of 64 inputs
    config[0, 8:12] = [1, 16, 8, 8]
    got = arch(node_feat, [63, 63, 26], [[2, 0], [2, 1]], config)[0]
    fill = (32 / 128) * (16 / 128)  # input-feature tile 32, output-feature tile 16
    tiles = 2 * 2 * 1 * 1  # batch in 1s, 32 features in 16s
    iterations = tiles * 2  # 64 inputs in 32s, the 3 x 3 window whole
    # Input re-read per feature tile (2); filter per batch x spatial tile (2 x 1 x 1).
    np.testing.assert_allclose(got[[0, 9, 10, 11]], [fill, iterations, 2, 2], rtol=1e-12)


@pytest.mark.parametrize("type_column, w", TYPES, ids=TYPE_IDS)
def test_an_elementwise_kernel(type_column, w):
    """x [2, 300, 300, 64] + bias [64], then 11 exponentials -> [2, 300, 300, 64], layout
    [2, 3, 1, 0]: two configs, output bounds [2, 14, 4, 1] and [1, 2, 200, 64]; no matrix op.
    12 vector ops per element: compute-bound in bf16, memory-bound in f32."""
    big, layout = [2, 300, 300, 64], [2, 3, 1, 0]
    node_feat = nodes([big, [64]] + [big] * 12, [layout, [0]] + [layout] * 12, type_column)
    opcodes = [63, 63, 2] + [39] * 11  # parameters, add, exponentials
    edges = [[2, 0], [2, 1]] + [[i + 1, i] for i in range(2, 13)]
    config = np.zeros((2, 24), np.float32)
    config[0, 8:12] = [2, 14, 4, 1]
    config[1, 8:12] = [1, 2, 200, 64]
    got = arch(node_feat, opcodes, edges, config)
    elements = 2 * 300 * 300 * 64
    streamed = w + w * 64 / elements  # both parameters, per output element
    want = []
    for tiles, padded, minor, second in [
        # dim 2 (tile 4) minor, dim 3 (tile 1) second; 2 x 14 rows of (8, 128) vregs
        (1 * 22 * 75 * 64, 2 * 14 * 128 * 8, [4 / 128, 31, 4 / 8, 1], [1 / 128, 127, 1 / 8, 7]),
        (2 * 150 * 2 * 1, 1 * 2 * 256 * 64, [72 / 128, 0.28, 0.0, 0.0], [64 / 128, 1, 0.0, 0.0]),
    ]:
        vmem = 2 * padded * (w + streamed) / MIB16  # one K step: no accumulator
        compute = tiles * padded * 12 / VPU
        memory = tiles * padded * (w + streamed) / HBM
        assert (compute > memory) == (w == 2)
        roofline = max(compute, memory) + tiles * STEP
        want.append([1.0, *minor, *second, tiles, 1, 1, vmem, roofline])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_model_inputs_scale_each_column_as_documented():
    raw = np.array([[0.5, 0.25, 127.0, 0.5, 7.0, 0.0, 0.0, 0.0, 1.0, 2.0**16, 2.0**8, 1.0]])
    raw = np.concatenate([raw, [[2.0**-8, 2.0**24]]], axis=1)
    want = [[0.5, 0.25, 1.0, 0.5, 3 / 7, 0.0, 0.0, 0.0, 1 / 7, 2.0, 1.0, 0.0, -2.0, 1.0]]
    # float32 outputs of log2 of powers of two: exact up to float32 rounding (~6e-8).
    np.testing.assert_allclose(architecture.model_inputs(raw), want, rtol=1e-6, atol=1e-7)


def test_normalized_splits_carry_the_architecture_inputs_only_when_asked():
    raw = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    stats = FeatureStats.fit_split(raw)
    plain = stats.normalize_split(raw)
    wide = stats.normalize_split(raw, architecture=True)
    assert plain.config_feat.shape[1] == ARCHITECTURE_COLUMN
    assert wide.config_feat.shape[1] == ARCHITECTURE_COLUMN + 14
    np.testing.assert_array_equal(wide.config_feat[:, :ARCHITECTURE_COLUMN], plain.config_feat)
    for i in range(len(raw)):
        c0, c1 = raw.config_offsets[i], raw.config_offsets[i + 1]
        k = raw.kernel(i)
        expected = architecture.model_inputs(
            architecture.kernel_architecture(
                k.node_feat, k.node_opcode, k.edge_index, k.config_feat
            )
        )
        np.testing.assert_array_equal(wide.config_feat[c0:c1, ARCHITECTURE_COLUMN:], expected)


def test_a_model_refuses_batches_without_the_architecture_columns():
    import tensorflow as tf

    from baselines.tiles.kernel_batches import dummy_batch, graph_from_batch, to_tensors
    from baselines.tiles.model_builder import build_model, create_variables

    model = build_model("MLP", 2, {"hidden_dim": 8, "architecture_inputs": True})
    create_variables(model)
    model(graph_from_batch(to_tensors(dummy_batch(2, architecture=True))))
    with pytest.raises(tf.errors.InvalidArgumentError, match="architecture=True"):
        model(graph_from_batch(to_tensors(dummy_batch(2))))


def test_a_model_with_architecture_inputs_trains_and_is_rebuilt_for_prediction(tmp_path):
    """One epoch on the bundled toy set; the rebuilt model scores with the inputs."""
    from baselines.tiles.predict import SavedRanker
    from baselines.tiles.task import train
    from baselines.tiles.tile_args import TrainArgs

    args = TrainArgs(
        model="MLP",
        model_kwargs_json='{"hidden_dim": 8, "op_embedding_dim": 8, "architecture_inputs": true}',
        epochs=1,
        configs=4,
        toy_data=True,
        data_root=str(BUNDLED_TOY_ROOT),
        out_dir=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
    )
    train(args, progress=False, log=lambda _: None)
    ranker = SavedRanker.load(tmp_path / "out" / f"model_{args.run_hash()}")
    assert ranker.scorer.model.architecture_inputs
    raw = data.load_split(BUNDLED_TOY_ROOT / "valid", progress=False)
    got = ranker.score(raw, progress=False)
    assert all(np.isfinite(s).all() for s in got)
    zeroed = ranker.normalized(raw)
    zeroed.config_feat[:, ARCHITECTURE_COLUMN:] = 0.0
    without = ranker.scorer.score_split(zeroed, progress=False)
    assert not all(np.allclose(g, w) for g, w in zip(got, without))  # the inputs matter
