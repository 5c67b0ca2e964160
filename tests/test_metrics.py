"""Losses and metrics: loss-spec parsing, OPA against TF-Ranking, top-K error."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_ranking as tfr

from baselines.tiles import metrics
from baselines.tiles.errors import PipelineError


def test_pair_counts_match_tf_ranking_opa_with_padding():
    rng = np.random.default_rng(0)
    runtimes = rng.uniform(0.5, 3.0, size=(6, 8)).astype(np.float32)
    runtimes[2, 5:] = -1.0  # padding slots
    runtimes[4, 1] = runtimes[4, 0]  # a tie: not a comparable pair
    scores = rng.normal(size=(6, 8)).astype(np.float32)
    correct, pairs = metrics.pair_counts(tf.constant(runtimes), tf.constant(scores))
    opa = tfr.keras.metrics.OPAMetric()
    opa.update_state(metrics.ranking_labels(tf.constant(runtimes)), -tf.constant(scores))
    np.testing.assert_allclose(float(correct / pairs), float(opa.result()), rtol=1e-6)
    assert 0 < float(pairs) < 6 * 28


def test_listmle_prefers_the_right_order_and_ignores_padding():
    loss = metrics.make_loss_fn(metrics.parse_losses("ListMLELoss:1"))
    runtimes = tf.constant([[1.0, 2.0, 3.0, -1.0]])
    good = loss(runtimes, tf.constant([[0.0, 1.0, 2.0, 50.0]]))
    bad = loss(runtimes, tf.constant([[2.0, 1.0, 0.0, 50.0]]))
    assert float(good) < float(bad)
    moved_pad = loss(runtimes, tf.constant([[0.0, 1.0, 2.0, -50.0]]))
    np.testing.assert_allclose(float(moved_pad), float(good), rtol=1e-5)


@pytest.mark.parametrize("spec", ["ListMLE:1", "MSE", "MSE:-1", "MSE:nan", ""])
def test_bad_loss_specs_are_refused(spec):
    with pytest.raises(PipelineError, match="--losses"):
        metrics.parse_losses(spec)


def test_loss_spec_parses_weights():
    assert metrics.parse_losses("ListMLELoss:1,MSE:0.02") == (("ListMLELoss", 1.0), ("MSE", 0.02))


def test_top_k_error_and_top_configs():
    runtimes = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 8.0])
    scores = np.array([0.0, 9.0, 1.0, 2.0, 3.0, 4.0])  # best config ranked 6th
    assert metrics.top_k_error(scores, runtimes, 1) == pytest.approx(4.0)
    assert metrics.top_k_error(scores, runtimes, 5) == pytest.approx(1.0)
    assert metrics.top_k_error(scores, runtimes, 10) == 0.0
    assert metrics.top_configs(scores, 5) == [0, 2, 3, 4, 5]
    assert metrics.top_configs(np.array([1.0, 0.0]), 5) == [1, 0]  # no padding
    summary = metrics.summarize(["a_1", "b_2"], [scores, runtimes], [runtimes, runtimes])
    assert summary["5"] == pytest.approx((1.0 + 0.0) / 2)  # second kernel ranked perfectly
    assert summary["kaggle_score"] == pytest.approx(1 - summary["5"])
    assert metrics.program_of("resnet50.4x4.fp16_-3f2a") == "resnet50.4x4.fp16"
