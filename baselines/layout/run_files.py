"""A trained layout run on disk: `model_<hash>/` and `run_<hash>.jsonz`.

`model_<hash>/weights.npz` holds the model's variables in creation order, each
keyed `<index>:<variable name>`; `model_<hash>/run.jsonz` is a copy of the run
record, written with the weights so a folder always carries its own record.
The record (gzip JSON) has `"collection": "layout"`, `args`, `model`,
`model_kwargs`, the validation metrics and the learning curve. Rebuilding:
the class is looked up by name in `baselines/layout/models.py`, built with the
kwargs, its variables created, and the saved ones copied in (names and shapes
must agree).

    save_layout_run(model, record, out / f"model_{h}", out / f"run_{h}.jsonz")
    record = read_layout_run(out / f"model_{h}")          # no TensorFlow
    model = restore_layout_model(out / f"model_{h}", record)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from baselines.core import model_lookup
from baselines.core.errors import PipelineError
from baselines.core.format import OPCODE_VOCAB_SIZE
from baselines.core.io_utils import atomic_directory, atomic_output, describe_write_error
from baselines.core.run_files import RUN_IN_MODEL, run_file_of
from baselines.core.run_json import read_gzip_json, write_gzip_json

COLLECTION = "layout"
WEIGHTS = "weights.npz"


def read_layout_run(model_dir: Path) -> dict[str, Any]:
    """The layout run record of `model_dir`; a tile model is refused in one line."""
    model_dir = Path(model_dir).expanduser()
    path = run_file_of(model_dir, "layout_train.py")
    record = read_gzip_json(path)
    if record.get("collection") != COLLECTION:
        if "feature_stats" in record or (model_dir / "saved_model.pb").is_file():
            raise PipelineError(f"{model_dir} is a tile model; use tiles_gen_predictions_csv.py")
        raise PipelineError(f"{path}: not a layout run file (written by layout_train.py)")
    missing = [k for k in ("args", "model", "model_kwargs") if k not in record]
    if missing or not (model_dir / WEIGHTS).is_file():
        what = ", ".join(missing) or WEIGHTS
        raise PipelineError(f"{model_dir}: layout run lacks {what}; retrain the model")
    return record


def build_model(name: str, kwargs: dict[str, Any]):
    """The model `name` of baselines/layout/models.py, unbuilt; a bad name or kwarg is one line.

    `kwargs` may hold `num_configs` and `num_ops` (a run record's `get_config`).
    """
    from baselines.layout import models

    kwargs = dict(kwargs)
    positional = (kwargs.pop("num_configs", None), kwargs.pop("num_ops", OPCODE_VOCAB_SIZE))
    return model_lookup.build_model(models, models.LayoutModel, name, positional, kwargs)


def _weight_entries(model) -> dict[str, np.ndarray]:
    return {f"{i:04d}:{v.name}": v.numpy() for i, v in enumerate(model.weights)}


def save_layout_run(model, record: dict[str, Any], model_dir: Path, run_path: Path) -> None:
    """Writes the weights and the record (inside the folder and beside it), each atomically."""
    record = {**record, "collection": COLLECTION}
    with atomic_output(run_path) as run_tmp:
        with atomic_directory(model_dir) as tmp:
            try:
                np.savez(tmp / WEIGHTS, **_weight_entries(model))
            except OSError as e:
                raise PipelineError(
                    f"cannot write {model_dir / WEIGHTS}: {describe_write_error(e)}"
                ) from e
            write_gzip_json(tmp / RUN_IN_MODEL, record, model_dir / RUN_IN_MODEL)
            write_gzip_json(run_tmp, record, run_path)


def restore_layout_model(model_dir: Path, record: dict[str, Any]):
    """Rebuilds the run's class with its kwargs and copies the saved weights in."""
    model_dir = Path(model_dir).expanduser()
    model = build_model(record["model"], record["model_kwargs"])
    model.create_variables()
    # Matched by creation order and shape: Keras numbers unnamed layers per process, so
    # variable names (kept in the keys for reading) may differ between processes.
    with np.load(model_dir / WEIGHTS) as saved:
        keys = sorted(saved.files)
        values = [saved[k] for k in keys]
    mine = model.weights
    if len(values) != len(mine):
        raise PipelineError(
            f"{model_dir}: {len(values)} saved variables but the rebuilt {record['model']} "
            f"has {len(mine)}; models.py or its kwargs changed since training"
        )
    for key, value, variable in zip(keys, values, mine, strict=True):
        if tuple(value.shape) != tuple(variable.shape):
            raise PipelineError(
                f"{model_dir}: variable {key} is {list(value.shape)} saved but "
                f"{list(variable.shape)} rebuilt; models.py or its kwargs changed since training"
            )
    model.set_weights(values)
    return model
