"""A trained run on disk: `model_<hash>/` (Keras SavedModel) and `run_<hash>.jsonz`.

The run file is gzip'd JSON with `args`, `train_curve`, `final_error`,
`test_predictions` (as the baseline writes) plus what rebuilding needs:
`model`, `model_kwargs`, `configs`, `opcode_vocab_size` and `feature_stats`.

Model and run file are one unit: `save_run` writes the model folder with a
copy of the run file inside (`model_<hash>/run.jsonz`) and the run file's
`model_fingerprint` (a hash of the model's files), both complete before
either is renamed into place; the folder is then swapped in by one rename.
Readers take the copy inside the folder, so a model is never read with
another run's statistics, even after a kill between the two renames; a
model folder from before this layout is read with the run file beside it,
whose fingerprint, when it has one, must match.

    save_run(model, record, out_dir / f"model_{h}", out_dir / f"run_{h}.jsonz")
    model, record, stats = load_trained_model(out_dir / f"model_{h}")
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import tensorflow as tf

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_directory, atomic_output, describe_write_error
from baselines.core.run_json import write_gzip_json
from baselines.tiles.data import OPCODE_VOCAB_SIZE
from baselines.tiles.features import FeatureStats
from baselines.tiles.model_base import TileModel
from baselines.tiles.model_builder import build_model, create_variables, resolve_model_kwargs
from baselines.tiles.run_records import (  # noqa: F401 (re-exported for callers)
    RUN_IN_MODEL,
    model_fingerprint,
    read_run_file,
    read_run_for_model,
    run_file_for,
)


def write_run_file(path: Path, record: dict[str, Any]) -> None:
    with atomic_output(path) as tmp:
        write_gzip_json(tmp, record, path)


def _save_keras(model: TileModel, folder: Path, dest: Path) -> None:
    """`model.save` into `folder`; a refused write is one line naming `dest`.

    Saved without traced functions (`save_traces=False`): tracing every layer's
    call for the SavedModel costs seconds a run, and nothing here executes
    those traces. The folder holds the
    variables and the model's config; `tf.keras.models.load_model` rebuilds it
    once `baselines.tiles.models` is imported (defining a model class registers it).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.save(folder, include_optimizer=False, save_traces=False)
    except (OSError, tf.errors.OpError) as e:
        # TensorFlow's writers report a full disk as ResourceExhaustedError.
        raise PipelineError(f"cannot write {dest}: {describe_write_error(e)}") from e


def save_model(model: TileModel, model_dir: Path) -> None:
    """Keras SavedModel alone at `model_dir`, written to a temporary folder and renamed."""
    with atomic_directory(model_dir) as tmp:
        _save_keras(model, tmp, model_dir)


def save_run(model: TileModel, record: dict[str, Any], model_dir: Path, run_path: Path) -> None:
    """Saves a run's model and run file as one unit; returns once both are in place.

    Everything is written to temporaries first (the model folder with its
    run copy and the run file), so a full disk or any error leaves the
    previous pair as it was and no temporaries. Then the folder is swapped in
    (one rename: it carries its own record) and the run file renamed beside
    it. The record gains `model_fingerprint`.
    """
    with atomic_output(run_path) as run_tmp:
        with atomic_directory(model_dir) as tmp:
            _save_keras(model, tmp, model_dir)
            record["model_fingerprint"] = model_fingerprint(tmp)
            write_gzip_json(tmp / RUN_IN_MODEL, record, model_dir / RUN_IN_MODEL)
            write_gzip_json(run_tmp, record, run_path)


def build_from_record(record: dict[str, Any]) -> TileModel:
    """The run's model class with its kwargs, its standard parts' variables created."""
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


def copy_saved_variables(model_dir: Path, model: TileModel) -> None:
    """Copies the saved Keras model's variables into `model`, which has all of its own.

    Variables are matched by their path in the model (`convs/0/self_dense/kernel`,
    ...), as Keras itself restores them. Paths and shapes must agree; the
    first disagreement is named in one line.
    """
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


def restore_model(model_dir: Path, record: dict[str, Any]) -> TileModel:
    """Rebuilds the run's model class and copies the saved Keras model's weights in.

    The variables are created as training created them: from the known widths
    (`build`) and, when the saved model holds variables that this leaves
    out (a layer only a call builds, e.g. one a student added), by one forward
    pass on a tiny kernel. A class or kwargs that still do not fit fail with
    the first differing variable named.
    """
    model_dir = Path(model_dir).expanduser()
    model = build_from_record(with_saved_layout(record, model_dir))
    if variable_paths(model).keys() != saved_variable_shapes(model_dir).keys():
        create_variables(model, compiled=True)
    copy_saved_variables(model_dir, model)
    return model


def with_saved_layout(record: dict[str, Any], model_dir: Path) -> dict[str, Any]:
    """`record`, with `cheb_layout` set for a ChebSAGE saved before that kwarg existed.

    ChebSAGE had parallel branches only, and run files keep the kwargs the user
    gave, so a record without `cheb_layout` may be of either layout; the saved
    variables tell (parallel ones live under `cheb_branch/`).
    """
    if record.get("model") != "ChebSAGE":
        return record
    kwargs = resolve_model_kwargs("ChebSAGE", record["model_kwargs"])
    if "cheb_layout" in kwargs:
        return record
    parallel = any(path.startswith("cheb_branch/") for path in saved_variable_shapes(model_dir))
    layout = "parallel" if parallel else "interleaved"
    return {**record, "model_kwargs": {**record["model_kwargs"], "cheb_layout": layout}}


def load_trained_model(model_dir: Path) -> tuple[TileModel, dict[str, Any], FeatureStats]:
    """Rebuilds the run's model, copies the saved weights in, returns it with its stats."""
    record, stats = read_run_for_model(model_dir)
    return restore_model(model_dir, record), record, stats
