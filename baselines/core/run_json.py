"""Run records on disk: gzip'd JSON whose bytes are a function of the record alone."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from baselines.core.errors import PipelineError
from baselines.core.io_utils import describe_write_error


def write_gzip_json(path: Path, record: dict[str, Any], dest: Path) -> None:
    """Writes `record` to `path` (a temporary) as deterministic gzip'd JSON; errors name `dest`."""
    try:
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(json.dumps(record, sort_keys=True, default=float).encode())
    except OSError as e:
        raise PipelineError(f"cannot write {dest}: {describe_write_error(e)}") from e


def read_gzip_json(path: Path) -> dict[str, Any]:
    """The JSON object in a gzip'd run file; anything else is one line saying to retrain."""
    try:
        with gzip.open(path, "rb") as f:
            record = json.loads(f.read())
    except (OSError, EOFError, ValueError) as e:
        raise PipelineError(f"{path}: not a readable run file ({e}); retrain the model") from None
    if not isinstance(record, dict):
        raise PipelineError(f"{path}: not a run file (no JSON object); retrain the model")
    return record
