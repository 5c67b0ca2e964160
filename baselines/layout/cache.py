"""A memory-mapped, content-keyed, verified cache of a layout split as the reader returns it:
every graph's arrays concatenated, plus offsets (`_ROWS`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from baselines.core.array_cache import (
    check_array_folder,
    discard_directory,
    files_fingerprint,
    offsets_problem,
    write_array_folder,
)
from baselines.core.errors import PipelineError
from baselines.core.format import NODE_FEAT_DIM
from baselines.core.io_utils import (
    check_writable_dir,
    describe_write_error,
    remove_stale_temporaries,
)
from baselines.layout.codebook import NIBBLE_ROWS, Codebook, pack_codes
from baselines.layout.graph import NODE_CONFIG_FEAT_DIM, LayoutGraph

# Bump when the folder's layout or the reader's validation rules change.
LAYOUT_CACHE_VERSION = 3

# Every cached array's row shape and dtype. `config_codes`: (c, nc) `code_bits`-wide codes;
# node i's features are `node_feat_rows[node_feat_index[i]]`.
_ROWS = {
    "node_feat_rows": ((NODE_FEAT_DIM,), "float32"),
    "node_feat_index": ((), "int32"),
    "node_opcode": ((), "int32"),
    "edge_index": ((2,), "int32"),
    "node_config_ids": ((), "int32"),
    "row_counts": ((), "int64"),
    "codebook_rows": ((NODE_CONFIG_FEAT_DIM,), "int8"),
    "config_codes": ((), "uint8"),
    "config_runtime": ((), "int64"),
    "node_splits": ((), "int64"),
}
# Which offsets cut which arrays' rows into graphs.
_OFFSETS_OF = {
    "node_offsets": ("node_feat_index", "node_opcode"),
    "feat_row_offsets": ("node_feat_rows",),
    "edge_offsets": ("edge_index",),
    "configurable_offsets": ("node_config_ids", "row_counts"),
    "codebook_offsets": ("codebook_rows",),
    "code_offsets": ("config_codes",),
    "config_offsets": ("config_runtime",),
    "split_offsets": ("node_splits",),
}
_LAYOUT = {
    **_ROWS,
    **{name: ((), "int64") for name in _OFFSETS_OF},
    "code_bits": ((), "int64"),
    "graph_ids": ((), None),
}
FIELDS = tuple(_LAYOUT)


CACHE_DIR_HELP = (
    "folder for memory-mapped caches of the read splits, shared by layout_train.py, "
    "layout_gen_predictions_csv.py and layout_evaluate.py (None = no cache; not hashed)"
)


def prepare_cache_dir(
    cache_dir: Path | str | None, log: Callable[[str], None] = print
) -> Path | None:
    """The cache folder of `--cache_dir` (None: no cache), checked writable, leftovers removed."""
    if cache_dir is None:
        return None
    cache = Path(cache_dir).expanduser()
    check_writable_dir(cache, "--cache_dir")
    remove_stale_temporaries(cache, log)
    return cache


def layout_cache_path(cache_dir: Path | str, folder: Path | str, files: Sequence[Path]) -> Path:
    """`<cache_dir>/layout-<split>-<fingerprint of the files>`, the folder a split caches to."""
    key = files_fingerprint(files, salt=f"layout v{LAYOUT_CACHE_VERSION}")
    return Path(cache_dir).expanduser() / f"layout-{Path(folder).name}-{key}"


def save_layout_cache(graphs: Iterable[LayoutGraph], cache_path: Path, name: str) -> None:
    """Writes graphs (one at a time) as a cache folder, atomically (nothing if `graphs` raises)."""
    with write_array_folder(cache_path, _LAYOUT, name=name, version=LAYOUT_CACHE_VERSION) as writer:
        ids: list[str] = []
        sizes: dict[str, list[int]] = {offsets: [0] for offsets in _OFFSETS_OF}
        code_bits: list[int] = []
        for graph in graphs:
            ids.append(graph.graph_id)
            book = graph.configs
            packed = book.row_counts.max(initial=1) <= NIBBLE_ROWS
            codes = pack_codes(book.codes_of()) if packed else book.codes_of()
            feat_rows, feat_index = distinct_rows(graph.node_feat)
            parts = {
                "node_feat_rows": feat_rows,
                "node_feat_index": feat_index,
                "row_counts": book.row_counts,
                "codebook_rows": book.rows,
                "config_codes": np.ascontiguousarray(codes).reshape(-1).view(np.uint8),
            }
            code_bits.append(4 if packed else 8 * codes.dtype.itemsize)
            for field in _ROWS:
                part = parts[field] if field in parts else getattr(graph, field)
                writer.append(field, part)
                parts[field] = part
            for offsets, (owner, *_) in _OFFSETS_OF.items():
                sizes[offsets].append(sizes[offsets][-1] + parts[owner].shape[0])
        for offsets, values in sizes.items():
            writer.append(offsets, np.asarray(values, dtype=np.int64))
        writer.append("code_bits", np.asarray(code_bits, dtype=np.int64))
        writer.append("graph_ids", np.array(ids, dtype=str).reshape(-1))


def distinct_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`values`' distinct rows (bit for bit) and int32 per row: `rows[index]` is `values`."""
    values = np.ascontiguousarray(values)
    if values.shape[0] == 0:
        return values, np.zeros(0, np.int32)
    keys = values.view(np.dtype((np.void, values.dtype.itemsize * values.shape[1])))[:, 0]
    _, first, index = np.unique(keys, return_index=True, return_inverse=True)
    return values[first], index.reshape(-1).astype(np.int32)


