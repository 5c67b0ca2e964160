"""Where a saved run's record is, and lists of model folders. No TensorFlow, no numpy."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from baselines.core.errors import PipelineError
from baselines.core.run_json import read_gzip_json

# The run file's copy inside the model folder: the record that belongs to it.
RUN_IN_MODEL = "run.jsonz"


def run_file_beside(model_dir: Path, script: str) -> Path:
    """`<out>/run_<hash>.jsonz` beside `<out>/model_<hash>` (`script` wrote it)."""
    name = model_dir.name
    if not name.startswith("model_"):
        raise PipelineError(
            f"{model_dir}: expected a folder named model_<hash> written by {script}"
        )
    return model_dir.parent / f"run_{name.removeprefix('model_')}.jsonz"


def run_file_of(model_dir: Path, script: str) -> Path:
    """The run record of an existing model folder: the copy inside, else the one beside."""
    model_dir = Path(model_dir).expanduser()
    if not model_dir.is_dir():
        raise PipelineError(f"{model_dir}: model folder not found; pass --dir <out>/model_<hash>")
    inside = model_dir / RUN_IN_MODEL
    path = inside if inside.is_file() else run_file_beside(model_dir, script)
    if not path.is_file():
        raise PipelineError(f"{path}: run file not found; it is written by {script}")
    return path


def model_dirs(text: str, flag: str) -> list[Path]:
    """The folders of a comma-separated `--dir` list; an empty item or a repeat is refused."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or any(not item for item in items):
        raise PipelineError(
            f"{flag}: empty item in {text!r}; give model folders separated by commas, "
            "e.g. out/model_<hash1>,out/model_<hash2>"
        )
    dirs = [Path(item).expanduser() for item in items]
    if len(set(dirs)) != len(dirs):
        raise PipelineError(f"{flag}: a model is listed twice in {text!r}")
    return dirs


def model_fingerprint(model_dir: Path) -> str:
    """BLAKE2b of every file of a saved model (names and bytes), the run copy excluded."""
    h = hashlib.blake2b(digest_size=16)
    for f in sorted(p for p in Path(model_dir).rglob("*") if p.is_file()):
        relative = f.relative_to(model_dir).as_posix()
        if relative == RUN_IN_MODEL:
            continue
        h.update(f"{relative}\0{f.stat().st_size}\0".encode())
        with open(f, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def check_fingerprint(record: dict, model_dir: Path, run_path: Path) -> None:
    """PipelineError unless the record's `model_fingerprint` (if any) is the folder's."""
    expected = record.get("model_fingerprint")
    if expected is not None and expected != model_fingerprint(model_dir):
        raise PipelineError(
            f"{run_path}: belongs to another model than {model_dir} (model fingerprint "
            "differs: the model or run file was changed or half replaced); retrain the model"
        )


TRAIN_SCRIPTS = {"tile": "tiles_train.py", "layout": "layout_train.py"}
PREDICT_SCRIPTS = {
    "tile": "tiles_gen_predictions_csv.py",
    "layout": "layout_gen_predictions_csv.py",
}


def read_record(path: Path, collection: str, required: Sequence[str]) -> dict[str, Any]:
    """The run record at `path`, refused if another collection's or lacking a `required` field."""
    script = TRAIN_SCRIPTS[collection]
    if not path.is_file():
        raise PipelineError(f"{path}: run file not found; it is written by {script}")
    record = read_gzip_json(path)
    found = record.get("collection", "tile")
    if found != collection:
        where = path.parent if path.name == RUN_IN_MODEL else path
        if found in PREDICT_SCRIPTS:
            raise PipelineError(f"{where} is a {found} model; use {PREDICT_SCRIPTS[found]}")
        raise PipelineError(f"{path}: not a {collection} run file (written by {script})")
    missing = [k for k in required if k not in record]
    if missing:
        raise PipelineError(f"{path}: run file lacks {', '.join(missing)}; retrain the model")
    return record


def read_run(model_dir: Path, collection: str, required: Sequence[str]) -> dict[str, Any]:
    """The run record of `model_dir`, checked by `read_record` and `check_fingerprint`."""
    model_dir = Path(model_dir).expanduser()
    path = run_file_of(model_dir, TRAIN_SCRIPTS[collection])
    record = read_record(path, collection, required)
    check_fingerprint(record, model_dir, path)
    return record


def read_runs(
    text: str, flag: str, read: Callable[[Path], dict[str, Any]]
) -> list[tuple[Path, dict[str, Any]]]:
    return [(d, read(d)) for d in model_dirs(text, flag)]
