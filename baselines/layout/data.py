"""Reads and validates the layout files; every defect is one `PipelineError` line.
`node_config_feat` becomes a codebook while read, a block at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

import numpy as np

from baselines.core.errors import PipelineError
from baselines.core.format import NODE_FEAT_DIM, OPCODE_VOCAB_SIZE
from baselines.core.io_utils import list_npz_files
from baselines.core.npz import read_npz, read_whole
from baselines.layout.cache import load_cached_graphs
from baselines.layout.codebook import Codebook, CodebookBuilder
from baselines.layout.graph import (
    CONFIG_VALUE_MAX,
    CONFIG_VALUE_MIN,
    NODE_CONFIG_FEAT_DIM,
    LayoutGraph,
)
from baselines.layout.prune import count_configs, dedup_configs, sample_configs

REQUIRED_KEYS = (
    "node_feat",
    "node_opcode",
    "edge_index",
    "node_config_ids",
    "node_config_feat",
    "config_runtime",
    "node_splits",
)
ADVICE = (
    "re-download the file (python echo_download_commands.py --collections layout) "
    "or remove it from the folder"
)
EXPECTED_FOLDER = ".../npz/layout/{xla,nlp}/{default,random}/{train,valid,test}"
SHAPE_DIMS = slice(21, 27)  # node_feat shape_dimensions_0..5
MINOR_TO_MAJOR = slice(134, 140)  # node_feat layout_minor_to_major_0..5

# Configurations converted per block: bounds the float32 scratch to ~64 MB.
_BLOCK_VALUES = 1 << 24


def _bad(path: Path, problem: str, advice: str = ADVICE) -> PipelineError:
    return PipelineError(f"{path}: {problem}; {advice}")


def _config_value_problem(block: np.ndarray, first_config: int) -> str | None:
    """Where a block of node_config_feat breaks the -1..5 integer rule, or None."""
    if block.dtype.kind == "f":
        ok = np.isfinite(block) & (block == np.round(block))
    else:
        ok = np.ones(block.shape, dtype=bool)
    ok &= (block >= CONFIG_VALUE_MIN) & (block <= CONFIG_VALUE_MAX)
    if ok.all():
        return None
    c, node, col = np.argwhere(~ok)[0]
    return (
        f"node_config_feat holds {block[c, node, col]} at configuration {first_config + c}, "
        f"configurable node {node}, column {col}; values must be integers in "
        f"{CONFIG_VALUE_MIN}..{CONFIG_VALUE_MAX} (minor-to-major dimension numbers)"
    )


def _read_config_feat(
    path: Path, stream: IO[bytes], shape: tuple, fortran: bool, dtype: np.dtype
) -> Codebook:
    """node_config_feat as a `Codebook`, checked and coded a block of configurations at a time."""
    if dtype.kind not in "fiu":
        raise _bad(path, f"node_config_feat has dtype {dtype}, expected float32 or integers")
    if len(shape) != 3 or shape[2] != NODE_CONFIG_FEAT_DIM:
        raise _bad(
            path, f"node_config_feat has shape {shape}, expected (c, nc, {NODE_CONFIG_FEAT_DIM})"
        )
    c, nc, _ = shape
    whole = read_whole(stream, shape, fortran, dtype) if fortran else None
    builder = CodebookBuilder(nc)
    per_config = nc * NODE_CONFIG_FEAT_DIM
    block = max(1, _BLOCK_VALUES // max(per_config, 1))
    for start in range(0, c, block):
        rows = min(block, c - start)
        if whole is not None:
            values = whole[start : start + rows]
        else:
            values = read_whole(stream, (rows, nc, NODE_CONFIG_FEAT_DIM), False, dtype)
        problem = _config_value_problem(values, start)
        if problem:
            raise _bad(path, problem)
        builder.add(values)
    return builder.finish()


def read_layout_file(path: Path | str) -> LayoutGraph:
    """Reads and validates one layout file; the graph id is the file name without `.npz`."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PipelineError(f"{path}: layout file not found; check the path")
    raw = read_npz(
        path,
        REQUIRED_KEYS,
        ADVICE,
        readers={"node_config_feat": lambda *member: _read_config_feat(path, *member)},
    )
    return validate_layout_arrays(path, path.stem, raw)


