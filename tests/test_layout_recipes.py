"""The shipped layout recipes (configs/layout/*.flags) and what a recipe hands to training."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from baselines.layout.layout_args import LayoutTrainArgs

RECIPES = Path(__file__).resolve().parents[1] / "configs" / "layout"


@pytest.mark.parametrize("name", ["baseline", "recommended"])
def test_layout_recipes_parse_and_validate(name):
    import layout_train

    args = layout_train.parse_args([f"--flagfile={RECIPES / f'{name}.flags'}", "--seed=2"])
    args.check_flags()
    assert args.seed == 2


def test_baseline_recipe_is_upstreams_defaults_on_whole_graphs():
    import layout_train

    args = layout_train.parse_args([f"--flagfile={RECIPES / 'baseline.flags'}"])
    upstream = dict(
        model="ResModel", epochs=50, early_stop=25, configs=16, batch=8, lr=1e-3,
        clip_norm=1e-2, keep_nodes=5000, losses="ListMLELoss:1", max_configs=None,
    )  # fmt: skip
    # Passes of one graph: the same update as the batch of 8 (tests/test_gradient_passes.py).
    assert args.micro_batch == 1
    for key, value in upstream.items():
        assert getattr(args, key) == value, key
    assert args.prune_hops is None and args.drop_duplicates is False


def test_split_kwargs_name_every_parameter_of_reading_a_run_split():
    """A run reads its splits with split_kwargs(): a reading parameter missing there would
    silently keep its default."""
    from baselines.layout.run_data import load_run_split

    args = LayoutTrainArgs()
    split = set(inspect.signature(load_run_split).parameters) - {"folder", "training", "log"}
    assert set(args.split_kwargs()) == split


ABLATION = sorted(p.stem for p in (RECIPES / "ablation").glob("*.flags"))


@pytest.mark.parametrize("name", ABLATION)
def test_layout_ablation_variants_change_one_flag_of_the_recommended_recipe(name):
    """bench/layout_quality.py --ablation measures what each flag bought: every variant
    is the recommended recipe with exactly one flag changed."""
    import layout_train

    variant = layout_train.parse_args([f"--flagfile={RECIPES / 'ablation' / f'{name}.flags'}"])
    variant.check_flags()
    recommended = layout_train.parse_args([f"--flagfile={RECIPES / 'recommended.flags'}"])
    changed = {
        k for k, v in variant.to_dict().items() if recommended.to_dict()[k] != v
    }  # fmt: skip
    assert len(changed) == 1, changed
