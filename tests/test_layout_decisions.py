"""The decision search space: configurations tied into a few binary decisions."""

from __future__ import annotations

import numpy as np
import pytest

from synthetic.layout import cost_model, decisions
from synthetic.layout.programs import build_sized_program
from synthetic.layout.release import generate_planned_file


def test_a_partial_group_keeps_its_dims_and_orders_the_rest_as_node_feat():
    # Rank 5, node_feat (4, 3, 2, 1, 0): the group gives (4, 0); the rest in node_feat's
    # order without 4 and 0 is (3, 2, 1). A full row and an all -1 row are unchanged.
    groups = np.array(
        [[4, 0, -1, -1, -1, -1], [0, 1, 2, 3, 4, -1], [-1] * 6, [2, -1, -1, -1, -1, -1]]
    )
    got = cost_model._resolve(groups, (4, 3, 2, 1, 0))
    assert got.tolist() == [[4, 0, 3, 2, 1], [0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 4, 3, 1, 0]]


def _program(seed: int = 0, nodes: int = 900):
    return build_sized_program(np.random.default_rng(seed), "xla", "unet", nodes)


def _groups_by_column(feat: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """(slot, group, [c, 6] values) of every group some row sets."""
    out = []
    for j in range(feat.shape[1]):
        for g in range(3):
            block = feat[:, j, 6 * g : 6 * g + 6]
            if (block >= 0).any():
                out.append((j, g, block))
    return out


def _partitions(feat: np.ndarray) -> dict[bytes, int]:
    """Distinct row partitions of the varying groups (a decision and its opposite are one)."""
    parts: dict[bytes, int] = {}
    for _, _, block in _groups_by_column(feat):
        _, inverse = np.unique(block, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        if inverse.max() == 0:
            continue
        canon = inverse if inverse[0] == 0 else 1 - inverse
        parts[canon.astype(np.int8).tobytes()] = parts.get(canon.astype(np.int8).tobytes(), 0) + 1
    return parts


@pytest.mark.parametrize("search", ["random", "default"])
def test_each_group_orders_one_dim_pair_led_by_node_feats_most_minor_dim(search):
    program = _program()
    feat = decisions.decision_configs(np.random.default_rng(1), program, 300, search)
    layouts = cost_model.node_layouts(program.node_feat)
    ops = cost_model.operands(program.edge_index, program.num_nodes)
    checked = 0
    for j, w in enumerate(program.node_config_ids.tolist()):
        for g in range(3):
            block = feat[:, j, 6 * g : 6 * g + 6]
            if g == 0:
                t = w
            else:
                t = cost_model.group_tensor(int(program.node_opcode[w]), ops[w], g)
            if t is None or not layouts[t]:
                assert (block == -1).all()
                continue
            assert (block[:, 2:] == -1).all()  # two entries at most
            pairs = {tuple(r[:2].astype(int)) for r in block}
            if len(layouts[t]) >= 2:
                a = layouts[t][0]
                (b,) = {x for p in pairs for x in p} - {a}
                assert pairs <= {(a, b), (b, a)} and b in range(len(layouts[t]))
                checked += 1
            else:
                assert pairs <= {(-1, -1), (0, -1)}
    assert checked > 20


def test_groups_are_tied_into_at_most_the_documented_number_of_decisions():
    program = _program(2, nodes=3000)
    feat = decisions.decision_configs(np.random.default_rng(3), program, 400, "random")
    parts = _partitions(feat)
    groups = len(_groups_by_column(feat))
    assert groups > decisions.MAX_DECISIONS
    # Every group follows one decision: the distinct partitions are the decisions
    # (two decisions could coincide by chance only with probability ~2^-400).
    assert decisions.MIN_DECISIONS <= len(parts) <= decisions.MAX_DECISIONS
    assert sum(parts.values()) == groups
    assert max(parts.values()) > 1  # groups are tied


def test_random_search_draws_each_decision_fairly_and_default_search_skews_them():
    program = _program(4)
    c = 2000
    # Binomial(2000, p) share: 4 std at p = 1/2 is 0.045.
    tol = 4 * np.sqrt(0.25 / c)
    rand = decisions.decision_configs(np.random.default_rng(5), program, c, "random")
    for key in _partitions(rand):
        share = np.frombuffer(key, dtype=np.int8).mean()
        assert abs(share - 0.5) < tol
    dflt = decisions.decision_configs(np.random.default_rng(5), program, c, "default")
    shares = [np.frombuffer(k, dtype=np.int8).mean() for k in _partitions(dflt)]
    minority = np.minimum(shares, 1 - np.asarray(shares))
    assert minority.min() >= decisions.MIN_MINORITY - tol
    assert minority.max() <= decisions.MAX_MINORITY + tol
    assert np.median(minority) < 0.5 - 3 * tol  # skewed, unlike the random search


def _hand_program():
    """parameter (0) -> reshape (1, configurable) -> add (2); 100 x 64 f32, row-major."""
    from synthetic.layout.programs import Program

    feat = np.zeros((3, 140), dtype=np.float32)
    feat[:, 1] = 32
    feat[:, 21:23] = (100, 64)
    feat[:, 134:136] = (1, 0)
    return Program(
        family="hand",
        etype=None,
        node_feat=feat,
        node_opcode=np.array([63, 75, 2], dtype=np.uint8),
        edge_index=np.array([[1, 0], [2, 1]], dtype=np.int64),
        node_config_ids=np.array([1], dtype=np.int64),
        node_splits=np.array([[0, 3]], dtype=np.int64),
    )


def test_default_search_prefers_the_faster_value_of_the_decisions_that_matter_most(
    monkeypatch,
):
    # The reshape's output and input groups each order dims (1, 0) or (0, 1). By hand
    # (standard constants): (0, 1) pads 100 -> 128 lanes instead of 64 -> 128, saving
    # (13312 - 8192) * 4 B * 0.002 ns = 40.96 ns, but a transpose of 25,600 B costs
    # 0.004 * 25,600 = 102.4 ns, either way: flipping either group alone is 61.44 ns
    # slower. Both effects are the largest, so the preferred value is always (1, 0);
    # with no minority share every row writes it.
    monkeypatch.setattr(decisions, "MIN_MINORITY", 0.0)
    monkeypatch.setattr(decisions, "MAX_MINORITY", 0.0)
    program = _hand_program()
    for seed in range(20):
        feat = decisions.decision_configs(np.random.default_rng(seed), program, 5, "default")
        assert (feat[:, 0, 0:2] == (1, 0)).all() and (feat[:, 0, 6:8] == (1, 0)).all()
        assert (feat[:, 0, 2:6] == -1).all() and (feat[:, 0, 8:] == -1).all()
    flipped = np.full((1, 1, 18), -1, dtype=np.float32)
    flipped[0, 0, :2], flipped[0, 0, 6:8] = (0, 1), (1, 0)
    ns = cost_model.layout_runtime_ns(
        program.node_feat,
        program.node_opcode,
        program.edge_index,
        program.node_config_ids,
        np.concatenate([feat[:1], flipped]),
    )
    assert ns[1] - ns[0] == pytest.approx(102.4 - 40.96)


def test_decision_files_are_deterministic_and_differ_from_permutation_files():
    size = (900, 40)
    _, one = generate_planned_file(0, "xla", "default", "train", 0, size, search_space="decisions")
    _, two = generate_planned_file(0, "xla", "default", "train", 0, size, search_space="decisions")
    _, perm = generate_planned_file(0, "xla", "default", "train", 0, size)
    for key in one:
        assert np.array_equal(one[key], two[key]), key
    assert np.array_equal(one["node_feat"], perm["node_feat"])  # the same program
    assert not np.array_equal(one["node_config_feat"], perm["node_config_feat"])
    assert (one["config_runtime"] > 0).all()
    expected = cost_model.layout_runtime_ns(
        one["node_feat"],
        one["node_opcode"],
        one["edge_index"],
        one["node_config_ids"],
        one["node_config_feat"],
    )
    # Measured with relative noise 1e-4 (log-normal): 6 sigma, plus rounding to 1 ns.
    assert np.all(np.abs(one["config_runtime"] / expected - 1) < 6e-4 + 1 / expected)


def test_an_unknown_search_space_is_refused_in_one_line():
    from baselines.core.errors import PipelineError

    with pytest.raises(PipelineError, match="unknown search space 'free'"):
        generate_planned_file(0, "xla", "default", "train", 0, (900, 5), search_space="free")
