"""The layout collections (layout:{xla,nlp}:{default,random}): reading, reducing, scoring.

Layout code imports only `baselines.core`, never `baselines.tiles`.
"""

from baselines.layout.data import (
    LayoutGraph,
    dedup_configs,
    layout_minor_to_major,
    list_layout_files,
    load_layout_split,
    prune_to_configurable,
    read_config_count,
    read_layout_file,
    sample_configs,
)
from baselines.layout.metrics import kendall_tau, slowdown_at_k

__all__ = [
    "LayoutGraph",
    "dedup_configs",
    "kendall_tau",
    "layout_minor_to_major",
    "list_layout_files",
    "load_layout_split",
    "prune_to_configurable",
    "read_config_count",
    "read_layout_file",
    "sample_configs",
    "slowdown_at_k",
]