def _structure_problem(arrays: dict[str, np.ndarray]) -> str | None:
    """What is wrong with a cached split's widths, dtypes and offsets (cheap: O(graphs))."""
    for field, (row, dtype) in _LAYOUT.items():
        value = arrays[field]
        if dtype is None:
            continue
        if value.dtype != np.dtype(dtype) or tuple(value.shape[1:]) != row:
            return f"{field}.npy is {value.dtype} {value.shape}, expected {dtype} rows of {row}"
    ids = arrays["graph_ids"]
    if ids.dtype.kind != "U" or ids.ndim != 1:
        return "graph_ids.npy is not a list of names"
    for offsets, owners in _OFFSETS_OF.items():
        problem = offsets_problem(arrays, offsets, owners, ids.shape[0], "graphs")
        if problem:
            return problem
    configs = np.diff(arrays["config_offsets"])
    configurable = np.diff(arrays["configurable_offsets"])
    bits = np.asarray(arrays["code_bits"])
    if bits.shape != ids.shape or not np.all(np.isin(bits, (4, 8, 16, 32))):
        return "code_bits.npy does not give 4, 8, 16 or 32 bits per graph"
    per_config = np.where(bits == 4, (configurable + 1) // 2, configurable * bits // 8)
    if np.any(np.diff(arrays["code_offsets"]) != configs * per_config):
        return "config_codes.npy does not hold configurations x configurable nodes codes"
    nodes = np.diff(arrays["node_offsets"])
    limit = np.repeat(np.diff(arrays["feat_row_offsets"]), nodes)  # rows of each node's graph
    index = np.asarray(arrays["node_feat_index"])
    if np.any(index < 0) or np.any(index >= limit):
        return "node_feat_index.npy points past its graph's node_feat_rows.npy"
    counts = np.asarray(arrays["row_counts"])
    cut = np.asarray(arrays["configurable_offsets"])
    rows = np.array([counts[a:b].sum() for a, b in zip(cut[:-1], cut[1:])], dtype=np.int64)
    if np.any(np.diff(arrays["codebook_offsets"]) != rows) or np.any(counts < 1):
        return "row_counts.npy does not cut codebook_rows.npy into every node's rows"
    return None


def _graphs(arrays: dict[str, np.ndarray]) -> list[LayoutGraph]:
    """The graphs of checked cache arrays, as views into them (no array is copied)."""
    cut = {name: np.asarray(arrays[name]) for name in _OFFSETS_OF}
    bits = np.asarray(arrays["code_bits"])
    graphs = []
    for i, graph_id in enumerate(np.asarray(arrays["graph_ids"])):

        def part(field: str, offsets: str, i: int = i) -> np.ndarray:
            return arrays[field][cut[offsets][i] : cut[offsets][i + 1]]

        c = int(cut["config_offsets"][i + 1] - cut["config_offsets"][i])
        nc = int(cut["configurable_offsets"][i + 1] - cut["configurable_offsets"][i])
        packed = int(bits[i]) == 4
        codes = part("config_codes", "code_offsets")
        codes = codes if packed else codes.view(f"<u{bits[i] // 8}")
        counts = np.asarray(part("row_counts", "configurable_offsets"))
        book = Codebook(
            codes=codes.reshape(c, (nc + 1) // 2 if packed else nc),
            rows=part("codebook_rows", "codebook_offsets"),
            offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            packed=packed,
        )
        feat_rows = np.asarray(part("node_feat_rows", "feat_row_offsets"))
        graphs.append(
            LayoutGraph(
                graph_id=str(graph_id),
                node_feat=feat_rows[np.asarray(part("node_feat_index", "node_offsets"))],
                node_opcode=part("node_opcode", "node_offsets"),
                edge_index=part("edge_index", "edge_offsets"),
                node_config_ids=part("node_config_ids", "configurable_offsets"),
                configs=book,
                config_runtime=part("config_runtime", "config_offsets"),
                node_splits=part("node_splits", "split_offsets"),
            )
        )
    return graphs


def check_layout_cache(
    cache_path: Path, verify: bool = True
) -> tuple[list[LayoutGraph] | None, str | None]:
    """A cached split's graphs (read-only views) and None, or None and what is wrong (or absent)."""
    loaded, problem = check_array_folder(
        cache_path,
        FIELDS,
        version=LAYOUT_CACHE_VERSION,
        structure_problem=_structure_problem,
        verify=verify,
    )
    if loaded is None:
        return None, problem
    return _graphs(loaded.arrays), None


def load_cached_graphs(
    folder: Path | str,
    files: Sequence[Path],
    cache_dir: Path | str,
    read: Callable[[Path], LayoutGraph],
    log: Callable[[str], None] | None = print,
) -> list[LayoutGraph]:
    """Every graph of `files` from the cache, built with `read` if needed; a damaged cache is
    one `log` line (print when None) and rebuilt, an unwritable one a PipelineError."""
    folder = Path(folder).expanduser()
    cache_path = layout_cache_path(cache_dir, folder, files)
    graphs, problem = check_layout_cache(cache_path)
    if graphs is not None:
        return graphs
    if problem is not None:
        (log or print)(f"cache: {cache_path} is damaged ({problem}); rebuilding it from {folder}")
        discard_directory(cache_path)
    try:
        save_layout_cache((read(f) for f in files), cache_path, folder.name)
    except OSError as e:
        raise PipelineError(
            f"{cache_path}: cannot write the cache ({describe_write_error(e)}; nothing kept); "
            "free space there or pass another --cache_dir (or none)"
        ) from None
    # Just written (or published by a concurrent writer): verified, and stamped, next load.
    graphs, problem = check_layout_cache(cache_path, verify=False)
    if graphs is None:
        raise PipelineError(
            f"{cache_path}: the cache just written does not load ({problem}); check --cache_dir"
        )
    return graphs
