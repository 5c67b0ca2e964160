"""Kaggle submission for TpuGraphs: `ID,TopConfigs` rankings (indices `;`-separated, best
first), joined to the sample's rows **by ID**, never by row position."""

from __future__ import annotations

import csv
import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from baselines.core.errors import PipelineError
from baselines.core.io_utils import atomic_output

HEADER: tuple[str, str] = ("ID", "TopConfigs")
TILE_PREFIX = "tile:xla:"
LAYOUT_PREFIX = "layout:"
FILL_RANKING = "0;1;2;3;4"
SAMPLE_NAME = "sample_submission.csv"
# Layout collections in the order the Kaggle sample lists them.
LAYOUT_SOURCES: tuple[str, ...] = ("xla", "nlp")
LAYOUT_SEARCHES: tuple[str, ...] = ("default", "random")
# The five collections a Kaggle submission holds, in the order summaries list them.
COLLECTIONS: tuple[str, ...] = ("tile:xla",) + tuple(
    f"layout:{source}:{search}" for source in LAYOUT_SOURCES for search in LAYOUT_SEARCHES
)

_INT_RE = re.compile(r"\d+")
_NEG_RE = re.compile(r"-\d+")
SHOW = 5  # How many offending IDs or indices an error message lists.


def listed(items: Sequence[object], n: int = SHOW) -> str:
    shown = ", ".join(str(item) for item in items[:n])
    return shown + (", ..." if len(items) > n else "")


def _shown_cell(cell: str, limit: int = 60) -> str:
    """A TopConfigs cell for a message: layout rows list thousands of indices."""
    return repr(cell) if len(cell) <= limit else repr(cell[:limit]) + f"... ({len(cell)} chars)"


def parse_top_configs(text: str, where: str) -> list[int]:
    """A TopConfigs cell (`3;0;7`) as distinct non-negative ints; `where` names the line."""
    cell = text.strip()
    if not cell:
        raise PipelineError(f"{where}: TopConfigs is empty")
    indices: list[int] = []
    seen: set[int] = set()
    for part in cell.split(";"):
        token = part.strip()
        if _NEG_RE.fullmatch(token):
            raise PipelineError(
                f"{where}: TopConfigs has a negative index {token!r} in {_shown_cell(cell)}"
            )
        if not _INT_RE.fullmatch(token):
            raise PipelineError(
                f"{where}: TopConfigs {_shown_cell(cell)} is not a ';'-separated list of integers "
                f"(bad entry {token!r})"
            )
        value = int(token)
        if value in seen:
            raise PipelineError(
                f"{where}: TopConfigs repeats index {value} in {_shown_cell(cell)}; "
                "list each index once"
            )
        seen.add(value)
        indices.append(value)
    return indices


def _iter_id_rows(path: Path, what: str) -> Iterator[tuple[int, str, str]]:
    """(line number, ID, raw TopConfigs) of an `ID,TopConfigs` CSV, blank lines skipped."""
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
        yield row_id, cell, parse_top_configs(cell, f"{where} ({row_id})")


def read_rankings_csv(path: str | os.PathLike[str]) -> dict[str, list[int]]:
    """A predictions CSV as {ID: [config indices]} in file order; PipelineError names file, line."""
    return {row_id: ranking for row_id, _, ranking in _unique_id_rows(Path(path), "prediction CSV")}


