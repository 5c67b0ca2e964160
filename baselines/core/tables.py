"""Text tables of result rows (markdown, CSV) for the evaluation scripts and benchmarks."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence


def cell(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _check_widths(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells under {len(header)} columns: {row}")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table: the header, a `|---|` rule, one line per row (cells as str())."""
    _check_widths(header, rows)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def csv_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The same rows as CSV (header line first, "\\n" line ends)."""
    _check_widths(header, rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()
