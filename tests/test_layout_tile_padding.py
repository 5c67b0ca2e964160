"""The vector-tile padding features of a layout configuration, against hand-computed ratios."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from baselines.layout.models import LayoutSAGE
from baselines.layout.tile_padding import TILE_PADDING_DIM, tile_padding


def _node(out_dims, op0_dims, op0_ref, out_ref):
    """One configurable node: (cfg_ref [18], cfg_dims [18]) with no operand 1."""
    ref = np.full(18, -1, np.int8)
    dims = np.zeros(18, np.float32)
    ref[: len(out_ref)] = out_ref
    ref[6 : 6 + len(op0_ref)] = op0_ref
    dims[: len(out_dims)] = np.log1p(out_dims)
    dims[6 : 6 + len(op0_dims)] = np.log1p(op0_dims)
    return ref, dims


def _config(out=(), op0=()):
    row = np.full(18, -1, np.int8)
    row[: len(out)] = out
    row[6 : 6 + len(op0)] = op0
    return row


def test_padding_ratios_equal_the_hand_computed_tiles():
    # Output (3, 200), stored minor-to-major [1, 0] by default: 200 in the lanes.
    # Operand 0 is 1-D (1000,).
    ref, dims = _node((3, 200), (1000,), op0_ref=(0,), out_ref=(1, 0))
    configs = np.stack(
        [
            _config(),  # compiler default: both groups resolve to their reference
            _config(out=(0, 1)),  # 3 in the lanes, 200 in the sublanes
            _config(out=(1, 0), op0=(0,)),  # the reference, spelled out
        ]
    )[None]  # [NC=1, K=3, 18]
    got = tile_padding(tf.constant(configs), tf.constant(ref[None]), tf.constant(dims[None]))
    got = got.numpy()
    assert got.shape == (1, 3, TILE_PADDING_DIM)

    def group(lane, sub, elements):
        # lanes to 128; sublanes to 8, 16, 32; log element count / 10
        return [
            math.log(lane),
            *(math.log(s) for s in sub),
            math.log(elements) / 10,
        ]

    out_ref = group(256 / 200, (8 / 3, 16 / 3, 32 / 3), 600)
    out_swapped = group(128 / 3, (200 / 200, 208 / 200, 224 / 200), 600)
    op0 = group(1024 / 1000, (1, 1, 1), 1000)  # 1-D: no sublane dimension, log 1 = 0
    missing = [0.0] * 5
    expected = np.array(
        [out_ref + op0 + missing, out_swapped + op0 + missing, out_ref + op0 + missing]
    )
    # float32 logs of ratios below 128: a few ulps of values at most ~5.
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lanes", [128 * 512, 128 * 512 + 1])
def test_dimensions_up_to_two_to_the_sixteen_round_trip_exactly(lanes):
    # log1p in float32 keeps ~24 bits: expm1 of it is within 0.01 of an integer
    # below 2**16, so rounding gives the size back and a multiple of 128 pads nothing.
    ref, dims = _node((lanes,), (), op0_ref=(), out_ref=(0,))
    got = tile_padding(
        tf.constant(_config()[None, None]), tf.constant(ref[None]), tf.constant(dims[None])
    ).numpy()
    tiles = -(-lanes // 128)
    expected = math.log(tiles * 128 / lanes)
    if lanes % 128 == 0:
        assert got[0, 0, 0] == 0.0
    else:
        # A ratio near 1 in float32: its log is off by at most a few ulps of 1.
        assert abs(got[0, 0, 0] - expected) < 4e-7


def test_exact_multiples_of_the_tiles_pad_nothing():
    # (24, 768) stored (1, 0): 768 lanes = 6 x 128 and 24 sublanes = 3 x 8 fill their
    # tiles; 16- and 32-row tiles hold 32 rows for 24. float32 expm1(log1p(768)) is
    # 768.00006, so sizes must be rounded back to integers for this to hold.
    ref, dims = _node((24, 768), (), op0_ref=(), out_ref=(1, 0))
    got = tile_padding(
        tf.constant(_config()[None, None]), tf.constant(ref[None]), tf.constant(dims[None])
    ).numpy()
    assert got[0, 0, 0] == 0.0 and got[0, 0, 1] == 0.0
    np.testing.assert_allclose(got[0, 0, 2:4], [math.log(32 / 24)] * 2, rtol=1e-6)


def test_a_million_wide_dimension_is_off_by_at_most_its_rounding():
    # Above 2**16 the round trip may miss the size by about size * 13.8 * 2**-24
    # (0.8 at 1e6); one element of 1e6 changes the log ratio by about 1e-6.
    ref, dims = _node((1_000_064,), (), op0_ref=(), out_ref=(0,))
    got = tile_padding(
        tf.constant(_config()[None, None]), tf.constant(ref[None]), tf.constant(dims[None])
    ).numpy()
    assert abs(got[0, 0, 0]) < 2e-4  # 1,000,064 = 7,813 * 128: no padding


def test_the_flag_widens_the_configuration_join_by_the_features_only():
    plain = LayoutSAGE(8, hidden_dim=16).create_variables()
    padded = LayoutSAGE(8, hidden_dim=16, tile_padding=True).create_variables()
    widths = [m.join_config.kernel.shape[0] for m in (plain, padded)]
    assert widths[1] - widths[0] == TILE_PADDING_DIM
    assert [w.shape for w in plain.weights if "join_config" not in w.name] == [
        w.shape for w in padded.weights if "join_config" not in w.name
    ]


def test_a_non_bool_flag_is_refused():
    with pytest.raises(ValueError, match="tile_padding"):
        LayoutSAGE(8, tile_padding="yes")