def read_sample_ids(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Reads a sample submission into [(ID, TopConfigs as written)] in file order."""
    path = Path(path)
    what = "sample submission"
    rows = [(row_id, cell.strip()) for row_id, cell, _ in _unique_id_rows(path, what)]
    if not rows:
        raise PipelineError(f"{what} {path} has a header but no rows")
    return rows


def _npz_stems(directory: Path) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.npz") if p.is_file())


def sample_ids_from_test_dirs(
    tile_test_dir: str | os.PathLike[str], layout_root: str | os.PathLike[str] | None = None
) -> list[tuple[str, str]]:
    """The submission's ID list from downloaded test splits (no sample CSV): tile rows, then
    layout rows when `layout_root` exists, in the sample's order, all `FILL_RANKING`."""
    tile_dir = Path(tile_test_dir)
    has_layout = layout_root is not None and Path(layout_root).is_dir()
    if not tile_dir.is_dir() and not has_layout:
        raise PipelineError(f"tile test directory {tile_dir} not found")
    tile_stems = _npz_stems(tile_dir) if tile_dir.is_dir() else []  # a layout-only set: none
    if tile_dir.is_dir() and not tile_stems:
        raise PipelineError(f"tile test directory {tile_dir} has no .npz files")
    rows = [(f"{TILE_PREFIX}{stem}", FILL_RANKING) for stem in tile_stems]
    if has_layout:
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
    for directory in data_dirs:
        candidate = Path(directory) / SAMPLE_NAME
        if candidate.is_file():
            return candidate
    return None


def collection_of(row_id: str) -> str:
    """The ID without its last `:`-part: `layout:nlp:random:<stem>` -> `layout:nlp:random`."""
    return row_id.rsplit(":", 1)[0] if ":" in row_id else ""


def _collection_order(collections: Iterable[str]) -> list[str]:
    """The five Kaggle collections first (in `COLLECTIONS` order), any other after, sorted."""
    present = set(collections)
    return [c for c in COLLECTIONS if c in present] + sorted(present - set(COLLECTIONS))


def merge_rankings(
    inputs: Sequence[tuple[str, Mapping[str, Sequence[int]]]],
) -> tuple[dict[str, list[int]], dict[str, str]]:
    """({ID: ranking}, {ID: its input's label}) of (label, {ID: ranking}); refuses an ID in two."""
    merged: dict[str, list[int]] = {}
    origin: dict[str, str] = {}
    for label, rankings in inputs:
        clash = [row_id for row_id in rankings if row_id in origin]
        if clash:
            other = origin[clash[0]]
            raise PipelineError(
                f"{len(clash)} IDs of {label} are in {other} too (first: {listed(clash)}); "
                "each ID may come from one input only: drop the rows from one of the files, "
                "or list each file once in --inputcsv"
            )
        for row_id, ranking in rankings.items():
            merged[row_id] = [int(i) for i in ranking]
            origin[row_id] = label
    return merged, origin


def refuse_unknown_ids(
    sample_rows: Sequence[tuple[str, str]],
    rankings: Mapping[str, Sequence[int]],
    origin: Mapping[str, str] | None = None,
    sample_label: str = "the sample submission",
) -> None:
    """Refuses IDs the sample does not list, naming the first input (`origin[ID]`) holding one."""
    sample_ids = {row_id for row_id, _ in sample_rows}
    unknown = [row_id for row_id in rankings if row_id not in sample_ids]
    if not unknown:
        return
    label = (origin or {}).get(unknown[0], "the predictions")
    of_label = [row_id for row_id in rankings if (origin or {}).get(row_id, label) == label]
    bad = [row_id for row_id in of_label if row_id not in sample_ids]
    more = len(unknown) - len(bad)
    elsewhere = f" (and {more} in other inputs)" if more else ""
    raise PipelineError(
        f"{len(bad)} of {len(of_label)} IDs in {label} are not IDs of {sample_label}"
        f"{elsewhere} (first: {listed(bad)}); Kaggle cannot score them: were they "
        "predicted from another split or dataset?"
    )


@dataclasses.dataclass(frozen=True)
class Submission:
    """The joined rows, in the sample's order, with rows and dummy rows per collection."""

    rows: list[tuple[str, str]]
    rows_per_collection: dict[str, int]
    dummy_per_collection: dict[str, int]

    @property
    def dummy(self) -> int:
        return sum(self.dummy_per_collection.values())

    def describe(self) -> str:
        """`894 rows (tile:xla 844, layout:xla:default 8, ...), 0 dummy`; all five collections."""
        names = list(COLLECTIONS) + [
            c for c in _collection_order(self.rows_per_collection) if c not in COLLECTIONS
        ]
        counts = ", ".join(f"{c} {self.rows_per_collection.get(c, 0)}" for c in names)
        text = f"{len(self.rows)} rows ({counts}), {self.dummy} dummy"
        dummies = [(c, n) for c, n in self.dummy_per_collection.items() if n]
        if dummies:
            text += " (" + ", ".join(f"{c} {n}" for c, n in dummies) + ")"
        return text


def join_submission(
    sample_rows: Sequence[tuple[str, str]],
    rankings: Mapping[str, Sequence[int]],
    origin: Mapping[str, str] | None = None,
    allow_missing: bool = False,
    sample_label: str = "the sample submission",
    *,
    dummy_rows: bool = True,
) -> Submission:
    """Joins rankings of every collection to the sample's rows by ID, in the sample's order.

    A dummy row is a sample ID no input provides (tile rows `FILL_RANKING`, others the
    sample's value). A collection no input provides gets dummy rows; one provided in part
    is refused unless `allow_missing`, as are inputs providing no sample ID;
    `dummy_rows=False` refuses any dummy row. `origin` ({ID: label}) names the inputs.
    """
    refuse_unknown_ids(sample_rows, rankings, origin, sample_label)
    for row_id, ranking in rankings.items():
        if len(ranking) == 0:
            label = (origin or {}).get(row_id, "the predictions")
            raise PipelineError(f"{label}: empty ranking for {row_id}")
    ids_per_collection: dict[str, list[str]] = {}
    for row_id, _ in sample_rows:
        ids_per_collection.setdefault(collection_of(row_id), []).append(row_id)
    order = _collection_order(ids_per_collection)
    missing = {c: [i for i in ids_per_collection[c] if i not in rankings] for c in order}
    absent = [c for c in order if len(missing[c]) == len(ids_per_collection[c])]
    partial = [c for c in order if missing[c] and c not in absent]
    if not dummy_rows:
        refused = [c for c in order if missing[c]]
    elif allow_missing:
        refused = []
    elif len(absent) < len(order):
        refused = partial
    else:  # No input provides any sample ID: a file of dummy rows only is no submission.
        refused = absent
    if refused:
        gaps = _gaps(refused, absent, ids_per_collection, missing, rankings, origin)
        raise PipelineError(
            f"{sample_label} lists IDs that no input provides: {'; '.join(gaps)}; "
            + _refusal_hint(dummy_rows, refused == absent)
        )
    rows: list[tuple[str, str]] = []
    for row_id, sample_value in sample_rows:
        if row_id in rankings:
            rows.append((row_id, ";".join(str(int(i)) for i in rankings[row_id])))
        elif row_id.startswith(TILE_PREFIX):
            rows.append((row_id, FILL_RANKING))
        else:
            rows.append((row_id, sample_value))
    return Submission(
        rows=rows,
        rows_per_collection={c: len(ids_per_collection[c]) for c in order},
        dummy_per_collection={c: len(missing[c]) for c in order},
    )


def _gaps(refused, absent, ids_per_collection, missing, rankings, origin) -> list[str]:
    """Per refused collection: how many IDs are missing, and which inputs hold the others."""
    gaps = []
    for collection in refused:
        ids, gone = ids_per_collection[collection], missing[collection]
        if collection in absent:
            gaps.append(f"{collection or '(no collection)'} all {len(ids)} (no input has it)")
        else:
            given = sorted({(origin or {}).get(i, "") for i in ids if i in rankings} - {""})
            where = f" missing from {', '.join(given)}" if given else ""
            gaps.append(f"{collection} {len(gone)} of {len(ids)}{where} (first: {listed(gone)})")
    return gaps


def _refusal_hint(dummy_rows: bool, only_absent: bool) -> str:
    if not dummy_rows:
        return (
            "dummy rows are off (--no_dummy_rows): add every collection's predictions CSV "
            "to --inputcsv, each listing every test file of its collection"
        )
    fix = "a predictions CSV must list every test file of its collection: regenerate it"
    if only_absent:
        fix = "add their predictions CSV to --inputcsv"
    return (
        f"{fix}, or use --allow_missing to give the missing rows dummy rankings "
        f"(tile {FILL_RANKING}, other rows the sample's own)"
    )


def write_csv_atomic(
    path: str | os.PathLike[str], header: Sequence[str], rows: Iterable[Sequence[str]]
) -> None:
    with atomic_output(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
