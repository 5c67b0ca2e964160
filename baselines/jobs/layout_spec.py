"""The layout collections for the runners: their `CollectionSpec`s (runs ranked by validation
Kendall's tau, an ensemble of one collection) and their summary. No TensorFlow or Beam."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from baselines.core.submission import COLLECTIONS, LAYOUT_PREFIX
from baselines.jobs.collections import ROOT, CollectionSpec
from baselines.layout.layout_args import BUNDLED_TOY_ROOT, LayoutTrainArgs

LAYOUT_COLLECTIONS = tuple(n for n in COLLECTIONS if n.startswith(LAYOUT_PREFIX))


def summarize(run: Mapping[str, Any]) -> dict[str, Any]:
    """A layout run record's summary fields: validation tau and OPA, best epoch, epochs."""
    return dict(
        val_tau=float(run["val"]["kendall_tau"]),
        val_opa=float(run["val"]["opa"]),
        best_epoch=int(run.get("best_epoch", -1)),
        epochs_run=len(run.get("train_curve", {}).get("epoch", [])),
    )


def metric_cells(result: Mapping[str, Any]) -> list[float]:
    return [result["val_tau"], result["val_opa"]]


def _higher_first(value: float) -> tuple[bool, float]:
    return (math.isnan(value), -value if not math.isnan(value) else 0.0)


def sort_key(result: Mapping[str, Any]) -> tuple:
    """Best first: validation Kendall's tau, higher first, then OPA (NaN last), then the hash."""
    return (_higher_first(result["val_tau"]), _higher_first(result["val_opa"]), result["run_hash"])


def done_line(result: Mapping[str, Any]) -> str:
    """The log line's end for a trained run: "val Kendall tau 0.3200, OPA 0.6600"."""
    return f"val Kendall tau {result['val_tau']:.4f}, OPA {result['val_opa']:.4f}"


def collection(result: Mapping[str, Any]) -> tuple[str, str]:
    """A run's (source, search): an ensemble ranks one collection."""
    return result["flags"]["source"], result["flags"]["search"]


def layout_collection(name: str = "layout") -> CollectionSpec:
    """The spec of one layout collection ("layout:xla:default", ...) or, by default, of any."""
    if name != "layout" and name not in LAYOUT_COLLECTIONS:
        raise ValueError(f"not a layout collection: {name!r}")
    picked = name.split(":")[1:]  # [source, search], or none
    return CollectionSpec(
        name=name,
        kind="layout",
        args_type=LayoutTrainArgs,
        train_script="layout_train.py",
        evaluate_script="layout_evaluate.py",
        predict_script="layout_gen_predictions_csv.py",
        train_function="baselines.layout.task:train",
        recipe=ROOT / "configs" / "layout" / "recommended.flags",
        release_root="npz/layout",
        toy_root=BUNDLED_TOY_ROOT,
        join_flag="--layout_root",
        data_subdir="/".join(picked),
        toy_flags=(),
        # The job's ranking step scores validation and ranks test with the chosen ensemble:
        # a training does neither (for nlp's baseline, its validation is most of its time).
        collection_flags=(
            *(f"--{k}={v}" for k, v in zip(("source", "search"), picked)),
            *(("--results_csv=None", "--final_validation=False") if picked else ()),
        ),
        report_metrics={"kendall_tau": "Kendall's tau", "slowdown_1": "slowdown@1"},
        choice_figure="Kendall's tau",
        figure="tau_per_graph",
        training_weight=3.0 if picked[:1] == ["nlp"] else 1.0,
        metric_columns=("val_tau", "val_opa"),
        metric_cells=metric_cells,
        summarize=summarize,
        sort_key=sort_key,
        ranking="validation Kendall's tau, higher first",
        done_line=done_line,
        sweep_example='[{"model": "ResModel"}, {"model": "LayoutSAGE", "lr": 0.003}]',
        ensemble_key=collection,
    )


ANY_LAYOUT = layout_collection()  # the layout sweeps'
