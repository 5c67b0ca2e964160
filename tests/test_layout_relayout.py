"""Relayout copy indicators of layout configurations, against copies worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from baselines.layout.models import LayoutSAGE
from baselines.layout.relayout import RELAYOUT_DIM, relayout_copies
from baselines.layout.tile_padding import resolved_group


def _row(out=(), op0=(), op1=()):
    row = np.full(18, -1, np.int8)
    for start, group in ((0, out), (6, op0), (6 * 2, op1)):
        row[start : start + len(group)] = group
    return row


# Node A (configurable id 0): output (4, 256) stored (1, 0), no operands.
# Node B (id 1): output (4, 256) stored (1, 0); operand 0 is A, operand 1 is a
# non-configurable C of shape (2, 8) stored (0, 1).
REF = np.stack([_row(out=(1, 0)), _row(out=(1, 0), op0=(1, 0), op1=(0, 1))])
DIMS = np.zeros((2, 18), np.float32)
DIMS[0, 0:2] = np.log1p([4, 256])
DIMS[1, 0:2] = DIMS[1, 6:8] = np.log1p([4, 256])
DIMS[1, 12:14] = np.log1p([2, 8])
OPERANDS = np.array([[-1, -1], [0, -1]], np.int32)

CONFIGS = [
    ({}, {}),  # all default: nothing copied
    ({"out": (0, 1)}, {}),  # A moves; B still reads A in (1, 0): B copies operand 0
    ({"out": (0, 1)}, {"op0": (0, 1)}),  # B follows A: no copy on that edge
    ({}, {"op1": (1, 0)}),  # B reads C in (1, 0), C is stored (0, 1): a copy
    ({}, {"op0": (0, 1)}),  # B reads A in (0, 1), A stays (1, 0): a copy
    ({}, {"out": (1, 0)}),  # B's output spelled as its reference: not moved
]


def test_copies_equal_the_ones_worked_out_by_hand():
    values = np.stack([np.stack([_row(**a), _row(**b)]) for a, b in CONFIGS], axis=1)
    got = relayout_copies(
        tf.constant(values), tf.constant(REF), tf.constant(OPERANDS), tf.constant(DIMS)
    ).numpy()
    assert got.shape == (2, len(CONFIGS), RELAYOUT_DIM)
    # [operand 0 copied, operand 1 copied, output moved] per node and configuration
    flags = {
        0: [[0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
        1: [[0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 0]],
    }
    elements = {0: (1, 1, 4 * 256), 1: (4 * 256, 2 * 8, 4 * 256)}
    for node in (0, 1):
        f = np.array(flags[node], np.float32)
        weight = np.array([math.log(e) / 10 for e in elements[node]], np.float32)
        np.testing.assert_array_equal(got[node, :, :3], f)
        # float32 logs of element counts below 2**11: within a few ulps of ~0.7.
        np.testing.assert_allclose(got[node, :, 3:], f * weight, rtol=1e-6, atol=1e-7)


def test_a_group_giving_only_its_minor_dims_resolves_with_the_reference_order():
    # Reference (4, 3, 2, 1, 0): a group giving (4, 0) keeps them, then 3, 2, 1 follow;
    # (3, 4) then 2, 1, 0; (4, 3) is the reference's own order; all -1 is the reference;
    # a full permutation stays as given.
    ref = np.full((1, 1, 18), -1, np.int32)
    ref[0, 0, :5] = (4, 3, 2, 1, 0)
    given = [(4, 0), (3, 4), (4, 3), (), (0, 1, 2, 3, 4)]
    values = np.stack([_row(out=g) for g in given])[None].astype(np.int32)
    got = resolved_group(tf.constant(values), tf.constant(ref), 0).numpy()[0]
    assert got.tolist() == [
        [4, 0, 3, 2, 1, -1],
        [3, 4, 2, 1, 0, -1],
        [4, 3, 2, 1, 0, -1],
        [4, 3, 2, 1, 0, -1],
        [0, 1, 2, 3, 4, -1],
    ]


def test_an_output_that_gives_only_the_references_minor_dims_is_not_moved():
    # B's output (4, 256) stored (1, 0): a group giving only (1,) is that layout, so no
    # copy is flagged; (0,) moves it.
    for out, moved in (((1,), 0.0), ((0,), 1.0)):
        values = np.stack([_row(), _row(out=out)])[:, None]
        got = relayout_copies(
            tf.constant(values), tf.constant(REF), tf.constant(OPERANDS), tf.constant(DIMS)
        ).numpy()
        assert got[1, 0, 2] == moved


def test_flag_widens_the_configuration_join_by_the_features_only():
    plain = LayoutSAGE(8, hidden_dim=16).create_variables()
    copies = LayoutSAGE(8, hidden_dim=16, relayout_copies=True).create_variables()
    widths = [m.join_config.kernel.shape[0] for m in (plain, copies)]
    assert widths[1] - widths[0] == RELAYOUT_DIM


def test_a_non_bool_flag_is_refused():
    with pytest.raises(ValueError, match="relayout_copies"):
        LayoutSAGE(8, relayout_copies=1)
