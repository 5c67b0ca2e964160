"""Reading, validating and caching tile:xla npz files (one kernel each). A split is a
`TileSplit` of flat arrays plus offsets, cached as a memory-mapped folder of `.npy` files."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import tqdm

from baselines.core import array_cache
from baselines.core.errors import PipelineError
from baselines.core.format import (  # noqa: F401 (OPCODE_VOCAB_SIZE re-exported)
    NODE_FEAT_DIM,
    OPCODE_VOCAB_SIZE,
    NodeRows,
)
from baselines.core.io_utils import list_npz_files
from baselines.core.npz import read_npz

CONFIG_FEAT_DIM = 24
SPLITS = ("train", "valid", "test")
# Bump when the cache layout or the validation rules change.
CACHE_FORMAT_VERSION = 2
# Salts the files' fingerprint: the cache key, and the data identity of a tile run.
FINGERPRINT_SALT = f"v{CACHE_FORMAT_VERSION}"


@dataclasses.dataclass(frozen=True)
class Kernel(NodeRows):
    """One kernel: its op graph and its measured tile configurations."""

    tile_id: str
    node_feat: np.ndarray  # float32 [n, 140]
    node_opcode: np.ndarray  # int32 [n]
    edge_index: np.ndarray  # int32 [m, 2], row [u, v]: u consumes v's output
    config_feat: np.ndarray  # float32 [c, 24]
    config_runtime: np.ndarray  # int64 [c], ns
    config_runtime_normalizers: np.ndarray  # int64 [c], ns

    @property
    def num_configs(self) -> int:
        return int(self.config_feat.shape[0])

    @property
    def normalized_runtime(self) -> np.ndarray:
        """runtime / normalizer as float32: the ranking target (smaller is faster)."""
        return (self.config_runtime / self.config_runtime_normalizers).astype(np.float32)


# The arrays of a kernel file: the Kernel's.
REQUIRED_KEYS = tuple(f.name for f in dataclasses.fields(Kernel) if f.name != "tile_id")


@dataclasses.dataclass(frozen=True)
class TileSplit:
    """All kernels of one split, concatenated; kernel i owns rows offsets[i]:offsets[i+1]."""

    name: str
    tile_ids: np.ndarray  # str [k]
    node_offsets: np.ndarray  # int64 [k + 1]
    edge_offsets: np.ndarray  # int64 [k + 1]
    config_offsets: np.ndarray  # int64 [k + 1]
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray  # local (per-kernel) node ids
    config_feat: np.ndarray
    config_runtime: np.ndarray
    config_runtime_normalizers: np.ndarray

    def __len__(self) -> int:
        return int(self.tile_ids.shape[0])

    @property
    def num_configs(self) -> np.ndarray:
        return np.diff(self.config_offsets)

    @property
    def num_nodes(self) -> np.ndarray:
        return np.diff(self.node_offsets)

    @property
    def has_labels(self) -> bool:
        """False for the test split, whose runtimes are hidden (all zero)."""
        return bool(self.config_runtime.size) and bool(np.any(self.config_runtime > 0))

    def kernel(self, i: int) -> Kernel:
        n0, n1 = self.node_offsets[i], self.node_offsets[i + 1]
        e0, e1 = self.edge_offsets[i], self.edge_offsets[i + 1]
        c0, c1 = self.config_offsets[i], self.config_offsets[i + 1]
        return Kernel(
            tile_id=str(self.tile_ids[i]),
            node_feat=self.node_feat[n0:n1],
            node_opcode=self.node_opcode[n0:n1],
            edge_index=self.edge_index[e0:e1],
            config_feat=self.config_feat[c0:c1],
            config_runtime=self.config_runtime[c0:c1],
            config_runtime_normalizers=self.config_runtime_normalizers[c0:c1],
        )

    def kernels(self) -> Iterable[Kernel]:
        return (self.kernel(i) for i in range(len(self)))

    def normalized_runtimes(self) -> list[np.ndarray]:
        """Per kernel, runtime / normalizer of each configuration (the ranking target)."""
        return [k.normalized_runtime for k in self.kernels()]

    def replace(self, **changes) -> TileSplit:
        return dataclasses.replace(self, **changes)


def _bad(path: Path | str, problem: str) -> PipelineError:
    return PipelineError(f"{path}: {problem}")


def read_kernel(path: Path | str) -> Kernel:
    """Reads and validates one kernel file; raises PipelineError on any defect."""
    path = Path(path)
    advice = "re-download or regenerate this file, or remove it from the split"
    raw = read_npz(path, REQUIRED_KEYS, advice)
    return validate_kernel(path, path.stem, raw)


def _as(path: Path, key: str, value: np.ndarray, kind: str, dtype) -> np.ndarray:
    if value.dtype.kind not in kind:
        raise _bad(path, f"{key} has dtype {value.dtype}, expected {np.dtype(dtype).name}-like")
    return value.astype(dtype, copy=False)


def validate_kernel(path: Path, tile_id: str, raw: dict[str, np.ndarray]) -> Kernel:
    """Checks shapes, dtypes, edge ids and finiteness; returns a canonical Kernel."""
    node_feat = _as(path, "node_feat", raw["node_feat"], "fiu", np.float32)
    opcode = raw["node_opcode"]
    edges = raw["edge_index"]
    config_feat = _as(path, "config_feat", raw["config_feat"], "fiu", np.float32)
    runtime = _as(path, "config_runtime", raw["config_runtime"], "iu", np.int64)
    normalizers = _as(
        path, "config_runtime_normalizers", raw["config_runtime_normalizers"], "iu", np.int64
    )

    if node_feat.ndim != 2 or node_feat.shape[1] != NODE_FEAT_DIM:
        raise _bad(path, f"node_feat has shape {node_feat.shape}, expected (n, {NODE_FEAT_DIM})")
    n = node_feat.shape[0]
    if n == 0:
        raise _bad(path, "kernel has no nodes")
    if opcode.shape != (n,):
        raise _bad(path, f"node_opcode has shape {opcode.shape}, expected ({n},) like node_feat")
    if opcode.dtype.kind not in "iu" or (opcode.size and (opcode.min() < 0 or opcode.max() > 255)):
        raise _bad(path, "node_opcode must hold integer opcode ids in 0..255")
    if edges.size == 0:
        edges = edges.reshape(0, 2)
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise _bad(path, f"edge_index has shape {edges.shape}, expected (m, 2)")
    if edges.dtype.kind not in "iu":
        raise _bad(path, f"edge_index has dtype {edges.dtype}, expected integers")
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise _bad(
            path,
            f"edge_index refers to node {int(edges.max())} or {int(edges.min())}, "
            f"outside 0..{n - 1}",
        )
    if config_feat.ndim != 2 or config_feat.shape[1] != CONFIG_FEAT_DIM:
        raise _bad(
            path, f"config_feat has shape {config_feat.shape}, expected (c, {CONFIG_FEAT_DIM})"
        )
    c = config_feat.shape[0]
    if c == 0:
        raise _bad(path, "kernel has no configurations")
    for key, arr in (("config_runtime", runtime), ("config_runtime_normalizers", normalizers)):
        if arr.shape != (c,):
            raise _bad(path, f"{key} has shape {arr.shape}, expected ({c},) like config_feat")
    for key, arr in (("node_feat", node_feat), ("config_feat", config_feat)):
        if not np.all(np.isfinite(arr)):
            raise _bad(path, f"{key} contains NaN or inf values")
    if np.any(runtime < 0):
        raise _bad(path, "config_runtime has negative values")
    if np.any(normalizers <= 0):
        raise _bad(path, "config_runtime_normalizers must be positive")
    return Kernel(
        tile_id=tile_id,
        node_feat=node_feat,
        node_opcode=opcode.astype(np.int32),
        edge_index=edges.astype(np.int32),
        config_feat=config_feat,
        config_runtime=runtime,
        config_runtime_normalizers=normalizers,
    )


def list_split_files(split_dir: Path | str, max_files: int | None = None) -> list[Path]:
    """Sorted npz files of a split (first `max_files` when given); errors when none."""
    return list_npz_files(
        split_dir,
        max_files,
        missing="split directory does not exist; download the data "
        "(python echo_download_commands.py) or pass --data_root",
        empty="split has no .npz files; check --data_root",
    )


def stack_kernels(name: str, kernels: Sequence[Kernel]) -> TileSplit:
    def offsets(sizes: list[int]) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def cat(field: str, empty_shape: tuple[int, ...], dtype) -> np.ndarray:
        parts = [getattr(k, field) for k in kernels]
        return np.concatenate(parts) if parts else np.zeros(empty_shape, dtype)

    return TileSplit(
        name=name,
        tile_ids=np.array([k.tile_id for k in kernels], dtype=str),
        node_offsets=offsets([k.num_nodes for k in kernels]),
        edge_offsets=offsets([k.edge_index.shape[0] for k in kernels]),
        config_offsets=offsets([k.num_configs for k in kernels]),
        node_feat=cat("node_feat", (0, NODE_FEAT_DIM), np.float32),
        node_opcode=cat("node_opcode", (0,), np.int32),
        edge_index=cat("edge_index", (0, 2), np.int32),
        config_feat=cat("config_feat", (0, CONFIG_FEAT_DIM), np.float32),
        config_runtime=cat("config_runtime", (0,), np.int64),
        config_runtime_normalizers=cat("config_runtime_normalizers", (0,), np.int64),
    )


def concat_splits(name: str, parts: Sequence[TileSplit]) -> TileSplit:
    """Joins splits end to end (offsets shifted, arrays concatenated)."""

    def offsets(field: str) -> np.ndarray:
        starts = np.cumsum([0] + [int(getattr(p, field)[-1]) for p in parts[:-1]])
        return np.concatenate(
            [[0]] + [getattr(p, field)[1:] + start for p, start in zip(parts, starts)]
        ).astype(np.int64)

    arrays = {
        f: np.concatenate([getattr(p, f) for p in parts])
        for f in _ARRAY_FIELDS
        if not f.endswith("_offsets")
    }
    return TileSplit(
        name=name,
        node_offsets=offsets("node_offsets"),
        edge_offsets=offsets("edge_offsets"),
        config_offsets=offsets("config_offsets"),
        **arrays,
    )


def _read_chunk(name: str, files: Sequence[Path]) -> TileSplit:
    return stack_kernels(name, [read_kernel(f) for f in files])


# Below this many files a process pool costs more to start than it saves.
PROCESS_POOL_MIN_FILES = 256


def read_files(
    name: str, files: Sequence[Path], num_workers: int | None = None, progress: bool = True
) -> TileSplit:
    """Reads and validates files in parallel, in file order (processes for large splits)."""
    workers = num_workers or os.cpu_count() or 1
    with tqdm.tqdm(total=len(files), desc=f"read {name}", unit="file", disable=not progress) as bar:
        if len(files) < PROCESS_POOL_MIN_FILES or workers == 1:
            with ThreadPoolExecutor(max_workers=2 * workers) as pool:
                kernels = []
                for kernel in pool.map(read_kernel, files):
                    kernels.append(kernel)
                    bar.update(1)
            return stack_kernels(name, kernels)
        chunk = max(16, -(-len(files) // (8 * workers)))
        chunks = [list(files[i : i + chunk]) for i in range(0, len(files), chunk)]
        parts = []
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            for part, files_in_chunk in zip(
                pool.map(_read_chunk, [name] * len(chunks), chunks), chunks
            ):
                parts.append(part)
                bar.update(len(files_in_chunk))
    return concat_splits(name, parts)


def files_fingerprint(files: Sequence[Path]) -> str:
    return array_cache.files_fingerprint(files, salt=FINGERPRINT_SALT)


_ARRAY_FIELDS = [f.name for f in dataclasses.fields(TileSplit) if f.name != "name"]


# Which offsets index which arrays' rows.
_OFFSETS_OF = {
    "node_offsets": ("node_feat", "node_opcode"),
    "edge_offsets": ("edge_index",),
    "config_offsets": ("config_feat", "config_runtime", "config_runtime_normalizers"),
}
# Width and dtype of every cached array (None: the row count, checked by the offsets).
_CACHE_LAYOUT = {
    "node_feat": ((None, NODE_FEAT_DIM), "float32"),
    "node_opcode": ((None,), "int32"),
    "edge_index": ((None, 2), "int32"),
    "config_feat": ((None, CONFIG_FEAT_DIM), "float32"),
    "config_runtime": ((None,), "int64"),
    "config_runtime_normalizers": ((None,), "int64"),
    **dict.fromkeys(_OFFSETS_OF, ((None,), "int64")),
}


def save_split_cache(split: TileSplit, cache_path: Path) -> None:
    """Writes a split as a cache folder atomically, a damaged one there moved aside first."""
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    if cache_path.exists() and check_split_cache(cache_path)[1] is not None:
        array_cache.discard_directory(cache_path)
    array_cache.save_array_folder(
        cache_path,
        {field: getattr(split, field) for field in _ARRAY_FIELDS},
        name=split.name,
        version=CACHE_FORMAT_VERSION,
    )


def _structure_problem(arrays: dict[str, np.ndarray]) -> str | None:
    """What is wrong with a cached split's widths, dtypes and offsets (cheap: O(kernels))."""
    for field, (shape, dtype) in _CACHE_LAYOUT.items():
        value = arrays[field]
        if value.dtype != np.dtype(dtype) or value.ndim != len(shape):
            return f"{field}.npy is {value.dtype} with {value.ndim} dims, expected {dtype} {shape}"
        if any(want is not None and got != want for got, want in zip(value.shape, shape)):
            return f"{field}.npy has shape {value.shape}, expected {shape}"
    kernels = arrays["tile_ids"].shape
    if arrays["tile_ids"].dtype.kind != "U" or len(kernels) != 1:
        return "tile_ids.npy is not a list of names"
    for field, owners in _OFFSETS_OF.items():
        problem = array_cache.offsets_problem(arrays, field, owners, kernels[0], "kernels")
        if problem:
            return problem
    return None


