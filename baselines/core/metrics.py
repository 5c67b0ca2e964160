"""Ranking losses (TF, per batch of [b, k] scores) and ranking metrics (numpy, per kernel).
Lower score = predicted faster; runtime / normalizer, -1 for padding (ignored everywhere)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from baselines.core.errors import PipelineError
from baselines.core.loss_spec import parse_losses  # noqa: F401 (re-exported)
from baselines.core.ranking import ranking_order

LISTMLE_TEMPERATURE = 10.0
TOP_KS = (1, 5, 10)


def ranking_labels(runtimes: tf.Tensor) -> tf.Tensor:
    """TF-Ranking labels: 1 / (1 + runtime), larger for faster; -1 (missing) for padding."""
    valid = runtimes >= 0
    return tf.where(valid, 1.0 / (1.0 + tf.maximum(runtimes, 0.0)), -1.0)


def _masked_mse(runtimes: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
    valid = tf.cast(runtimes >= 0, scores.dtype)
    sq = tf.square(scores - runtimes) * valid
    return tf.reduce_sum(sq) / tf.maximum(tf.reduce_sum(valid), 1.0)


def _ranking_loss(loss: tf.keras.losses.Loss) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    # Averaged here: Keras refuses its default reduction inside a tf.distribute replica.
    return lambda runtimes, scores: tf.reduce_mean(loss(ranking_labels(runtimes), -scores))


# Stands in for the logits of padding slots: exp() of it minus any real logit is 0.
_PADDING_LOGIT = -1e9


def listmle_loss(
    runtimes: tf.Tensor,
    scores: tf.Tensor,
    temperature: float = LISTMLE_TEMPERATURE,
    position_weighted: bool = False,
) -> tf.Tensor:
    """ListMLE: mean over lists of the Plackett-Luce NLL of the true order. Per list, real configs
    sorted fastest first (ties in list order), z = -score / temperature:
    sum_i logsumexp(z[i:]) - z[i]; padding (runtime < 0) takes no part. `position_weighted`
    (PListMLELoss, Lan et al. 2014): the term of true position i (0 = fastest) is weighted
    1 / log2(i + 2), rescaled so a list's n weights sum to n."""
    valid = runtimes >= 0
    order = tf.argsort(
        tf.where(valid, runtimes, tf.fill(tf.shape(runtimes), runtimes.dtype.max)),
        axis=1,
        stable=True,
    )
    logits = tf.gather(-scores / temperature, order, batch_dims=1)
    valid = tf.gather(valid, order, batch_dims=1)
    padded = tf.where(
        valid, logits, tf.fill(tf.shape(logits), tf.constant(_PADDING_LOGIT, logits.dtype))
    )
    tails = tf.math.cumulative_logsumexp(padded, axis=1, reverse=True)
    terms = tf.where(valid, tails - logits, tf.zeros_like(logits))
    if position_weighted:
        # Real configs fill the front of each sorted list: slot i is position i.
        position = tf.cast(tf.range(tf.shape(terms)[1]), terms.dtype)
        weights = tf.where(valid, 1.0 / tf.math.log(position + 2.0)[None, :], 0.0)
        count = tf.reduce_sum(tf.cast(valid, terms.dtype), axis=1, keepdims=True)
        total = tf.maximum(tf.reduce_sum(weights, axis=1, keepdims=True), 1e-12)
        terms *= weights * count / total
    return tf.reduce_mean(tf.reduce_sum(terms, axis=1))


_NONE = tf.keras.losses.Reduction.NONE


def _loss_factories() -> dict[str, Callable[[], Callable]]:
    # Imported here: TF-Ranking is needed for training only, not for ranking.
    import tensorflow_ranking as tfr

    return {
        # Upstream's name; not TF-Ranking's, whose float32 padding logits underflow (NaN).
        "ListMLELoss": lambda: listmle_loss,
        "PListMLELoss": lambda: lambda r, s: listmle_loss(r, s, position_weighted=True),
        "PairwiseHingeLoss": lambda: _ranking_loss(
            tfr.keras.losses.PairwiseHingeLoss(reduction=_NONE)
        ),
        "MSE": lambda: _masked_mse,
    }


