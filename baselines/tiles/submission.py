"""Moved to `baselines.core.submission` (the join serves tile and layout rows alike).

Kept so that `from baselines.tiles.submission import ...` still works.
"""

from baselines.core.submission import (
    FILL_RANKING,
    HEADER,
    LAYOUT_PREFIX,
    SAMPLE_NAME,
    TILE_PREFIX,
    find_sample_submission,
    join_submission,
    parse_top_configs,
    read_rankings_csv,
    read_sample_ids,
    sample_ids_from_test_dirs,
    write_csv_atomic,
)

__all__ = [
    "FILL_RANKING",
    "HEADER",
    "LAYOUT_PREFIX",
    "SAMPLE_NAME",
    "TILE_PREFIX",
    "find_sample_submission",
    "join_submission",
    "parse_top_configs",
    "read_rankings_csv",
    "read_sample_ids",
    "sample_ids_from_test_dirs",
    "write_csv_atomic",
]
