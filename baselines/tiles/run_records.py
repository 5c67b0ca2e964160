"""Reading a run record without TensorFlow: where it is, its fingerprint check, its fields.

`tiles_gen_predictions_csv.py` reads the record (and its feature statistics)
before TensorFlow is imported, so the data can be read and normalized in
another process meanwhile. `run_files` re-exports the record functions;
`read_model_list` reads a --dir / --dirs list of model folders.

    record, stats = read_run_for_model(out_dir / f"model_{h}")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from baselines.core.errors import PipelineError
from baselines.core.run_files import (
    RUN_IN_MODEL,
    check_fingerprint,
    model_dirs,
    model_fingerprint,  # noqa: F401 (re-exported)
    run_file_beside,
    run_file_of,
)
from baselines.core.run_json import read_gzip_json
from baselines.tiles.features import FeatureStats


def run_file_for(model_dir: Path) -> Path:
    """`<out>/run_<hash>.jsonz` beside `<out>/model_<hash>`."""
    return run_file_beside(model_dir, "tiles_train.py")


def read_run_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise PipelineError(f"{path}: run file not found; it is written by tiles_train.py")
    record = read_gzip_json(path)
    if record.get("collection") == "layout":
        raise PipelineError(
            f"{path.parent if path.name == RUN_IN_MODEL else path} is a layout model; "
            "use layout_gen_predictions_csv.py"
        )
    missing = [k for k in ("model", "model_kwargs", "configs", "feature_stats") if k not in record]
    if missing:
        raise PipelineError(f"{path}: run file lacks {', '.join(missing)}; retrain the model")
    return record


def read_run_for_model(model_dir: Path) -> tuple[dict[str, Any], FeatureStats]:
    """The run record of `model_dir` and its feature statistics.

    The copy inside the folder when there is one (written with the model, so
    it always belongs to it); else the run file beside it (models saved before
    the copy existed). A record's `model_fingerprint` must match the folder's
    files: a model is never paired with another run's record.
    """
    model_dir = Path(model_dir).expanduser()
    run_path = run_file_of(model_dir, "tiles_train.py")
    record = read_run_file(run_path)
    check_fingerprint(record, model_dir, run_path)
    return record, FeatureStats.from_dict(record["feature_stats"])


def read_model_list(text: str, flag: str) -> list[tuple[Path, dict[str, Any]]]:
    """Model folders from a comma-separated list, each with its run record.

    Refuses empty items, missing folders or run files, and a folder listed twice.
    """
    models = []
    for d in model_dirs(text, flag):
        if not d.is_dir():
            raise PipelineError(f"{flag}: {d}: model folder not found; pass <out_dir>/model_<hash>")
        models.append((d, read_run_for_model(d)[0]))
    return models
