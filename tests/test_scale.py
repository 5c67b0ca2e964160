"""Tests for bench/scale.py's arithmetic and the late-join call plan it motivated."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _load_scale():
    spec = importlib.util.spec_from_file_location("scale", ROOT / "bench" / "scale.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["scale"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


scale = _load_scale()
import bench_common  # noqa: E402  (bench/ is on the path above)


def test_growth_exponent_on_hand_made_numbers():
    assert bench_common.growth_exponent([1, 2, 4, 8], [3, 6, 12, 24]) == pytest.approx(1.0)
    assert bench_common.growth_exponent([1, 2, 4], [5, 20, 80]) == pytest.approx(2.0)
    assert bench_common.growth_exponent([10, 1000], [7, 7]) == pytest.approx(0.0)
    # Not on one line: log2 sizes 0, 1, 2 and log2 values 0, 2, 3 give slope
    # sum((x - 1) * (y - 5/3)) / sum((x - 1)^2) = (5/3 + 0 + 4/3) / 2 = 1.5.
    assert bench_common.growth_exponent([1, 2, 4], [1, 4, 8]) == pytest.approx(1.5)
    # A constant start-up cost bends the curve below linear.
    assert bench_common.growth_exponent([1, 2, 4, 8], [5 + s for s in (1, 2, 4, 8)]) < 0.6
    with pytest.raises(ValueError):
        bench_common.growth_exponent([1], [1])
    with pytest.raises(ValueError):
        bench_common.growth_exponent([2, 2], [1, 3])


def test_growth_exponents_skip_figures_missing_or_not_positive_at_some_size():
    """One k per figure present and positive at every size, none with one size;
    `keep` refuses a figure by its label."""
    tables = [{"a": 2.0, "b": 1.0, "c": 3.0, "d": 5.0}, {"a": 8.0, "b": 0.0, "d": 5.0}]
    k = bench_common.growth_exponents([1, 4], tables)
    assert k == pytest.approx({"a": 1.0, "d": 0.0})  # b is 0 at size 4, c missing there
    assert bench_common.growth_exponents([1, 4], tables, keep=lambda label: label != "a") == {
        "d": pytest.approx(0.0)
    }
    assert bench_common.growth_exponents([1], tables[:1]) == {}


def test_early_join_flops_by_hand():
    """One kernel: 2 ops, 1 edge, 3 configs; hidden 2, 1 layer, 1-wide features, head (2,)."""
    shape = scale.EarlyJoinShape(
        hidden=2, op_embedding=1, layers=1, node_feat=1, config_feat=1, head=(2,)
    )
    flops = scale.early_join_flops(np.array([2]), np.array([3]), np.array([1]), shape)
    # 6 (op, config) states x 1 layer x 2 matmuls (self, neighbour) x 2*2*2 FLOPs.
    assert flops["state_matmuls"] == 6 * 2 * 8 == 96
    # A + A^T has 2 entries; each multiplies 3 configs x 2 hidden columns (2 FLOPs each).
    assert flops["neighbour_sums"] == 2 * 3 * 2 * 2 == 24
    # Per op: encoder 2*(1 + 1)*2 = 8, join_op 2*2*2 = 8; two ops.
    assert flops["per_op"] == 2 * 16 == 32
    # Per config: join_config 2*1*2 = 4, head 2*2*2 + 2*2*1 = 12; three configs.
    assert flops["per_config"] == 3 * 16 == 48
    assert flops["total"] == 96 + 24 + 32 + 48 == 200


def test_early_join_flops_at_the_model_defaults():
    """Two kernels at the defaults (hidden 64, 3 layers): state matmuls dominate."""
    n, c, m = np.array([40, 3]), np.array([1000, 10]), np.array([45, 2])
    flops = scale.early_join_flops(n, c, m)
    pairs = 40 * 1000 + 3 * 10
    assert flops["state_matmuls"] == pairs * 3 * 2 * (2 * 64 * 64)
    assert flops["neighbour_sums"] == (2 * 45 * 1000 + 2 * 2 * 10) * 3 * 2 * 64
    assert flops["per_op"] == 43 * (2 * (64 + 140) * 64 + 2 * 64 * 64)
    assert flops["per_config"] == 1010 * (2 * 24 * 64 + 2 * (64 * 64 + 64 * 64 + 64))
    assert flops["state_matmuls"] / flops["total"] > 0.95
    # Floor in seconds = FLOPs / (GFLOP/s * 1e9): 1 GFLOP at 50 GFLOP/s is 20 ms.
    assert math.isclose(1e9 / (50 * 1e9), 0.02)


def test_train_args_from_a_recipe_flagfile():
    args = scale.train_args_from_flags(
        [f"--flagfile={scale.RECIPES['recommended']}"], epochs=1, data_root="/d"
    )
    assert args.model == "LateJoinGAT" and args.epochs == 1 and args.data_root == "/d"
    assert args.optimizer == "adamw" and args.configs == 64 and args.lr == pytest.approx(2e-3)
    baseline = scale.train_args_from_flags([f"--flagfile={scale.RECIPES['EarlyJoinSAGE']}"])
    assert baseline.model == "EarlyJoinSAGE" and baseline.epochs == 100


def test_late_join_plan_cuts_kernels_by_configs_only():
    from baselines.tiles.predict import plan_calls

    rng = np.random.default_rng(0)
    num_configs = np.concatenate([rng.integers(1, 3000, 200), [20_000]])
    num_nodes = np.concatenate([rng.integers(2, 400, 200), [300]])
    early = plan_calls(num_configs, num_nodes, max_elements=20_000, max_configs=1000)
    late = plan_calls(
        num_configs, num_nodes, max_elements=20_000, max_configs=1000, early_join=False
    )
    covered = [np.zeros(c, int) for c in num_configs]
    for call in late:
        assert len(call.ranges) * call.slots <= 1000
        nodes = sum(int(num_nodes[i]) for i, _, _ in call.ranges)
        assert nodes <= 20_000 or len(call.ranges) == 1
        for i, start, stop in call.ranges:
            assert 0 < stop - start <= call.slots
            covered[i][start:stop] += 1
    assert all(np.all(c == 1) for c in covered)
    # The 20,000-config kernel of 300 ops: chunks of 1000 configs, not of 20000 // 300 = 66.
    assert sum(1 for call in late if call.ranges[0][0] == 200) == 20
    assert sum(1 for call in early if call.ranges[0][0] == 200) == math.ceil(20_000 / 66)
    assert len(late) < len(early)


@pytest.mark.parametrize(
    "k, verdict",
    [
        ({"cold load s (3 splits)": 1.0, "EarlyJoinSAGE arithmetic floor s": 1.5}, "met"),
        ({"cold load s (3 splits)": 1.3, "EarlyJoinSAGE test prediction GFLOP": 1.0}, "MISSED"),
    ],
)
def test_growth_target_holds_costs_not_reference_rows(k, verdict):
    rows = {label: (measured, v) for label, measured, v in scale.targets({}, k)}
    ((measured, got),) = [v for label, v in rows.items() if label.startswith("nothing grows")]
    assert got == verdict and "cold load s" in measured


@pytest.mark.parametrize(
    "epoch, wall, verdicts",
    [(8.9, 14 * 60, ("met", "met")), (9.1, 16 * 60, ("MISSED", "MISSED"))],
)
def test_speed_targets_read_the_steady_epoch_and_the_full_training(epoch, wall, verdicts):
    train = {"peak_rss_mb": 1000.0, "steady_epoch_s": epoch}
    full = {
        "train": {"recommended": train},
        "predict": {},
        "steps": {"floor_epoch_s": epoch / 2},
        "full_training": {"wall_s": wall, "epochs_run": 90, "val_top5_err": 0.01},
    }
    rows = {label: (measured, v) for label, measured, v in scale.targets({"full": full}, {})}
    (steady,) = [v for label, v in rows.items() if "steady-state epoch" in label]
    (training,) = [v for label, v in rows.items() if "full training" in label]
    assert steady == (f"{epoch:.1f} s (2.0x its arithmetic floor {epoch / 2:.1f} s)", verdicts[0])
    assert training[1] == verdicts[1] and f"{wall / 60:.1f} min" in training[0]


def test_threads_bench_compares_tensorflows_choice_with_the_project_setting():
    import threads  # bench/threads.py

    assert threads.settings(2) == {
        "tensorflow": {"TF_NUM_INTRAOP_THREADS": "0", "TF_NUM_INTEROP_THREADS": "0"},
        "project": {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2"},
    }
    assert threads.settings(8)["project"] == {}  # nothing set on larger machines
    rounds = [
        {"tensorflow": {"epoch": 20.0, "rank": 3.0}, "project": {"epoch": 17.0, "rank": None}},
        {"tensorflow": {"epoch": 22.0, "rank": 2.0}, "project": {"epoch": 18.0, "rank": 2.5}},
        {"tensorflow": {"epoch": 30.0, "rank": 4.0}, "project": {"epoch": 16.0, "rank": 1.5}},
    ]
    summary = threads.summarize(rounds)
    # Medians by hand: epoch 22 and 17; rank 3 and median(2.5, 1.5) = 2 (None skipped).
    assert summary["epoch"] == pytest.approx(
        {"tensorflow": 22.0, "project": 17.0, "ratio": 17 / 22}
    )
    assert summary["rank"] == pytest.approx({"tensorflow": 3.0, "project": 2.0, "ratio": 2 / 3})
