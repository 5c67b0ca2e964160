"""A trained run on disk: `model_<hash>/` (Keras SavedModel) and `run_<hash>.jsonz`.

The run file is gzip'd JSON with `args`, `train_curve`, `final_error`,
`test_predictions` (as the baseline writes) plus what rebuilding needs:
`model`, `model_kwargs`, `configs`, `opcode_vocab_size` and `feature_stats`.

    save_model(model, out_dir / f"model_{h}")
    write_run_file(out_dir / f"run_{h}.jsonz", record)
    model, record, stats = load_trained_model(out_dir / f"model_{h}")
"""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from baselines.tiles.data import OPCODE_VOCAB_SIZE
from baselines.tiles.errors import PipelineError
from baselines.tiles.features import FeatureStats
from baselines.tiles.io_utils import atomic_directory, atomic_output
from baselines.tiles.models import TileModel, build_model, create_variables


def run_file_for(model_dir: Path) -> Path:
    """`<out>/run_<hash>.jsonz` beside `<out>/model_<hash>`."""
    name = model_dir.name
    if not name.startswith("model_"):
        raise PipelineError(
            f"{model_dir}: expected a folder named model_<hash> written by tiles_train.py"
        )
    return model_dir.parent / f"run_{name.removeprefix('model_')}.jsonz"


def write_run_file(path: Path, record: dict[str, Any]) -> None:
    with atomic_output(path) as tmp:
        # mtime=0 keeps the gzip bytes a function of the content alone.
        with gzip.GzipFile(tmp, "wb", mtime=0) as f:
            f.write(json.dumps(record, sort_keys=True).encode())


def read_run_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise PipelineError(f"{path}: run file not found; it is written by tiles_train.py")
    try:
        with gzip.open(path, "rb") as f:
            record = json.loads(f.read())
    except (OSError, EOFError, ValueError) as e:
        raise PipelineError(f"{path}: not a readable run file ({e}); retrain the model") from None
    missing = [k for k in ("model", "model_kwargs", "configs", "feature_stats") if k not in record]
    if missing:
        raise PipelineError(f"{path}: run file lacks {', '.join(missing)}; retrain the model")
    return record


def save_model(model: TileModel, model_dir: Path) -> None:
    """Keras SavedModel at `model_dir`, written to a temporary folder and renamed."""
    with atomic_directory(model_dir) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TF warns that GraphTensor specs need TF-GNN to load.
        model.save(tmp, include_optimizer=False)


def build_from_record(record: dict[str, Any]) -> TileModel:
    """The run's model class with its kwargs, its variables created by one forward pass."""
    vocab = record.get("opcode_vocab_size", OPCODE_VOCAB_SIZE)
    if vocab != OPCODE_VOCAB_SIZE:
        raise PipelineError(
            f"run file: opcode vocabulary {vocab} differs from this code's {OPCODE_VOCAB_SIZE}"
        )
    model = build_model(record["model"], int(record["configs"]), record["model_kwargs"])
    create_variables(model, compiled=False)
    return model


def copy_trainable_variables(source: list[np.ndarray], target: TileModel) -> None:
    """Assigns source to target variables in order; errors on count or shape mismatch."""
    dest = target.trainable_variables
    if len(source) != len(dest):
        raise PipelineError(
            f"saved model has {len(source)} trainable variables, "
            f"{type(target).__name__} has {len(dest)}; the run file does not match the model"
        )
    for i, (s, d) in enumerate(zip(source, dest)):
        if tuple(s.shape) != tuple(d.shape):
            raise PipelineError(
                f"variable {i} ({d.name}) has shape {tuple(s.shape)} in the saved model but "
                f"{tuple(d.shape)} in the rebuilt model; the run file does not match the model"
            )
    for s, d in zip(source, dest):
        d.assign(np.asarray(s))


def read_saved_variables(model_dir: Path) -> list[np.ndarray]:
    """The saved Keras model's variables, in its `model.variables` order.

    A Keras SavedModel stores them in its checkpoint as `variables/<i>`; reading
    them there takes milliseconds, where reviving the whole Keras model (its
    traced functions included) takes about a second. Our models have no
    non-trainable variables, so these are exactly its trainable variables.
    """
    prefix = model_dir / "variables" / "variables"
    if not (model_dir / "saved_model.pb").is_file() or not prefix.with_suffix(".index").is_file():
        raise PipelineError(
            f"{model_dir}: no saved model there; "
            "pass --dir <out_dir>/model_<hash> written by tiles_train.py"
        )
    try:
        reader = tf.train.load_checkpoint(str(prefix))
        keys = [k for k in reader.get_variable_to_shape_map() if k.startswith("variables/")]
        order = sorted(int(k.split("/")[1]) for k in keys)
        return [reader.get_tensor(f"variables/{i}/.ATTRIBUTES/VARIABLE_VALUE") for i in order]
    except (tf.errors.OpError, ValueError) as e:
        raise PipelineError(f"{model_dir}: cannot read the saved variables ({e})") from None


def read_run_for_model(model_dir: Path) -> tuple[dict[str, Any], FeatureStats]:
    """The run record beside `model_dir` and its feature statistics."""
    model_dir = Path(model_dir).expanduser()
    if not model_dir.is_dir():
        raise PipelineError(f"{model_dir}: model folder not found; pass --dir <out>/model_<hash>")
    record = read_run_file(run_file_for(model_dir))
    return record, FeatureStats.from_dict(record["feature_stats"])


def restore_model(model_dir: Path, record: dict[str, Any]) -> TileModel:
    """Rebuilds the run's model class and copies the saved Keras model's weights in.

    Weights are matched by position with count and shape checks, so a wrong
    class or wrong kwargs in the run file fail with the first mismatch named.
    """
    model = build_from_record(record)
    copy_trainable_variables(read_saved_variables(Path(model_dir).expanduser()), model)
    return model


def load_trained_model(model_dir: Path) -> tuple[TileModel, dict[str, Any], FeatureStats]:
    """Rebuilds the run's model, copies the saved weights in, returns it with its stats."""
    record, stats = read_run_for_model(model_dir)
    return restore_model(model_dir, record), record, stats
