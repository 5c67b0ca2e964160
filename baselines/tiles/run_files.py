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
    """Keras SavedModel at `model_dir`, written to a temporary folder and renamed.

    Saved without traced functions (`save_traces=False`): tracing every layer's
    call for the SavedModel took 8-13 s per run, a quarter of a benchmark
    training run, and nothing here executes those traces. The folder holds the
    variables and the model's config; `tf.keras.models.load_model` rebuilds it
    once `baselines.tiles.models` is imported (which registers the classes).
    """
    with atomic_directory(model_dir) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save(tmp, include_optimizer=False, save_traces=False)


def build_from_record(record: dict[str, Any]) -> TileModel:
    """The run's model class with its kwargs, its variables created from its widths."""
    vocab = record.get("opcode_vocab_size", OPCODE_VOCAB_SIZE)
    if vocab != OPCODE_VOCAB_SIZE:
        raise PipelineError(
            f"run file: opcode vocabulary {vocab} differs from this code's {OPCODE_VOCAB_SIZE}"
        )
    model = build_model(record["model"], int(record["configs"]), record["model_kwargs"])
    create_variables(model, compiled=False)
    return model


def saved_variable_shapes(model_dir: Path) -> dict[str, tuple[int, ...]]:
    """Object path -> shape of every variable in the SavedModel's checkpoint."""
    prefix = model_dir / "variables" / "variables"
    if not (model_dir / "saved_model.pb").is_file() or not prefix.with_suffix(".index").is_file():
        raise PipelineError(
            f"{model_dir}: no saved model there; "
            "pass --dir <out_dir>/model_<hash> written by tiles_train.py"
        )
    try:
        shapes = tf.train.load_checkpoint(str(prefix)).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as e:
        raise PipelineError(f"{model_dir}: cannot read the saved variables ({e})") from None
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    return {k.removesuffix(suffix): tuple(v) for k, v in shapes.items() if k.endswith(suffix)}


def copy_saved_variables(model_dir: Path, model: TileModel) -> None:
    """Copies the saved Keras model's trainable variables into `model`.

    Variables are matched by their path in the model (`convs/0/self_dense/kernel`,
    ...), as Keras itself restores them. Counts, paths and shapes must agree; the
    first disagreement is reported in one line.
    """
    saved = saved_variable_shapes(model_dir)
    ours = model.trainable_variables
    if len(saved) != len(ours):
        raise PipelineError(
            f"{model_dir}: the saved model has {len(saved)} trainable variables, the rebuilt "
            f"{type(model).__name__} has {len(ours)}; the run file does not match the model"
        )
    try:
        status = model.load_weights(str(model_dir / "variables" / "variables"))
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PipelineError(
            f"{model_dir}: saved variables do not fit the rebuilt {type(model).__name__} "
            f"({first}); the run file does not match the model"
        ) from None


def read_run_for_model(model_dir: Path) -> tuple[dict[str, Any], FeatureStats]:
    """The run record beside `model_dir` and its feature statistics."""
    model_dir = Path(model_dir).expanduser()
    if not model_dir.is_dir():
        raise PipelineError(f"{model_dir}: model folder not found; pass --dir <out>/model_<hash>")
    record = read_run_file(run_file_for(model_dir))
    return record, FeatureStats.from_dict(record["feature_stats"])


def restore_model(model_dir: Path, record: dict[str, Any]) -> TileModel:
    """Rebuilds the run's model class and copies the saved Keras model's weights in.

    A wrong class or wrong kwargs in the run file fail with the first mismatch named.
    """
    model = build_from_record(record)
    copy_saved_variables(Path(model_dir).expanduser(), model)
    return model


def load_trained_model(model_dir: Path) -> tuple[TileModel, dict[str, Any], FeatureStats]:
    """Rebuilds the run's model, copies the saved weights in, returns it with its stats."""
    record, stats = read_run_for_model(model_dir)
    return restore_model(model_dir, record), record, stats
