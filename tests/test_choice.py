"""The job's choice of each collection's option on validation (baselines/jobs/choice.py).

Every expectation is worked out by hand from the figures given here.
"""

from __future__ import annotations

import math

import pytest

from baselines.jobs.choice import BLEND, choose, option_names, paired

ITEMS = ("a", "b", "c", "d")


def figures(values) -> dict[str, float]:
    return dict(zip(ITEMS, values))


def test_paired_difference_and_its_standard_error_by_hand():
    # differences 0.10, 0.12, 0.08, 0.10: mean 0.10; squared deviations 0, 4e-4, 4e-4, 0
    # sum to 8e-4; sample variance 8e-4 / 3; standard error sqrt(8e-4 / 3) / 2 = 0.0081650
    diff, se, n = paired(figures([0.6, 0.52, 0.38, 0.5]), figures([0.5, 0.4, 0.3, 0.4]))
    assert n == 4
    assert diff == pytest.approx(0.10, abs=1e-12)
    assert se == pytest.approx(math.sqrt(8e-4 / 3) / 2, rel=1e-9)


def test_an_option_better_on_every_item_beyond_the_noise_is_chosen():
    per_item = {
        "recommended": figures([0.5, 0.4, 0.3, 0.4]),
        "baseline": figures([0.6, 0.52, 0.38, 0.5]),  # +0.10 +- 0.0082: 12 standard errors
    }
    choice = choose(per_item)
    assert choice.chosen == "baseline"
    assert "baseline beats recommended" in choice.reason and "+0.1000" in choice.reason


def test_a_worse_option_is_never_chosen():
    per_item = {
        "recommended": figures([0.6, 0.52, 0.38, 0.5]),
        "baseline": figures([0.5, 0.4, 0.3, 0.4]),  # -0.10 on every item
    }
    choice = choose(per_item)
    assert choice.chosen == "recommended"
    assert "recommended beats every other option" in choice.reason


def test_a_higher_mean_within_the_noise_keeps_the_default_and_says_so():
    # differences +0.30, -0.25, +0.20, -0.15: mean +0.025, far inside 2 standard errors
    # (sample std 0.2598, standard error 0.1299)
    per_item = {
        "recommended": figures([0.5, 0.5, 0.5, 0.5]),
        "baseline": figures([0.8, 0.25, 0.7, 0.35]),
    }
    choice = choose(per_item)
    assert choice.chosen == "recommended"
    assert "cannot separate baseline from it" in choice.reason
    (baseline,) = [c for c in choice.comparisons if c.option == "baseline"]
    assert baseline.diff == pytest.approx(0.025, abs=1e-12)
    assert baseline.mean > 0.5  # its mean is higher, and still not chosen


def test_of_several_options_beyond_the_noise_the_largest_difference_wins():
    per_item = {
        "recommended": figures([0.5, 0.4, 0.3, 0.4]),
        "baseline": figures([0.6, 0.52, 0.38, 0.5]),  # +0.10
        BLEND: figures([0.7, 0.62, 0.48, 0.6]),  # +0.20, the same spread
    }
    assert choose(per_item).chosen == BLEND


def test_items_without_a_figure_are_left_out_of_the_pairs():
    per_item = {
        "recommended": figures([0.5, 0.4, float("nan"), 0.4]),
        "baseline": figures([0.6, 0.52, 0.9, 0.5]),
    }
    _, _, n = paired(per_item["baseline"], per_item["recommended"])
    assert n == 3
    assert choose({"recommended": {"a": 0.1}, "baseline": {"a": 0.9}}).chosen == "recommended"


def test_options_are_the_candidates_then_their_blend():
    assert option_names(["baseline", "recommended"]) == ["baseline", "recommended", BLEND]
    assert option_names(["recommended"]) == ["recommended"]


def test_one_candidate_is_kept_and_named_the_only_option():
    choice = choose({"recommended": figures([0.5, 0.6])})
    assert choice.chosen == "recommended" and choice.reason == "recommended is the only option"
