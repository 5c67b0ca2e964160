"""Kaggle submission for TpuGraphs: read rankings, join them to the sample by ID.

A submission is a CSV with header `ID,TopConfigs`; TopConfigs is a `;`-separated
list of config indices, best first. The Kaggle sample submission lists every ID
the competition expects (844 `tile:xla:<id>` rows, then 50 `layout:...` rows), in
its own order. `build_submission` fills the tile rows from a predictions CSV,
joining **by ID** (never by row position), keeps the layout rows' dummy values,
and refuses missing or unknown IDs instead of writing a wrong file.

Dummy rankings: rows this module has to invent get `0;1;2;3;4` (`FILL_RANKING`):
tile rows filled under `allow_missing`, and every row of an ID list built from
the test directories when no sample submission exists (tile rows there are
replaced by predictions; layout rows keep the dummy). Rows read from a sample
submission keep the sample's own value (the real sample has `0;1;...;999` for
layout rows).
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_output, describe_write_error

HEADER: tuple[str, str] = ("ID", "TopConfigs")
TILE_PREFIX = "tile:xla:"
LAYOUT_PREFIX = "layout:"
FILL_RANKING = "0;1;2;3;4"
SAMPLE_NAME = "sample_submission.csv"
# Layout collections in the order the Kaggle sample lists them.
LAYOUT_SOURCES: tuple[str, ...] = ("xla", "nlp")
LAYOUT_SEARCHES: tuple[str, ...] = ("default", "random")

_INT_RE = re.compile(r"\d+")
_NEG_RE = re.compile(r"-\d+")
_SHOW = 5  # How many offending IDs an error message lists.


def _first(items: Sequence[str], n: int = _SHOW) -> str:
    shown = ", ".join(items[:n])
    return shown + (", ..." if len(items) > n else "")


def parse_top_configs(text: str, where: str) -> list[int]:
    """Parses a TopConfigs cell (`3;0;7`) into distinct non-negative ints.

    `where` names the file and line for the error message.
    """
    cell = text.strip()
    if not cell:
        raise PipelineError(f"{where}: TopConfigs is empty")
    indices: list[int] = []
    seen: set[int] = set()
    for part in cell.split(";"):
        token = part.strip()
        if _NEG_RE.fullmatch(token):
            raise PipelineError(f"{where}: TopConfigs has a negative index {token!r} in {cell!r}")
        if not _INT_RE.fullmatch(token):
            raise PipelineError(
                f"{where}: TopConfigs {cell!r} is not a ';'-separated list of integers "
                f"(bad entry {token!r})"
            )
        value = int(token)
        if value in seen:
            raise PipelineError(f"{where}: TopConfigs repeats index {value} in {cell!r}")
        seen.add(value)
        indices.append(value)
    return indices


def _iter_id_rows(path: Path, what: str) -> Iterator[tuple[int, str, str]]:
    """Yields (line number, ID, raw TopConfigs) of an `ID,TopConfigs` CSV.

    Checks that the file exists, the header is exactly `ID,TopConfigs`, every row
    has two fields and a non-empty ID. Blank lines are skipped. `what` names the
    kind of file in messages ("prediction CSV", "sample submission").
    """
    if not path.exists():
        raise PipelineError(f"{what} {path} not found")
    if not path.is_file():
        raise PipelineError(f"{what} {path} is not a file")
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise PipelineError(f"{what} {path} is empty; expected the header ID,TopConfigs")
            if [h.strip() for h in header] != list(HEADER):
                raise PipelineError(
                    f"{what} {path} line 1: header is {','.join(header)!r}, "
                    "expected 'ID,TopConfigs'"
                )
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                where = f"{what} {path} line {reader.line_num}"
                if len(row) != 2:
                    raise PipelineError(
                        f"{where}: expected 2 fields (ID,TopConfigs), got {len(row)}"
                    )
                row_id = row[0].strip()
                if not row_id:
                    raise PipelineError(f"{where}: ID is empty")
                yield reader.line_num, row_id, row[1]
    except UnicodeDecodeError as e:
        raise PipelineError(f"{what} {path} is not UTF-8 text ({e.reason})") from e
    except csv.Error as e:
        raise PipelineError(f"{what} {path}: malformed CSV ({e})") from e
    except OSError as e:
        raise PipelineError(f"cannot read {what} {path}: {e.strerror or e}") from e


def _unique_id_rows(path: Path, what: str) -> Iterator[tuple[str, str, list[int]]]:
    """(ID, TopConfigs text, parsed indices) per row; refuses duplicate IDs."""
    first_line: dict[str, int] = {}
    for line, row_id, cell in _iter_id_rows(path, what):
        where = f"{what} {path} line {line}"
        if row_id in first_line:
            raise PipelineError(
                f"{where}: duplicate ID {row_id} (first seen on line {first_line[row_id]})"
            )
        first_line[row_id] = line
        yield row_id, cell, parse_top_configs(cell, where)


def read_rankings_csv(path: str | os.PathLike[str]) -> dict[str, list[int]]:
    """Reads a predictions CSV `ID,TopConfigs` into {ID: [config indices]}.

    The dict keeps the file's row order. Raises `PipelineError` naming the file
    and line for a missing file, a missing or wrong header, a malformed TopConfigs
    (empty, non-integer, negative, an index repeated in a row) and duplicate IDs.
    """
    return {row_id: ranking for row_id, _, ranking in _unique_id_rows(Path(path), "prediction CSV")}


def read_sample_ids(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Reads a sample submission into [(ID, TopConfigs as written)] in file order.

    Raises `PipelineError` naming the file and line when the file is missing, has
    no or a wrong header, has no rows, a malformed TopConfigs or a duplicate ID.
    """
    path = Path(path)
    what = "sample submission"
    rows = [(row_id, cell.strip()) for row_id, cell, _ in _unique_id_rows(path, what)]
    if not rows:
        raise PipelineError(f"{what} {path} has a header but no rows")
    return rows