def check_split_cache(cache_path: Path, verify: bool = True) -> tuple[TileSplit | None, str | None]:
    """A cached split and None, or None and what is wrong (None, None: absent); never raises."""
    loaded, problem = array_cache.check_array_folder(
        cache_path,
        _ARRAY_FIELDS,
        version=CACHE_FORMAT_VERSION,
        structure_problem=_structure_problem,
        verify=verify,
    )
    if loaded is None:
        return None, problem
    arrays = dict(loaded.arrays)
    arrays["tile_ids"] = np.asarray(arrays["tile_ids"])
    return TileSplit(name=loaded.meta["name"], **arrays), None


def load_split(
    split_dir: Path | str,
    *,
    name: str | None = None,
    max_files: int | None = None,
    cache_dir: Path | str | None = None,
    num_workers: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> TileSplit:
    """Loads one split folder, through the cache when `cache_dir` is given (rebuilt if damaged)."""
    split_dir = Path(split_dir).expanduser()
    name = name or split_dir.name
    files = list_split_files(split_dir, max_files)
    if cache_dir is None:
        return read_files(name, files, num_workers, progress)
    cache_path = Path(cache_dir).expanduser() / f"{name}-{files_fingerprint(files)}"
    cached, problem = check_split_cache(cache_path)
    if cached is not None:
        return cached
    if problem is not None:
        (log or print)(
            f"cache: {cache_path} is damaged ({problem}); rebuilding it from {split_dir}"
        )
    split = read_files(name, files, num_workers, progress)
    try:
        save_split_cache(split, cache_path)
    except OSError as e:
        raise PipelineError(
            f"{cache_path}: cannot write the cache ({e}); check --cache_dir"
        ) from None
    return split


def load_splits(
    data_root: Path | str,
    splits: Sequence[str] = SPLITS,
    *,
    max_files: int | None = None,
    cache_dir: Path | str | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, TileSplit]:
    """Loads the named splits of a data root (the first `max_files` files of each when given)."""
    return {
        s: load_split(
            Path(data_root) / s,
            name=s,
            max_files=max_files,
            cache_dir=cache_dir,
            progress=progress,
            log=log,
        )
        for s in splits
    }
