"""Saving a model as a Keras SavedModel with its run record, and copying saved weights in."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_directory, atomic_output, describe_write_error
from baselines.core.run_files import RUN_IN_MODEL, model_fingerprint
from baselines.core.run_json import write_gzip_json


def _save_keras(model: tf.keras.Model, folder: Path, dest: Path) -> None:
    """`model.save` into `folder`, without traces; a refused write is one line naming `dest`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.save(folder, include_optimizer=False, save_traces=False)
    except (OSError, tf.errors.OpError) as e:
        # TensorFlow's writers report a full disk as ResourceExhaustedError.
        raise PipelineError(f"cannot write {dest}: {describe_write_error(e)}") from e


def save_model(model: tf.keras.Model, model_dir: Path) -> None:
    """Keras SavedModel alone at `model_dir`, written to a temporary folder and renamed."""
    with atomic_directory(model_dir) as tmp:
        _save_keras(model, tmp, model_dir)


def save_run(
    model: tf.keras.Model, record: dict[str, Any], model_dir: Path, run_path: Path
) -> None:
    """Saves a run's model and run file as one unit; the record gains `model_fingerprint`."""
    with atomic_output(run_path) as run_tmp:
        with atomic_directory(model_dir) as tmp:
            _save_keras(model, tmp, model_dir)
            record["model_fingerprint"] = model_fingerprint(tmp)
            write_gzip_json(tmp / RUN_IN_MODEL, record, model_dir / RUN_IN_MODEL)
            write_gzip_json(run_tmp, record, run_path)


def save_finished_run(
    model: tf.keras.Model, record: dict[str, Any], out_dir: Path, log: Callable[[str], None]
) -> tuple[Path, Path]:
    """`model_<hash>/` and `run_<hash>.jsonz` of a finished run into `out_dir`; the backup goes.
    The benchmarks read the lines it logs."""
    run_hash = record["run_hash"]
    model_dir, run_path = out_dir / f"model_{run_hash}", out_dir / f"run_{run_hash}.jsonz"
    out_dir.mkdir(parents=True, exist_ok=True)
    save_run(model, record, model_dir, run_path)
    shutil.rmtree(out_dir / f"backup_{run_hash}", ignore_errors=True)
    log(f"saved model: {model_dir}")
    log(f"saved run file: {run_path}")
    log(f"TensorBoard: {out_dir / f'tb_{run_hash}'}")
    return model_dir, run_path


def saved_variable_shapes(model_dir: Path) -> dict[str, tuple[int, ...]]:
    """Object path -> shape of every variable in the SavedModel's checkpoint."""
    prefix = model_dir / "variables" / "variables"
    if not (model_dir / "saved_model.pb").is_file() or not prefix.with_suffix(".index").is_file():
        raise PipelineError(
            f"{model_dir}: no saved model there; "
            "pass --dir <out_dir>/model_<hash> written by a training script (a layout model "
            "saved as weights.npz by an older version must be retrained)"
        )
    try:
        shapes = tf.train.load_checkpoint(str(prefix)).get_variable_to_shape_map()
    except (tf.errors.OpError, ValueError) as e:
        raise PipelineError(f"{model_dir}: cannot read the saved variables ({e})") from None
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    return {k.removesuffix(suffix): tuple(v) for k, v in shapes.items() if k.endswith(suffix)}


def variable_paths(model: tf.Module) -> dict[str, tuple[int, ...]]:
    """Object path -> shape of every variable of a live model, as its checkpoint names them."""
    found: dict[str, tuple[int, ...]] = {}
    queue: list[tuple[Any, str]] = [(model, "")]
    seen: set[int] = set()
    while queue:
        obj, path = queue.pop(0)
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, tf.Variable):
            found[path] = tuple(obj.shape)
            continue
        for name, child in tf.train.TrackableView(obj).children(obj).items():
            queue.append((child, f"{path}/{name}" if path else name))
    return found


def variable_difference(
    saved: dict[str, tuple[int, ...]], rebuilt: dict[str, tuple[int, ...]], model_name: str
) -> str | None:
    """The first variable that differs between a saved and a rebuilt model, in words."""
    for path in sorted(saved):
        if path not in rebuilt:
            layer = path.rsplit("/", 1)[0]
            return (
                f"the saved variable {path} {list(saved[path])} has no counterpart in the "
                f"rebuilt {model_name} (its layer {layer} is not created, or has another name)"
            )
        if rebuilt[path] != saved[path]:
            return (
                f"variable {path} is {list(saved[path])} in the saved model but "
                f"{list(rebuilt[path])} in the rebuilt {model_name}"
            )
    for path in sorted(rebuilt):
        if path not in saved:
            return (
                f"the rebuilt {model_name} has a variable {path} {list(rebuilt[path])} "
                "that the saved model lacks"
            )
    return None


def copy_saved_variables(model_dir: Path, model: tf.keras.Model) -> None:
    """Copies a saved Keras model's variables into `model`, matched by path and shape."""
    saved = saved_variable_shapes(model_dir)
    difference = variable_difference(saved, variable_paths(model), type(model).__name__)
    if difference:
        raise PipelineError(
            f"{model_dir}: cannot copy the saved weights in: {difference} (saved "
            f"{len(saved)} variables, rebuilt {len(variable_paths(model))}); the class in "
            "models.py or its kwargs differ from those the model was trained with"
        )
    try:
        status = model.load_weights(str(model_dir / "variables" / "variables"))
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PipelineError(
            f"{model_dir}: saved variables do not fit the rebuilt {type(model).__name__} "
            f"({first}); the class in models.py or its kwargs differ from training"
        ) from None
