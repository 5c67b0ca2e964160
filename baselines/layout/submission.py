"""Checks the layout rows of a Kaggle submission: each must be a permutation of 0..c-1, c the
configuration count of its test file (its header only), else of 0..len-1."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from baselines.core.errors import PipelineError
from baselines.core.submission import LAYOUT_PREFIX, LAYOUT_SEARCHES, LAYOUT_SOURCES, listed
from baselines.layout.data import read_config_count


def layout_test_file(layout_root: Path, row_id: str) -> Path | None:
    """`<layout_root>/<source>/<search>/test/<stem>.npz` of a layout ID; None for others."""
    parts = row_id.split(":")
    if (
        len(parts) != 4
        or parts[0] != LAYOUT_PREFIX.rstrip(":")
        or parts[1] not in LAYOUT_SOURCES
        or parts[2] not in LAYOUT_SEARCHES
        or not parts[3]
    ):
        return None
    return layout_root / parts[1] / parts[2] / "test" / f"{parts[3]}.npz"


def permutation_problem(ranking: Sequence[int], count: int) -> str | None:
    """What keeps `ranking` from being a permutation of 0..count-1, or None:
    `missing 2 (3, 7); duplicated 1 (5); out of range 1 (1000)`."""
    seen: set[int] = set()
    duplicated: list[int] = []
    out_of_range: list[int] = []
    for index in ranking:
        index = int(index)
        if not 0 <= index < count:
            out_of_range.append(index)
        elif index in seen:
            duplicated.append(index)
        seen.add(index)
    missing = [i for i in range(count) if i not in seen]
    parts = [
        f"{name} {len(values)} ({listed(values)})"
        for name, values in (
            ("missing", missing),
            ("duplicated", duplicated),
            ("out of range", out_of_range),
        )
        if values
    ]
    return "; ".join(parts) or None


@dataclasses.dataclass(frozen=True)
class LayoutCheck:
    """How the layout rows were checked: against a test file, or only by their length."""

    layout_root: Path
    with_file: int
    without_file: list[str]

    def describe(self) -> str:
        total = self.with_file + len(self.without_file)
        text = (
            f"layout rows: {self.with_file} of {total} checked against their test file's "
            f"configuration count in {self.layout_root}"
        )
        if self.without_file:
            text += (
                f"; test file not found for {len(self.without_file)} (first: "
                f"{self.without_file[0]}), checked only to be a permutation of 0..len-1 "
                "(--layout_root names the folder of <source>/<search>/test/*.npz)"
            )
        return text


def check_layout_rankings(
    rankings: Mapping[str, Sequence[int]], origin: Mapping[str, str], layout_root: Path
) -> LayoutCheck | None:
    """Checks every layout row (module docstring), naming `origin[ID]`; None without any."""
    layout_ids = [row_id for row_id in rankings if row_id.startswith(LAYOUT_PREFIX)]
    if not layout_ids:
        return None
    with_file = 0
    without_file: list[str] = []
    for row_id in layout_ids:
        ranking = rankings[row_id]
        test_file = layout_test_file(layout_root, row_id)
        if test_file is not None and test_file.is_file():
            count = read_config_count(test_file)
            against = f"its test file {test_file} ({count} configurations, 0..{count - 1})"
            with_file += 1
        else:
            count = len(ranking)
            where = f"its test file {test_file} was not found" if test_file else "no test file"
            against = f"0..{count - 1} ({where})"
            without_file.append(row_id)
        problem = permutation_problem(ranking, count)
        if problem:
            raise PipelineError(
                f"{origin.get(row_id, 'the predictions')}: the ranking of {row_id} "
                f"({len(ranking)} indices) is not a permutation of {against}: {problem}; "
                "list every configuration index of the test file once, fastest first"
            )
    return LayoutCheck(layout_root=layout_root, with_file=with_file, without_file=without_file)
