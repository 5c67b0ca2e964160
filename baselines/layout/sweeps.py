"""What a layout run's sweep summary shows: validation Kendall's tau first.

The machinery (grid expansion, the Beam pipeline, failure capture, the summary
files, the ensemble command) is `baselines/core/sweeps.py`; `LAYOUT_SWEEPS`
gives it the layout parts, and `layout_beam_experiments.py` runs it:

    runs, _ = core.expand_runs(LAYOUT_SWEEPS, core.seeds_sweep(3), {"epochs": 2})
    result = core.run_one(LAYOUT_SWEEPS, 0, 3, runs[0], train_lib.train, print)
    core.write_summary(LAYOUT_SWEEPS, "out/layout_seeds", [result, ...], ensemble_top=3)

Runs train with `baselines.layout.train_lib.train`, as `layout_train.py` does
(same files, same hash).
Trained runs rank by validation Kendall's tau, higher first; the ensemble
command (`layout_gen_predictions_csv.py --dir a,b,c`) takes the best runs of the
best run's collection, as that script ranks one source and search at a time.
Nothing here imports TensorFlow or Beam.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from baselines.core.sweeps import SweepKind
from baselines.layout.train_args import LayoutTrainArgs


def summarize(run: Mapping[str, Any]) -> dict[str, Any]:
    """A layout run record's summary fields: validation tau and OPA, best epoch, epochs.

    summarize(train_lib.train(args))["val_tau"]   # the run's val kendall_tau

    Both metrics rank every configuration of every validation graph with the
    best epoch's weights (`run["val"]`).
    """
    return dict(
        val_tau=float(run["val"]["kendall_tau"]),
        val_opa=float(run["val"]["opa"]),
        best_epoch=int(run.get("train", {}).get("best_epoch", -1)),
        epochs_run=len(run.get("train_curve", {}).get("epoch", [])),
    )


def metric_cells(result: Mapping[str, Any]) -> list[float]:
    """The summary's metric cells: [val_tau, val_opa]."""
    return [result["val_tau"], result["val_opa"]]


def _higher_first(value: float) -> tuple[bool, float]:
    return (math.isnan(value), -value if not math.isnan(value) else 0.0)


def sort_key(result: Mapping[str, Any]) -> tuple:
    """Best first: validation Kendall's tau, higher first, then OPA (NaN last), then the hash.

    sorted(results, key=sort_key)[0]["val_tau"] == max(r["val_tau"] for r in results)
    """
    return (
        _higher_first(result["val_tau"]),
        _higher_first(result["val_opa"]),
        result["run_hash"],
    )


def done_line(result: Mapping[str, Any]) -> str:
    """The log line's end for a trained run: "val Kendall tau 0.3200, OPA 0.6600"."""
    return f"val Kendall tau {result['val_tau']:.4f}, OPA {result['val_opa']:.4f}"


def collection(result: Mapping[str, Any]) -> tuple[str, str]:
    """A run's (source, search): an ensemble ranks one collection."""
    return result["flags"]["source"], result["flags"]["search"]


LAYOUT_SWEEPS = SweepKind(
    name="layout",
    args_type=LayoutTrainArgs,
    train_script="layout_train.py",
    train_function="baselines.layout.train_lib:train",
    predict_script="layout_gen_predictions_csv.py",
    metric_columns=("val_tau", "val_opa"),
    metric_cells=metric_cells,
    summarize=summarize,
    sort_key=sort_key,
    ranking="validation Kendall's tau, higher first",
    done_line=done_line,
    sweep_example='[{"model": "ResModel"}, {"model": "LayoutSAGE", "lr": 0.003}]',
    ensemble_key=collection,
)