def make_loss_fn(
    losses: Sequence[tuple[str, float]],
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """Weighted sum of the named losses as fn(runtimes [b, k], scores [b, k])."""
    factories = _loss_factories()
    parts = [(factories[name](), weight) for name, weight in losses]

    def loss_fn(runtimes: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
        return tf.add_n([w * fn(runtimes, scores) for fn, w in parts])

    return loss_fn


def pair_counts(runtimes: tf.Tensor, scores: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(correct, comparable) pairs of [b, k] lists (comparable: both real, runtimes differ);
    summed over batches, the pooled OPA of TF-Ranking's OPAMetric."""
    valid = runtimes >= 0
    both = tf.logical_and(valid[:, :, None], valid[:, None, :])
    faster = tf.logical_and(runtimes[:, :, None] < runtimes[:, None, :], both)
    correct = tf.logical_and(faster, scores[:, :, None] < scores[:, None, :])
    return (tf.reduce_sum(tf.cast(correct, tf.float64)), tf.reduce_sum(tf.cast(faster, tf.float64)))


def batch_top_k_errors(runtimes: tf.Tensor, scores: tf.Tensor, k: int) -> tf.Tensor:
    """[b] top-k error of each [b, K] list among its real slots (the numpy `top_k_error`); 0
    for a list without a real slot or whose best runtime is 0 (hidden labels)."""
    valid = runtimes >= 0
    big = tf.constant(np.inf, runtimes.dtype)
    real = tf.where(valid, runtimes, big)
    order = tf.argsort(
        tf.where(valid, scores, tf.constant(np.inf, scores.dtype)), axis=1, stable=True
    )
    top = tf.gather(real, order[:, :k], batch_dims=1)
    best = tf.reduce_min(real, axis=1)
    picked = tf.reduce_min(top, axis=1)
    usable = tf.logical_and(tf.reduce_any(valid, axis=1), best > 0)
    return tf.where(usable, picked / tf.where(usable, best, 1.0) - 1.0, 0.0)


def require_finite_scores(
    tile_ids: Sequence[str], scores: Sequence[np.ndarray], what: str = "kernels"
) -> None:
    """Refuses NaN or infinite scores: `argsort` would give file order and plausible metrics."""
    bad = [str(t) for t, s in zip(tile_ids, scores) if not np.all(np.isfinite(s))]
    if bad:
        raise PipelineError(
            f"the model gave NaN or infinite scores for {len(bad)} of {len(tile_ids)} {what} "
            f"(first: {bad[0]}); its weights are not usable (training diverged or the saved "
            "model is damaged): retrain, e.g. with a lower --lr"
        )


def top_configs(scores: np.ndarray, k: int = 5) -> list[int]:
    """The k predicted-fastest distinct indices, or all of them when fewer exist."""
    return ranking_order(scores)[:k].tolist()


def top_k_error(scores: np.ndarray, runtimes: np.ndarray, k: int) -> float:
    """min(runtime of the k best-ranked) / min(runtime) - 1; 0 is perfect."""
    runtimes = np.asarray(runtimes, dtype=np.float64)
    best = runtimes.min()
    picked = runtimes[ranking_order(scores)[:k]].min()
    return float(picked / best - 1.0)


# Above this many configs, kernel_opa counts pairs by merging ([c, c] matrices: 11 GB at 60k).
PAIRWISE_OPA_MAX_CONFIGS = 2048


def kernel_opa(scores: np.ndarray, runtimes: np.ndarray) -> tuple[int, int]:
    """(correct, comparable) ordered pairs of one kernel."""
    scores = np.asarray(scores)
    runtimes = np.asarray(runtimes)
    if runtimes.size > PAIRWISE_OPA_MAX_CONFIGS:
        return _kernel_opa_by_merging(scores, runtimes)
    faster = runtimes[:, None] < runtimes[None, :]
    correct = faster & (scores[:, None] < scores[None, :])
    return int(correct.sum()), int(faster.sum())


def _kernel_opa_by_merging(scores: np.ndarray, runtimes: np.ndarray) -> tuple[int, int]:
    """kernel_opa in O(c log^2 c) time, O(c) memory: sorted by runtime, ties by descending score,
    a pair i < j is comparable and correct exactly when score[i] < score[j]."""
    c = runtimes.size
    _, ties = np.unique(runtimes, return_counts=True)
    comparable = c * (c - 1) // 2 - int((ties * (ties - 1) // 2).sum())
    order = np.lexsort((-scores, runtimes))
    return _increasing_pairs(scores[order]), comparable


def _increasing_pairs(values: np.ndarray) -> int:
    """#{(i, j): i < j and values[i] < values[j]} by a bottom-up merge sort: each level pairs
    blocks of sorted ranks, `searchsorted` on keys offset per pair counting the smaller ones."""
    ranks = np.unique(values, return_inverse=True)[1].astype(np.int64).ravel()
    n = ranks.size
    total, width = 0, 1
    position = np.arange(n)
    while width < n:
        block = position // width
        pair = block // 2
        right = (block % 2) == 1
        keys = pair * n + ranks
        left_keys = keys[~right]
        right_keys, right_pairs = keys[right], pair[right]
        below = np.searchsorted(left_keys, right_keys, side="left")
        start = np.searchsorted(left_keys, right_pairs * n, side="left")
        total += int((below - start).sum())
        ranks = np.sort(keys) - pair * n
        width *= 2
    return total


def program_of(tile_id: str) -> str:
    """Program name of a kernel: the file stem before its trailing hash."""
    head, sep, _ = tile_id.rpartition("_")
    return head if sep else "(unnamed)"


def summarize(
    tile_ids: Sequence[str], scores: Sequence[np.ndarray], runtimes: Sequence[np.ndarray]
) -> dict[str, float]:
    """Mean top-1/5/10 errors, the Kaggle tile score and OPA over kernels."""
    if not tile_ids:
        return {}
    require_finite_scores(tile_ids, scores)
    errors = {
        str(k): float(np.mean([top_k_error(s, r, k) for s, r in zip(scores, runtimes)]))
        for k in TOP_KS
    }
    pairs = np.array([kernel_opa(s, r) for s, r in zip(scores, runtimes)], dtype=np.float64)
    errors["kaggle_score"] = 1.0 - errors["5"]
    errors["opa"] = float(pairs[:, 0].sum() / max(pairs[:, 1].sum(), 1.0))
    errors["kernels"] = len(tile_ids)
    return errors


def summarize_by_program(
    tile_ids: Sequence[str], scores: Sequence[np.ndarray], runtimes: Sequence[np.ndarray]
) -> dict[str, dict[str, float]]:
    """`summarize` per program (file-name prefix), sorted by program name."""
    groups: dict[str, list[int]] = {}
    for i, t in enumerate(tile_ids):
        groups.setdefault(program_of(t), []).append(i)
    return {
        p: summarize(
            [tile_ids[i] for i in idx], [scores[i] for i in idx], [runtimes[i] for i in idx]
        )
        for p, idx in sorted(groups.items())
    }
