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

from pathlib import Path
from typing import Any

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_output
from baselines.core.run_json import write_gzip_json
from baselines.core.saved_model import copy_saved_variables, saved_variable_shapes, variable_paths
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
