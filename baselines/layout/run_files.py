"""A trained layout run on disk: `model_<hash>/` and `run_<hash>.jsonz`, as for tiles.

`model_<hash>/` is the Keras SavedModel with a copy of the run record, written
by `core.saved_model.save_finished_run` (`train_lib.train`). The record (gzip
JSON) has `"collection": "layout"`, `args`, `model`, `model_kwargs`, the
validation metrics and the learning curve. Rebuilding: the class is looked up
by name in `baselines/layout/models.py`, built with the kwargs, its variables
created, and the saved ones copied in (paths and shapes must agree).

    record = read_layout_run(out / f"model_{h}")          # no TensorFlow
    model = restore_layout_model(out / f"model_{h}", record)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from baselines.core import model_lookup
from baselines.core.errors import PipelineError
from baselines.core.format import OPCODE_VOCAB_SIZE
from baselines.core.run_files import check_fingerprint, run_file_of
from baselines.core.run_json import read_gzip_json

COLLECTION = "layout"


def read_layout_run(model_dir: Path) -> dict[str, Any]:
    """The layout run record of `model_dir`; a tile model is refused in one line."""
    model_dir = Path(model_dir).expanduser()
    path = run_file_of(model_dir, "layout_train.py")
    record = read_gzip_json(path)
    if record.get("collection") != COLLECTION:
        if "feature_stats" in record:
            raise PipelineError(f"{model_dir} is a tile model; use tiles_gen_predictions_csv.py")
        raise PipelineError(f"{path}: not a layout run file (written by layout_train.py)")
    missing = [k for k in ("args", "model", "model_kwargs") if k not in record]
    if missing or not (model_dir / "saved_model.pb").is_file():
        what = ", ".join(missing) or "its saved model (layout runs saved as weights.npz)"
        raise PipelineError(f"{model_dir}: layout run lacks {what}; retrain the model")
    check_fingerprint(record, model_dir, path)
    return record


def build_model(name: str, kwargs: dict[str, Any]):
    """The model `name` of baselines/layout/models.py, unbuilt; a bad name or kwarg is one line.

    `kwargs` may hold `num_configs` and `num_ops` (a run record's `get_config`).
    """
    from baselines.layout import models

    kwargs = dict(kwargs)
    positional = (kwargs.pop("num_configs", None), kwargs.pop("num_ops", OPCODE_VOCAB_SIZE))
    return model_lookup.build_model(models, models.LayoutModel, name, positional, kwargs)


def restore_layout_model(model_dir: Path, record: dict[str, Any]):
    """Rebuilds the run's class with its kwargs and copies the saved weights in."""
    from baselines.core.saved_model import copy_saved_variables

    model = build_model(record["model"], record["model_kwargs"]).create_variables()
    copy_saved_variables(Path(model_dir).expanduser(), model)
    return model
