"""Losses and metrics: loss-spec parsing, OPA against TF-Ranking, top-K error."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_ranking as tfr

from baselines.core import metrics
from baselines.core.errors import PipelineError


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


# --- losses: independent formulas and masking ------------------------------------------

LOSS_NAMES = ["ListMLELoss", "PListMLELoss", "PairwiseHingeLoss", "MSE"]


def loss_and_gradient(name, runtimes, scores):
    loss_fn = metrics.make_loss_fn([(name, 1.0)])
    scores = tf.Variable(np.asarray(scores, np.float32))
    with tf.GradientTape() as tape:
        loss = loss_fn(tf.constant(runtimes, tf.float32), scores)
    return float(loss), tape.gradient(loss, scores).numpy()


def numpy_listmle(runtimes, scores, temperature=10.0):  # the baseline's ListMLE: temperature 10
    """Plackett-Luce negative log-likelihood of the true order (fastest first)."""
    order = sorted(range(len(runtimes)), key=lambda i: runtimes[i])
    z = [-scores[i] / temperature for i in order]  # higher logit = predicted faster
    return sum(np.log(np.sum(np.exp(z[i:]))) - z[i] for i in range(len(z)))


def test_listmle_matches_the_plackett_luce_formula():
    rng = np.random.default_rng(7)
    runtimes = rng.permutation(np.linspace(0.5, 3.0, 8))[None, :]
    scores = rng.normal(scale=5.0, size=(1, 8))
    loss, _ = loss_and_gradient("ListMLELoss", runtimes, scores)
    assert loss == pytest.approx(numpy_listmle(runtimes[0], scores[0]), rel=1e-5)
    # A batch is the mean over its lists.
    two = np.concatenate([runtimes, runtimes[:, ::-1]]), np.concatenate([scores, scores])
    batch_loss, _ = loss_and_gradient("ListMLELoss", *two)
    want = (numpy_listmle(two[0][0], two[1][0]) + numpy_listmle(two[0][1], two[1][1])) / 2
    assert batch_loss == pytest.approx(want, rel=1e-5)


def numpy_position_weighted_listmle(runtimes, scores, temperature=10.0):
    """Position-aware ListMLE: term i weighted by 1/log2(i + 2), weights summing to n."""
    order = sorted(range(len(runtimes)), key=lambda i: runtimes[i])
    z = [-scores[i] / temperature for i in order]
    w = np.array([1.0 / np.log2(i + 2.0) for i in range(len(z))])
    w *= len(z) / w.sum()
    return sum(w[i] * (np.log(np.sum(np.exp(z[i:]))) - z[i]) for i in range(len(z)))


def test_position_weighted_listmle_matches_its_formula_and_ignores_padding():
    rng = np.random.default_rng(3)
    runtimes = rng.permutation(np.linspace(0.5, 3.0, 6))
    scores = rng.normal(scale=5.0, size=6)
    padded_runtimes = np.concatenate([runtimes, [-1.0, -1.0]])[None, :]
    padded_scores = np.concatenate([scores, [40.0, -40.0]])[None, :]
    loss, grad = loss_and_gradient("PListMLELoss", padded_runtimes, padded_scores)
    assert loss == pytest.approx(numpy_position_weighted_listmle(runtimes, scores), rel=1e-5)
    assert np.all(grad[0, 6:] == 0.0)
    # Misplacing the fastest config costs more than misplacing the slowest one by as much.
    good = np.argsort(np.argsort(runtimes)).astype(float) * 10.0  # true order (lower = faster)
    top_wrong, tail_wrong = good.copy(), good.copy()
    fastest, second = np.argsort(runtimes)[:2]
    slowest, before = np.argsort(runtimes)[::-1][:2]
    top_wrong[[fastest, second]] = top_wrong[[second, fastest]]
    tail_wrong[[slowest, before]] = tail_wrong[[before, slowest]]
    swap_top = loss_and_gradient("PListMLELoss", runtimes[None], top_wrong[None])[0]
    swap_tail = loss_and_gradient("PListMLELoss", runtimes[None], tail_wrong[None])[0]
    assert swap_top > swap_tail
    plain_top = loss_and_gradient("ListMLELoss", runtimes[None], top_wrong[None])[0]
    plain_tail = loss_and_gradient("ListMLELoss", runtimes[None], tail_wrong[None])[0]
    assert swap_top - swap_tail > plain_top - plain_tail


def test_position_weighted_listmle_weights_each_list_by_its_own_length():
    # The recommended recipe's loss: batches mix kernels with fewer real
    # configs than slots (padding), and each list's weights sum to its own
    # count of real configs, whatever the other lists hold.
    rng = np.random.default_rng(11)
    long_runtimes = rng.permutation(np.linspace(0.5, 4.0, 7))
    short_runtimes = rng.permutation(np.linspace(1.0, 2.0, 3))
    long_scores, short_scores = rng.normal(scale=4.0, size=7), rng.normal(scale=4.0, size=3)
    runtimes = np.stack([long_runtimes, np.concatenate([short_runtimes, [-1.0] * 4])])
    scores = np.stack([long_scores, np.concatenate([short_scores, [9.0, -9.0, 3.0, 0.0]])])
    loss, _ = loss_and_gradient("PListMLELoss", runtimes, scores)
    expected = np.mean(
        [
            numpy_position_weighted_listmle(long_runtimes, long_scores),
            numpy_position_weighted_listmle(short_runtimes, short_scores),
        ]
    )
    assert loss == pytest.approx(expected, rel=1e-5)


def test_pairwise_hinge_matches_its_formula():
    runtimes = np.array([[1.0, 3.0, 2.0, 4.0]])
    scores = np.array([[0.2, 0.1, 1.5, -0.3]])
    loss, _ = loss_and_gradient("PairwiseHingeLoss", runtimes, scores)
    total = sum(
        max(0.0, 1.0 - (scores[0, j] - scores[0, i]))
        for i in range(4)
        for j in range(4)
        if runtimes[0, i] < runtimes[0, j]
    )
    assert loss == pytest.approx(total / 4, rel=1e-5)  # TF-Ranking divides by the list size


def test_mse_is_the_mean_over_real_slots():
    runtimes = np.array([[1.0, 2.0, -1.0], [0.5, -1.0, -1.0]])
    scores = np.array([[1.5, 0.0, 100.0], [1.5, 7.0, -9.0]])
    loss, _ = loss_and_gradient("MSE", runtimes, scores)
    assert loss == pytest.approx((0.25 + 4.0 + 1.0) / 3, rel=1e-6)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_padding_scores_never_change_a_loss(name):
    rng = np.random.default_rng(1)
    runtimes = rng.uniform(0.5, 3.0, size=(3, 7))
    runtimes[0, 5:] = -1.0
    runtimes[2, 2:] = -1.0
    pad = runtimes < 0
    scores = rng.normal(size=(3, 7))
    loss, grad = loss_and_gradient(name, runtimes, scores)
    assert np.all(grad[pad] == 0) and np.any(grad[~pad] != 0)
    for value in (-50.0, 0.0, 50.0):
        moved = np.where(pad, value + rng.normal(size=pad.shape), scores)
        moved_loss, moved_grad = loss_and_gradient(name, runtimes, moved)
        assert moved_loss == pytest.approx(loss, rel=1e-6, abs=1e-6)
        np.testing.assert_allclose(moved_grad, grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_a_padded_list_trains_like_the_same_list_unpadded(name):
    """Same gradient direction on the real slots as the list without its padding.

    (TF-Ranking divides the hinge loss by the padded list size, which does not
    change what is learnt.)
    """
    runtimes = np.array([[2.0, 0.5, 1.5, 3.0, 1.0]])
    scores = np.array([[0.3, -0.2, 0.9, 0.1, 0.4]])
    _, short = loss_and_gradient(name, runtimes, scores)
    padded_runtimes = np.concatenate([runtimes, [[-1.0, -1.0, -1.0]]], 1)
    padded_scores = np.concatenate([scores, [[-4.0, 0.0, 4.0]]], 1)
    _, padded = loss_and_gradient(name, padded_runtimes, padded_scores)
    padded = padded[:, :5]
    cosine = np.sum(short * padded) / np.linalg.norm(short) / np.linalg.norm(padded)
    assert cosine == pytest.approx(1.0, abs=1e-5)


# --- metrics against plain Python ------------------------------------------------------


def py_ranking(scores):
    """Indices by ascending score; equal scores keep file order (Python's sort is stable)."""
    return sorted(range(len(scores)), key=lambda i: scores[i])


def py_top_k_error(scores, runtimes, k):
    picked = py_ranking(scores)[:k]
    return min(runtimes[i] for i in picked) / min(runtimes) - 1


def py_pairs(scores, runtimes):
    correct = comparable = 0
    for i in range(len(scores)):
        for j in range(len(scores)):
            if runtimes[i] < runtimes[j]:
                comparable += 1
                correct += scores[i] < scores[j]
    return correct, comparable


HAND_MADE = {
    # name: (scores, runtimes)
    "fewer_configs_than_k": ([0.3, 0.1, 0.2], [2.0, 3.0, 1.0]),
    "one_config": ([5.0], [1.0]),
    "score_ties": ([1.0, 0.0, 0.0, 1.0, 0.0, 2.0, 3.0], [1.0, 4.0, 3.0, 2.0, 5.0, 0.9, 0.8]),
    "runtime_ties": ([0.1, 0.2, 0.3, 0.4], [2.0, 1.0, 1.0, 2.0]),
    # the same config measured twice (ids 0 and 3: same features, same score)
    "repeated_config": ([0.5, 0.1, 0.9, 0.5, 0.7, 0.2], [1.02, 1.5, 1.3, 1.0, 1.1, 2.0]),
}


@pytest.mark.parametrize("case", list(HAND_MADE))
@pytest.mark.parametrize("pairwise_max", [metrics.PAIRWISE_OPA_MAX_CONFIGS, 0])
def test_per_kernel_metrics_match_plain_python(case, pairwise_max, monkeypatch):
    # pairwise_max 0: kernel_opa counts by merging even for these small kernels.
    monkeypatch.setattr(metrics, "PAIRWISE_OPA_MAX_CONFIGS", pairwise_max)
    scores, runtimes = (np.array(x) for x in HAND_MADE[case])
    for k in (1, 5, 10):
        assert metrics.top_k_error(scores, runtimes, k) == pytest.approx(
            py_top_k_error(list(scores), list(runtimes), k)
        )
    assert metrics.kernel_opa(scores, runtimes) == py_pairs(list(scores), list(runtimes))
    assert metrics.top_configs(scores, 5) == py_ranking(list(scores))[:5]


def numpy_pairs(scores: np.ndarray, runtimes: np.ndarray) -> tuple[int, int]:
    """All pairs compared, 500 rows at a time (the test's own O(c^2) count)."""
    correct = comparable = 0
    for start in range(0, len(scores), 500):
        faster = runtimes[start : start + 500, None] < runtimes[None, :]
        comparable += int(faster.sum())
        correct += int((faster & (scores[start : start + 500, None] < scores[None, :])).sum())
    return correct, comparable


@pytest.mark.parametrize("distinct", [5, 300, 10**6])
def test_opa_of_a_large_kernel_counts_every_pair(distinct):
    """Kernels past PAIRWISE_OPA_MAX_CONFIGS, with many or few runtime and score ties."""
    rng = np.random.default_rng(distinct)
    c = metrics.PAIRWISE_OPA_MAX_CONFIGS + 1 + int(rng.integers(0, 3000))
    runtimes = rng.integers(0, distinct, c).astype(np.float64)
    scores = rng.integers(0, distinct, c).astype(np.float32)
    assert metrics.kernel_opa(scores, runtimes) == numpy_pairs(scores, runtimes)


def test_hand_computed_values():
    # score_ties, by hand: ascending scores with ties in file order: 1, 2, 4, 0, 3, 5, 6.
    scores, runtimes = (np.array(x) for x in HAND_MADE["score_ties"])
    assert metrics.top_configs(scores, 5) == [1, 2, 4, 0, 3]
    assert metrics.top_k_error(scores, runtimes, 1) == pytest.approx(4.0 / 0.8 - 1)
    assert metrics.top_k_error(scores, runtimes, 5) == pytest.approx(1.0 / 0.8 - 1)
    assert metrics.top_k_error(scores, runtimes, 10) == 0.0
    # runtime_ties: comparable pairs (faster first) 1<0, 1<3, 2<0, 2<3; equal runtimes
    # are not compared. Scores 0.1 0.2 0.3 0.4 order 1<3 and 2<3 right, 1<0 and 2<0 wrong.
    assert metrics.kernel_opa(*(np.array(x) for x in HAND_MADE["runtime_ties"])) == (2, 4)
    # fewer_configs_than_k: every config listed once, no padding index.
    assert metrics.top_configs(np.array([0.3, 0.1, 0.2]), 5) == [1, 2, 0]


def test_summaries_overall_and_per_program_match_plain_python():
    rng = np.random.default_rng(11)
    ids, scores, runtimes = [], [], []
    for i in range(40):
        c = int(rng.integers(1, 30))
        ids.append(f"net_v{i % 3}_train_{i:04x}")  # program names hold "_" too
        runtimes.append(rng.uniform(0.5, 4.0, c).round(1))  # rounding makes runtime ties
        scores.append(rng.normal(size=c).round(1))  # and score ties
    summary = metrics.summarize(ids, scores, runtimes)
    by_program = metrics.summarize_by_program(ids, scores, runtimes)

    def expected(idx):
        out = {
            str(k): float(np.mean([py_top_k_error(scores[i], runtimes[i], k) for i in idx]))
            for k in (1, 5, 10)
        }
        pairs = [py_pairs(list(scores[i]), list(runtimes[i])) for i in idx]
        out["opa"] = sum(c for c, _ in pairs) / sum(p for _, p in pairs)  # pooled over pairs
        out["kaggle_score"] = float(
            np.mean([2 - (py_top_k_error(scores[i], runtimes[i], 5) + 1) for i in idx])
        )
        out["kernels"] = len(idx)
        return out

    for key, value in expected(range(40)).items():
        assert summary[key] == pytest.approx(value), key
    assert set(by_program) == {"net_v0_train", "net_v1_train", "net_v2_train"}
    for p in range(3):
        want = expected([i for i in range(40) if i % 3 == p])
        for key, value in want.items():
            assert by_program[f"net_v{p}_train"][key] == pytest.approx(value), (p, key)


def test_pair_counts_match_plain_python_with_padding():
    rng = np.random.default_rng(5)
    runtimes = rng.uniform(0.5, 2.0, size=(4, 6)).round(1).astype(np.float32)
    runtimes[1, 3:] = -1.0
    scores = rng.normal(size=(4, 6)).round(1).astype(np.float32)
    correct, pairs = metrics.pair_counts(tf.constant(runtimes), tf.constant(scores))
    want = [py_pairs(list(s[r >= 0]), list(r[r >= 0])) for s, r in zip(scores, runtimes)]
    assert (float(correct), float(pairs)) == (sum(c for c, _ in want), sum(p for _, p in want))


def stable_numpy_listmle(runtimes, scores, temperature=10.0):
    """numpy_listmle with log-sum-exp taken in float64 without overflow or underflow."""
    order = sorted(range(len(runtimes)), key=lambda i: runtimes[i])
    z = np.array([-scores[i] / temperature for i in order], np.float64)
    return sum(np.logaddexp.reduce(z[i:]) - z[i] for i in range(len(z)))


@pytest.mark.parametrize("far", [-700.0, 700.0, -5000.0, 5000.0])
def test_listmle_stays_exact_for_scores_far_apart(far):
    """A config scored far from the rest (with padding) gives a finite, exact loss.

    TF-Ranking's ListMLE returned -inf here (log of an underflowed
    exp(-23 - max) on the padding slot), which made a training run NaN.
    """
    runtimes = np.array([[1.0, 2.0, 3.0, 0.5, -1.0, -1.0]])
    scores = np.array([[0.3, 1.0, -2.0, far, 0.0, 0.0]])
    loss, grad = loss_and_gradient("ListMLELoss", runtimes, scores)
    want = stable_numpy_listmle(runtimes[0, :4], scores[0, :4])
    assert np.isfinite(loss) and np.all(np.isfinite(grad))
    assert loss == pytest.approx(want, rel=1e-5)
    # Shifting every score by a constant changes nothing (the loss is shift invariant).
    shifted_loss, shifted_grad = loss_and_gradient("ListMLELoss", runtimes, scores + 500.0)
    assert shifted_loss == pytest.approx(loss, rel=1e-5)
    np.testing.assert_allclose(shifted_grad, grad, rtol=1e-4, atol=1e-6)


def test_listmle_is_finite_with_its_gradient_for_any_score_spread():
    runtimes = np.array([[1.0, 2.0, 3.0, 0.5, -1.0]])
    scores = np.array([[0.3, 1.0, -2.0, 1e6, 0.0]])  # the fastest, scored absurdly slow
    loss, grad = loss_and_gradient("ListMLELoss", runtimes, scores)
    assert loss == pytest.approx(stable_numpy_listmle(runtimes[0, :4], scores[0, :4]), rel=1e-5)
    assert np.all(np.isfinite(grad)) and grad[0, 3] > 0 and grad[0, 4] == 0


def test_batch_top_k_errors_match_the_per_kernel_formula_with_padding():
    """The per-epoch top-K error of a [b, K] batch: each list's real slots alone."""
    rng = np.random.default_rng(3)
    lists, real = 6, [1, 2, 5, 9, 12, 12]
    runtimes = np.full((lists, 12), -1.0, np.float32)
    scores = rng.normal(size=(lists, 12)).astype(np.float32) * 5
    for i, n in enumerate(real):
        runtimes[i, :n] = rng.uniform(1.0, 4.0, n)
    # A padding slot with the best score must never be picked.
    scores[1, 11] = -100.0
    for k in (1, 5, 10):
        got = metrics.batch_top_k_errors(tf.constant(runtimes), tf.constant(scores), k).numpy()
        for i, n in enumerate(real):
            r, s = runtimes[i, :n].astype(np.float64), scores[i, :n]
            picked = min(r[j] for j in sorted(range(n), key=lambda j: (s[j], j))[:k])
            assert got[i] == pytest.approx(picked / r.min() - 1.0, rel=1e-6), (k, i)
    # A list without a real slot (or all runtimes 0, hidden labels) counts 0.
    empty = metrics.batch_top_k_errors(tf.fill([1, 3], -1.0), tf.zeros([1, 3]), 1).numpy()
    zeros = metrics.batch_top_k_errors(tf.zeros([1, 3]), tf.range(3.0)[None], 1).numpy()
    assert empty.tolist() == [0.0] and zeros.tolist() == [0.0]
