"""Ranking quality on one layout graph: Kendall's tau-b and the top-k slowdown.

Predictions are scores where lower means predicted faster, as for tiles:

    tau = kendall_tau(scores, graph.config_runtime)      # 1.0: same order as the runtimes
    err = slowdown_at_k(scores, graph.config_runtime, 5)  # 0.0: a true fastest is in the top 5
    print(f"tau {tau:.3f}, top-5 slowdown {err:.2%}")

numpy only (no TensorFlow), so evaluation scripts import it cheaply.
"""

from __future__ import annotations

import numpy as np

from baselines.core.errors import PipelineError
from baselines.core.ranking import ranking_order

# Elements of one [rows, c] comparison block: bounds memory to tens of MB for any c
# (the full [c, c] matrices of a 60k-config nlp graph would be 3.6 GB each).
_BLOCK_ELEMENTS = 1 << 22


def _as_vectors(pred: np.ndarray, runtime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred = np.asarray(pred)
    runtime = np.asarray(runtime)
    if pred.ndim != 1 or pred.shape != runtime.shape:
        raise PipelineError(
            f"predictions have shape {pred.shape} but runtimes {runtime.shape}; "
            "pass one score per configuration of the graph"
        )
    for name, x in (("predictions", pred), ("runtimes", runtime)):
        if x.dtype.kind == "f" and not np.all(np.isfinite(x)):
            raise PipelineError(f"{name} contain NaN or inf; check the model's output")
    return pred, runtime


def _signs(block: np.ndarray, x: np.ndarray) -> np.ndarray:
    """sign(block[i] - x[j]) as int8, by comparison (a difference could overflow)."""
    return (block[:, None] > x[None, :]).astype(np.int8) - (block[:, None] < x[None, :])


def kendall_tau(pred: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall's tau-b between scores and runtimes; ties in either are allowed.

    tau_b = (concordant - discordant) / sqrt((P - ties_pred) * (P - ties_runtime))
    over the P pairs of configurations (a pair tied in both counts in both tie
    counts). Counting runs over ordered pairs i != j, which doubles every term
    and leaves the ratio unchanged, a block of rows at a time. NaN when fewer
    than 2 configurations or when either input is constant (tau-b is undefined).
    """
    pred, runtime = _as_vectors(pred, runtime)
    c = pred.size
    if c < 2:
        return float("nan")
    pred = pred.astype(np.float64) if pred.dtype.kind == "f" else pred.astype(np.int64)
    runtime = runtime.astype(np.float64) if runtime.dtype.kind == "f" else runtime.astype(np.int64)
    rows = max(1, _BLOCK_ELEMENTS // c)
    agree = untied_pred = untied_runtime = 0
    for start in range(0, c, rows):
        sp = _signs(pred[start : start + rows], pred)
        sr = _signs(runtime[start : start + rows], runtime)
        agree += int(np.einsum("ij,ij->", sp, sr, dtype=np.int64))
        untied_pred += int(np.count_nonzero(sp))
        untied_runtime += int(np.count_nonzero(sr))
    if untied_pred == 0 or untied_runtime == 0:
        return float("nan")
    return float(agree / np.sqrt(float(untied_pred) * float(untied_runtime)))


def slowdown_at_k(pred: np.ndarray, runtime: np.ndarray, k: int) -> float:
    """min(runtime of the k lowest-scored configs) / min(runtime) - 1; 0 is perfect.

    Equal scores are taken in file order (stable sort); k above the number of
    configurations means all of them (slowdown 0). Needs positive runtimes, so
    test files (runtimes hidden as 0) are refused.
    """
    pred, runtime = _as_vectors(pred, runtime)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise PipelineError(f"k must be an integer >= 1, got {k!r}")
    if runtime.size == 0:
        raise PipelineError("no configurations to rank")
    best = runtime.min()
    if best <= 0:
        raise PipelineError(
            "runtimes must be positive to measure a slowdown; test files hold no runtimes (all 0)"
        )
    picked = runtime[ranking_order(pred)[: int(k)]].min()
    return float(np.float64(picked) / np.float64(best) - 1.0)
