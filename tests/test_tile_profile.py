"""bench/tile_profile.py's table: per-step figures scaled to an epoch, the floor's label,
from hand-made part results (the parts themselves need a release-size set)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_bench():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "tile_profile", ROOT / "bench" / "tile_profile.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def profile() -> dict:
    steps = {
        "assemble_ms": 1.0,
        "forward_ms": 8.0,
        "backward_ms": 18.0,
        "update_ms": 20.0,
        "train_step_ms": 21.0,
        "kernel_part_ms": 15.0,
        "looped_step_ms": 19.0,
        "gflop_per_step": 0.9,
        "kernel_gflop_per_step": 0.585,
        "configs_per_step": 512,
        "steps_per_epoch": 714,
        "matmul_gflops": 160.0,
        "floor_epoch_s": 0.9 * 714 / 160.0,
    }
    train = {
        "load_s": 20.0,
        "first_epoch_s": 26.0,
        "steady_epoch_s": 17.0,
        "val_s": 0.8,
        "callbacks_s": 0.1,
        "val_ranking_s": 5.5,
        "test_ranking_s": 3.6,
    }
    predict = {"wall_s": 8.0, "ranking_s": 3.0, "configs": 1_000_000, "scoring_gflop": 192.0}
    return {"import_s": 2.2, "train": train, "steps": steps, "predict": predict}


def test_rows_scale_steps_to_an_epoch_and_name_the_per_kernel_share():
    rows = {stage: seconds for stage, seconds, _ in load_bench().rows(profile())}
    # 15 ms a step x 714 steps = 10.71 s an epoch; 0.585 of 0.9 GFLOP = 65%.
    assert rows["step: forward + backward, 1 configuration per kernel (the per-kernel part)"] == (
        "10.7"
    )
    floor = [stage for stage in rows if stage.startswith("arithmetic floor")]
    assert floor == ["arithmetic floor: 0.64 TFLOP (65% per-kernel part) at 160 GFLOP/s"]
    assert rows[floor[0]] == "4.02"  # 0.9 GFLOP x 714 / 160 GFLOP/s
    assert rows["step: forward + backward"] == "12.9"  # 18 ms x 714
