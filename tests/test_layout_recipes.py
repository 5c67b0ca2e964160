"""The shipped layout recipes (configs/layout/*.flags) and what a recipe hands to training."""

from __future__ import annotations

import dataclasses
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
    for key, value in upstream.items():
        assert getattr(args, key) == value, key
    assert args.prune_hops is None and args.drop_duplicates is False


def test_train_kwargs_name_every_training_parameter_but_where_and_how_it_runs():
    """bench/layout_toy.py passes train_kwargs() to train_layout, which makes its
    LayoutTrainArgs from them: a training flag missing there would silently keep
    its default. Every field not listed below (what the data, the model and the
    files are, all read before training) must come through."""
    from baselines.layout.run_data import load_run_split

    not_training = {
        "source", "search", "model", "model_kwargs_json", "data_root", "toy_data",
        "out_dir", "cache_dir", "max_configs", "prune_hops", "drop_duplicates",
    }  # fmt: skip
    defaults = LayoutTrainArgs()
    changed = {}
    for field in dataclasses.fields(LayoutTrainArgs):
        value = getattr(defaults, field.name)
        if field.name in not_training:
            continue
        if isinstance(value, bool):
            changed[field.name] = not value
        elif isinstance(value, (int, float)) or value is None:
            changed[field.name] = (value or 0) + 3
        else:
            changed[field.name] = value + ",MSE:1"
    args = LayoutTrainArgs(**changed)
    assert LayoutTrainArgs(**args.train_kwargs()) == args
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