def read_config_count(path: Path | str) -> int:
    """A layout file's configuration count, from `config_runtime`'s header only."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise PipelineError(f"{path}: layout file not found; check the path")
    (shape,) = read_npz(path, ("config_runtime",), ADVICE, shapes_only=True).values()
    if len(shape) != 1:
        raise _bad(path, f"config_runtime has shape {shape}, expected (configs,)")
    return int(shape[0])


def _integers(path: Path, key: str, value: np.ndarray) -> np.ndarray:
    if value.dtype.kind not in "iu":
        raise _bad(path, f"{key} has dtype {value.dtype}, expected integers")
    return value.astype(np.int64, copy=False)


def validate_layout_arrays(path: Path, graph_id: str, raw: dict[str, np.ndarray]) -> LayoutGraph:
    """Checks shapes, dtypes, ids, value ranges and finiteness; returns a LayoutGraph.
    `raw["node_config_feat"]`: a `Codebook` (checked while read) or integers in -1..5."""
    node_feat = raw["node_feat"]
    if node_feat.dtype.kind not in "fiu":
        raise _bad(path, f"node_feat has dtype {node_feat.dtype}, expected float32")
    if node_feat.ndim != 2 or node_feat.shape[1] != NODE_FEAT_DIM:
        raise _bad(path, f"node_feat has shape {node_feat.shape}, expected (n, {NODE_FEAT_DIM})")
    n = node_feat.shape[0]
    if n == 0:
        raise _bad(path, "graph has no nodes")
    if not np.all(np.isfinite(node_feat)):
        raise _bad(path, "node_feat contains NaN or inf values")

    opcode = _integers(path, "node_opcode", raw["node_opcode"])
    if opcode.shape != (n,):
        raise _bad(path, f"node_opcode has shape {opcode.shape}, expected ({n},) like node_feat")
    if opcode.min() < 0 or opcode.max() >= OPCODE_VOCAB_SIZE:
        raise _bad(path, f"node_opcode must hold opcode ids in 0..{OPCODE_VOCAB_SIZE - 1}")

    edges = _integers(path, "edge_index", raw["edge_index"])
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise _bad(path, f"edge_index has shape {edges.shape}, expected (m, 2)")
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        bad = int(edges.max()) if edges.max() >= n else int(edges.min())
        raise _bad(path, f"edge_index refers to node {bad}, outside 0..{n - 1}")

    config_ids = _integers(path, "node_config_ids", raw["node_config_ids"])
    if config_ids.ndim != 1:
        raise _bad(path, f"node_config_ids has shape {config_ids.shape}, expected (nc,)")
    if config_ids.size and (config_ids.min() < 0 or config_ids.max() >= n):
        bad = int(config_ids.max()) if config_ids.max() >= n else int(config_ids.min())
        raise _bad(path, f"node_config_ids refers to node {bad}, outside 0..{n - 1}")
    if np.unique(config_ids).size != config_ids.size:
        raise _bad(path, "node_config_ids lists a node more than once")

    runtime = _integers(path, "config_runtime", raw["config_runtime"])
    if runtime.ndim != 1 or runtime.size == 0:
        raise _bad(path, f"config_runtime has shape {runtime.shape}, expected (c,) with c >= 1")
    if np.any(runtime < 0):
        raise _bad(path, "config_runtime has negative values")

    config_feat = raw["node_config_feat"]
    expected = (runtime.size, config_ids.size, NODE_CONFIG_FEAT_DIM)
    if config_feat.shape != expected:
        raise _bad(
            path,
            f"node_config_feat has shape {config_feat.shape}, expected {expected} "
            "(configurations of config_runtime x node_config_ids x 18)",
        )
    if not isinstance(config_feat, Codebook):
        problem = _config_value_problem(config_feat, 0)
        if problem:
            raise _bad(path, problem)
        config_feat = Codebook.from_values(config_feat)

    splits = _integers(path, "node_splits", raw["node_splits"]).reshape(-1)
    if splits.size and (splits.min() < 0 or splits.max() > n or np.any(np.diff(splits) < 0)):
        raise _bad(path, f"node_splits must be non-decreasing node ids in 0..{n}")

    return LayoutGraph(
        graph_id=graph_id,
        node_feat=node_feat.astype(np.float32, copy=False),
        node_opcode=opcode.astype(np.int32),
        edge_index=edges.astype(np.int32),
        node_config_ids=config_ids.astype(np.int32),
        configs=config_feat,
        config_runtime=runtime,
        node_splits=splits,
    )


def layout_minor_to_major(node_feat: np.ndarray) -> np.ndarray:
    """node_feat's layout columns 134-139 as float32, -1 past the tensor's rank (the
    file pads with 0); the rank is the count of non-zero shape dims (columns 21-26)."""
    node_feat = np.asarray(node_feat)
    rank = np.count_nonzero(node_feat[:, SHAPE_DIMS], axis=1)
    m2m = node_feat[:, MINOR_TO_MAJOR].astype(np.float32)
    m2m[np.arange(m2m.shape[1])[None, :] >= rank[:, None]] = -1.0
    return m2m


def _folder_hint(folder: Path) -> str:
    """What the folder should look like, and which of its names does not fit."""
    parts = folder.parts[-4:]
    wrong = []
    if len(parts) == 4:
        for name, allowed in zip(
            parts, (("layout",), ("xla", "nlp"), ("default", "random"), ("train", "valid", "test"))
        ):
            if name not in allowed:
                wrong.append(f"{name!r} is not {'/'.join(allowed)}")
    detail = f" ({'; '.join(wrong)})" if wrong else ""
    return f"expected a folder {EXPECTED_FOLDER}{detail}"


def list_layout_files(folder: Path | str, max_files: int | None = None) -> list[Path]:
    """Sorted *.npz files of a layout split folder (the first `max_files` when given)."""
    hint = _folder_hint(Path(folder).expanduser())
    return list_npz_files(
        folder,
        max_files,
        missing=f"layout folder does not exist; {hint}; download it "
        "(python echo_download_commands.py --collections layout) or fix the path",
        empty=f"layout folder has no .npz files; {hint}; "
        "check the path or untar the download there",
    )


def load_layout_split(
    folder: Path | str,
    max_files: int | None = None,
    max_configs: int | None = None,
    seed: int = 0,
    drop_duplicates: bool = False,
    log: Callable[[str], None] | None = print,
    cache_dir: Path | str | None = None,
) -> list[LayoutGraph]:
    """Every graph of a split folder in file-name order, its configurations counted
    (`count_configs`), deduplicated (`drop_duplicates`), then sampled (`max_configs`, by
    `seed`), said in a `log` line; `cache_dir`: through the cache."""
    files = list_layout_files(folder, max_files)
    if cache_dir is None:
        raw: Iterable[LayoutGraph] = (read_layout_file(path) for path in files)
    else:
        raw = load_cached_graphs(folder, files, cache_dir, read_layout_file, log)
    graphs, dropped, graphs_with_dups, sampled = [], 0, 0, 0
    for graph in raw:
        if drop_duplicates:  # counts each configuration before dropping its repeats
            graph, n_dropped = dedup_configs(graph)
            dropped += n_dropped
            graphs_with_dups += n_dropped > 0
        else:
            graph = count_configs(graph)
        if max_configs is not None:
            sampled += graph.num_configs > max_configs
            graph = sample_configs(graph, max_configs, seed)
        graphs.append(graph)
    if log is not None and (drop_duplicates or max_configs is not None):
        notes = []
        if drop_duplicates:
            notes.append(f"dropped {dropped} duplicate configurations in {graphs_with_dups} graphs")
        if max_configs is not None:
            notes.append(f"sampled {max_configs} configurations in {sampled} graphs")
        log(f"layout {Path(folder).expanduser()}: {len(graphs)} graphs; {'; '.join(notes)}")
    return graphs
