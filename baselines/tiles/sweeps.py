"""Sweeps of tile training runs: the paper's grid, and what a tile run's summary shows.

The machinery (grid expansion, the Beam pipeline, failure capture, the summary
files, the ensemble command) is `baselines/core/sweeps.py`; this module gives
it the tile parts as `TILE_SWEEPS`:

    sweep = core.load_sweep(TILE_SWEEPS, "paper")   # or "seeds" (num_seeds=N), or "FILE.json"
    runs, _ = core.expand_runs(TILE_SWEEPS, sweep, {"epochs": 3})  # [TrainArgs, ...]
    result = core.run_one(TILE_SWEEPS, 0, len(runs), runs[0], train_lib.train, print)
    core.write_summary(TILE_SWEEPS, out_dir, [result, ...], ensemble_top=3)

`tiles_beam_experiments.py` runs each `TrainArgs` as one element of an Apache
Beam pipeline. Nothing here imports TensorFlow or Beam.
"""

from __future__ import annotations

import itertools
import json
import math
import time  # noqa: F401  (sweeps.time: the clock of run_one's wall time, patched in tests)
from collections.abc import Mapping
from typing import Any

from baselines.core import sweeps as core
from baselines.core.sweeps import DEBUG_RUNS as DEBUG_RUNS
from baselines.core.sweeps import SUMMARY_CSV as SUMMARY_CSV
from baselines.core.sweeps import SUMMARY_MD as SUMMARY_MD
from baselines.core.sweeps import Sweep
from baselines.core.sweeps import seeds_sweep as seeds_sweep
from baselines.tiles.train_args import TrainArgs

TOP_KS = ("1", "5", "10")  # keys of a run record's final_error["val"]

# The paper's hyperparameter grid (TpuGraphs paper, Table 5), as the
# upstream sweep `tiles_beam_experiments.py` spells it: every (model, kwargs)
# row below is crossed with every combination of PAPER_TRAINING_AXES, in
# upstream's loop order (model, loss, run id, clip norm, learning rate).
# Model kwargs keep upstream's names (num_gnns, op_embed_dim, mlp_layers; see
# models.KWARG_ALIASES): the rows are upstream's, all 20 of them.
PAPER_BASE_FLAGS: dict[str, Any] = {
    "out_dir": "~/out/tpugraphs_tiles/beam",
    "test_mode": "metrics",
    "validate_batches": 50,
    "early_stop": 10,
    "epochs": 500,
    "configs": 8,
    "batch": 10,
    "eval_every": 2,
}
PAPER_MODEL_GRID: tuple[tuple[str, dict[str, Any]], ...] = (
    ("MLP", {"op_embed_dim": 64, "hidden_dim": 64, "mlp_layers": 2}),
    ("MLP", {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 2}),
    ("MLP", {"op_embed_dim": 128, "hidden_dim": 128, "mlp_layers": 3}),
    ("MLP", {"op_embed_dim": 256, "hidden_dim": 128, "mlp_layers": 3}),
    ("EarlyJoinSAGE", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("EarlyJoinSAGE", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("LateJoinSAGE", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("LateJoinSAGE", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("EarlyJoinResGCN", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("EarlyJoinResGCN", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
    ("LateJoinResGCN", {"num_gnns": 2, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 64, "hidden_dim": 64}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 128, "hidden_dim": 128}),
    ("LateJoinResGCN", {"num_gnns": 3, "op_embed_dim": 256, "hidden_dim": 128}),
)
PAPER_TRAINING_AXES: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("losses", ("ListMLELoss:1,MSE:0.02", "MSE:1", "ListMLELoss:1")),
    ("run_id", ("0", "1", "2")),
    ("clip_norm", (1e-3, 100.0)),
    ("lr", (1e-2, 1e-3)),
)


def paper_sweep() -> Sweep:
    """The paper's grid: PAPER_MODEL_GRID x PAPER_TRAINING_AXES on PAPER_BASE_FLAGS."""
    names = [name for name, _ in PAPER_TRAINING_AXES]
    entries = [
        {"model": model, "model_kwargs_json": json.dumps(kwargs), **dict(zip(names, values))}
        for model, kwargs in PAPER_MODEL_GRID
        for values in itertools.product(*(values for _, values in PAPER_TRAINING_AXES))
    ]
    return Sweep("paper", dict(PAPER_BASE_FLAGS), tuple(entries))


def summarize(record: Mapping[str, Any]) -> dict[str, Any]:
    """A tile run record's summary fields: validation top-K errors, best validated OPA, epochs.

    summarize(record)["val_error"] == {"1": 0.31, "5": 0.12, "10": 0.05}
    """
    # None marks epochs without validation (--eval_every > 1).
    val_opa = [v for v in record.get("train_curve", {}).get("val_opa", []) if v is not None]
    val_opa = val_opa or [math.nan]
    return dict(
        val_error={k: float(record["final_error"]["val"][k]) for k in TOP_KS},
        val_opa=float(max(val_opa)),
        best_epoch=int(record.get("best_epoch", -1)),
        epochs_run=len(record.get("train_curve", {}).get("epoch", [])),
    )


def metric_cells(result: Mapping[str, Any]) -> list[float]:
    """The summary's metric cells: top-1/5/10 validation error, then val OPA."""
    return [*(result["val_error"][k] for k in TOP_KS), result["val_opa"]]


def sort_key(result: Mapping[str, Any]) -> tuple:
    """Best first: validation top-5 error, then top-1, top-10 (NaN last), then the hash."""
    errors = [result["val_error"][k] for k in ("5", "1", "10")]
    return (*((math.isnan(e), e) for e in errors), result["run_hash"])


def done_line(result: Mapping[str, Any]) -> str:
    """The log line's end for a trained run: "val top-1/5/10 error 0.5000 / 0.2500 / 0.1250"."""
    return "val top-1/5/10 error " + " / ".join(f"{result['val_error'][k]:.4f}" for k in TOP_KS)


TILE_SWEEPS = core.SweepKind(
    name="tile",
    args_type=TrainArgs,
    train_script="tiles_train.py",
    train_function="baselines.tiles.train_lib:train",
    predict_script="tiles_gen_predictions_csv.py",
    metric_columns=("val_top1_err", "val_top5_err", "val_top10_err", "val_opa"),
    metric_cells=metric_cells,
    summarize=summarize,
    sort_key=sort_key,
    ranking="validation top-5 error",
    done_line=done_line,
    named_sweeps={"paper": paper_sweep},
    named_help="paper (the paper's grid), ",
    default_sweep="paper",
    sweep_example='[{"model": "MLP"}, {"model": "EarlyJoinSAGE", "lr": 0.01}]',
)
