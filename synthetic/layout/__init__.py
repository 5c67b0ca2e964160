"""Deterministic synthetic layout files (layout:{xla,nlp}:{default,random}) for tests and demos.

The real layout collections are hundreds of GB; this package makes small look-alikes
in the real format (keys, order, dtypes, node_splits (1, k), edge_index
in Fortran order, configurations of -1..5, test runtimes hidden as 0):

    graph_id, arrays = generate_file(seed=0, source="nlp", search="random", split="train", index=0)
    write_layout_dataset(Path("data/layout_toy"), {"train": 8, "valid": 3, "test": 3}, seed=0)

Modules: `programs` (program families and their graphs, built on the tile
generator's featurization), `cost_model` (the analytic layout cost model, formula
by formula), `generate` (configurations, runtimes, npz files, the atomic writer).
`data/make_synthetic_layout.py` is the command line.
"""

from synthetic.layout.cost_model import (
    LANES,
    NOISE_SIGMA,
    PAD_NS_PER_BYTE,
    RELEASE_NOISE_SIGMA,
    SUBLANES,
    TRANSPOSE_NS_PER_BYTE,
    layout_cost_terms,
    layout_runtime_ns,
)
from synthetic.layout.generate import (
    ARRAY_DTYPES,
    DEFAULT_COUNTS,
    SEARCHES,
    SOURCES,
    SPLITS,
    family_of,
    generate_file,
    write_layout_dataset,
    write_npz,
)
from synthetic.layout.programs import FAMILIES, build_program

__all__ = [
    "ARRAY_DTYPES",
    "DEFAULT_COUNTS",
    "FAMILIES",
    "LANES",
    "NOISE_SIGMA",
    "PAD_NS_PER_BYTE",
    "RELEASE_NOISE_SIGMA",
    "SEARCHES",
    "SOURCES",
    "SPLITS",
    "SUBLANES",
    "TRANSPOSE_NS_PER_BYTE",
    "build_program",
    "family_of",
    "generate_file",
    "layout_cost_terms",
    "layout_runtime_ns",
    "write_layout_dataset",
    "write_npz",
]