def _npz_stems(directory: Path) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.npz") if p.is_file())


def sample_ids_from_test_dirs(
    tile_test_dir: str | os.PathLike[str],
    layout_root: str | os.PathLike[str] | None = None,
) -> list[tuple[str, str]]:
    """Builds the submission's ID list from downloaded test splits (no sample CSV).

    Tile rows: `tile:xla:<stem>` for each `*.npz` in `tile_test_dir`, sorted by
    name. Layout rows, when `layout_root` (`<data>/npz/layout`) exists:
    `layout:<source>:<search>:<stem>` for `<layout_root>/<source>/<search>/test/*.npz`,
    sources xla then nlp, searches default then random (the sample's order),
    names sorted. Every row gets the dummy ranking `0;1;2;3;4` (`FILL_RANKING`);
    tile rows are meant to be replaced by predictions.
    """
    tile_dir = Path(tile_test_dir)
    if not tile_dir.is_dir():
        raise PipelineError(f"tile test directory {tile_dir} not found")
    tile_stems = _npz_stems(tile_dir)
    if not tile_stems:
        raise PipelineError(f"tile test directory {tile_dir} has no .npz files")
    rows = [(f"{TILE_PREFIX}{stem}", FILL_RANKING) for stem in tile_stems]
    if layout_root is not None and Path(layout_root).is_dir():
        root = Path(layout_root)
        for source in LAYOUT_SOURCES:
            for search in LAYOUT_SEARCHES:
                test_dir = root / source / search / "test"
                if test_dir.is_dir():
                    rows.extend(
                        (f"{LAYOUT_PREFIX}{source}:{search}:{stem}", FILL_RANKING)
                        for stem in _npz_stems(test_dir)
                    )
    return rows


def find_sample_submission(data_dirs: Iterable[str | os.PathLike[str]]) -> Path | None:
    """Returns the first `<dir>/sample_submission.csv` that is a file, else None."""
    for directory in data_dirs:
        candidate = Path(directory) / SAMPLE_NAME
        if candidate.is_file():
            return candidate
    return None


def build_submission(
    sample_rows: Sequence[tuple[str, str]],
    tile_rankings: Mapping[str, Sequence[int]],
    allow_missing: bool = False,
    predictions_label: str = "the predictions",
    sample_label: str = "the sample submission",
) -> tuple[list[tuple[str, str]], int]:
    """Joins predicted tile rankings to the sample's rows by ID.

    Returns (rows, filled): rows are exactly the sample's IDs in the sample's
    order; `tile:xla:` rows carry `;`.join of their predicted indices, other rows
    (layout) keep the sample's value. Raises `PipelineError` when a prediction ID
    is not a tile ID of the sample, when a prediction is empty, or when sample tile
    IDs have no prediction, unless `allow_missing`, which fills those with
    `0;1;2;3;4` and counts them in `filled`. `predictions_label` and
    `sample_label` name the two inputs in messages.
    """
    tile_ids = [row_id for row_id, _ in sample_rows if row_id.startswith(TILE_PREFIX)]
    tile_set = set(tile_ids)
    unknown = [row_id for row_id in tile_rankings if row_id not in tile_set]
    if unknown:
        raise PipelineError(
            f"{len(unknown)} of {len(tile_rankings)} IDs in {predictions_label} are not "
            f"tile:xla IDs of {sample_label} (first: {_first(unknown)}); "
            "were they predicted from another split or dataset?"
        )
    for row_id, ranking in tile_rankings.items():
        if len(ranking) == 0:
            raise PipelineError(f"{predictions_label}: empty ranking for {row_id}")
    missing = [row_id for row_id in tile_ids if row_id not in tile_rankings]
    if missing and not allow_missing:
        raise PipelineError(
            f"{len(missing)} of {len(tile_ids)} tile IDs of {sample_label} have no "
            f"prediction in {predictions_label} (first: {_first(missing)}); "
            f"use --allow_missing to fill them with {FILL_RANKING}"
        )
    rows: list[tuple[str, str]] = []
    for row_id, sample_value in sample_rows:
        if not row_id.startswith(TILE_PREFIX):
            rows.append((row_id, sample_value))
        elif row_id in tile_rankings:
            rows.append((row_id, ";".join(str(int(i)) for i in tile_rankings[row_id])))
        else:
            rows.append((row_id, FILL_RANKING))
    return rows, len(missing)


def write_csv_atomic(
    path: str | os.PathLike[str], header: Sequence[str], rows: Iterable[Sequence[str]]
) -> None:
    """Writes a CSV (`\\n` line ends) atomically: the complete file or nothing."""
    with atomic_output(path) as tmp:
        try:
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                writer = csv.writer(f, lineterminator="\n")
                writer.writerow(header)
                writer.writerows(rows)
        except OSError as e:
            raise PipelineError(f"cannot write {path}: {describe_write_error(e)}") from e
