"""tile:xla for the runners: its `CollectionSpec` (`TILE_XLA`, runs ranked by validation top-5
error), the paper's grid, its summary. No TensorFlow or Beam."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

from baselines.jobs.collections import ROOT, CollectionSpec
from baselines.jobs.sweeps import Sweep
from baselines.tiles.tile_args import TILE_PLACE, TOP_KS, TrainArgs

# The paper's hyperparameter grid (TpuGraphs paper, Table 5) in upstream's loop order and
# kwarg names (see model_builder.UPSTREAM).
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
    *(
        ("MLP", {"op_embed_dim": embed, "hidden_dim": hidden, "mlp_layers": layers})
        for embed, hidden, layers in ((64, 64, 2), (128, 128, 2), (128, 128, 3), (256, 128, 3))
    ),
    *(
        (model, {"num_gnns": gnns, "op_embed_dim": embed, "hidden_dim": hidden})
        for model in ("EarlyJoinSAGE", "LateJoinSAGE", "EarlyJoinResGCN", "LateJoinResGCN")
        for gnns, embed, hidden in ((2, 64, 64), (3, 64, 64), (3, 128, 128), (3, 256, 128))
    ),
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
    """A tile run record's summary fields: validation top-K errors, best validated OPA, epochs."""
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
    return [*(result["val_error"][k] for k in TOP_KS), result["val_opa"]]


def sort_key(result: Mapping[str, Any]) -> tuple:
    """Best first: validation top-5 error, then top-1, top-10 (NaN last), then the hash."""
    errors = [result["val_error"][k] for k in ("5", "1", "10")]
    return (*((math.isnan(e), e) for e in errors), result["run_hash"])


def done_line(result: Mapping[str, Any]) -> str:
    """The log line's end for a trained run: "val top-1/5/10 error 0.5000 / 0.2500 / 0.1250"."""
    return "val top-1/5/10 error " + " / ".join(f"{result['val_error'][k]:.4f}" for k in TOP_KS)


TILE_XLA = CollectionSpec(
    name="tile:xla",
    kind="tile",
    args_type=TrainArgs,
    train_script="tiles_train.py",
    evaluate_script="tiles_evaluate.py",
    predict_script="tiles_gen_predictions_csv.py",
    train_function="baselines.tiles.task:train",
    recipe=ROOT / "configs" / "recommended.flags",
    release_root="npz/tile/xla",
    toy_root=TILE_PLACE.toy,
    join_flag="--data_root",
    data_subdir="",
    # Upstream's --toy_data=True: the toy runs keep the run hashes they always had.
    toy_flags=("--max_files=100",),
    collection_flags=(),
    report_metrics={"top1_err": "top-1 error", "top5_err": "top-5 error", "opa": "OPA"},
    choice_figure="Kaggle score (2 - top-5 best / best runtime)",
    figure="per_program",
    training_weight=5.0,
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
